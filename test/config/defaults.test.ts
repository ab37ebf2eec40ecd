// The resolved config of the smallest gateway.yaml that has a provider and a route: every default
// the schema (src/config/schema.ts) fills in, seen in one place. A default changed on purpose
// updates this snapshot; one changed by accident fails it.
import { describe, expect, it } from 'vitest'
import { parseConfig } from '../../src/config/config.js'

/** Only the keys the schema requires; no ${VAR}, no secret: nothing here differs between runs. */
const SMALLEST = `
providers:
  demo:
    clientId: demo-client
    clientSecret: demo-client-secret
    authorizeUrl: https://op.example.org/authorize
    tokenUrl: https://op.example.org/token
    scope: profile
routes:
  - path: /app/
    upstream: http://127.0.0.1:9100
    provider: demo
`

describe('config defaults', () => {
  it('resolves the smallest gateway.yaml to the schema\'s defaults', () => {
    expect(parseConfig(SMALLEST, {})).toMatchInlineSnapshot(`
      {
        "agents": {
          "accessTokenTtlMs": 600000,
          "clientMetadataDocuments": false,
          "clientMetadataPrivateHosts": [],
          "deviceFlow": false,
          "enabled": false,
          "refreshTokenTtlMs": 2592000000,
          "registration": true,
          "registrationsPerHour": 1000,
          "tokenRequestsPerMinute": 600,
        },
        "assertion": {
          "enabled": false,
          "header": "x-gateway-assertion",
          "rotateEveryMs": 86400000,
          "ttlMs": 60000,
        },
        "forwardAuth": {
          "allowedRedirectHosts": [],
          "bearer": Map {},
          "hosts": Map {},
          "previousProxySecrets": [],
          "proxySecret": undefined,
        },
        "metrics": {
          "listen": undefined,
        },
        "providers": {
          "demo": {
            "authorizeUrl": "https://op.example.org/authorize",
            "claims": {
              "email": "email",
              "groups": "groups",
              "name": "name",
              "user": "sub",
            },
            "clientId": "demo-client",
            "clientSecret": "demo-client-secret",
            "dangerouslyAllowInsecureHttp": false,
            "endSession": true,
            "issuer": undefined,
            "keptClaims": [],
            "name": "demo",
            "openid": false,
            "pkce": true,
            "scope": "profile",
            "timeoutMs": 10000,
            "tokenOnly": false,
            "tokenUrl": "https://op.example.org/token",
            "userinfoUrl": undefined,
          },
        },
        "rateLimit": {
          "login": {
            "max": 600,
            "windowMs": 60000,
          },
        },
        "routes": [
          {
            "agents": false,
            "allowedOrigins": [],
            "assertion": false,
            "auth": "required",
            "bearer": undefined,
            "headers": [],
            "identityHeaders": {
              "email": "x-forwarded-email",
              "groups": "x-forwarded-groups",
              "user": "x-forwarded-user",
            },
            "maxConnections": 128,
            "methodOverrideMaxBody": 1048576,
            "path": "/app",
            "preserveBodyBytes": undefined,
            "provider": "demo",
            "providers": [
              "demo",
            ],
            "public": [],
            "reauth": undefined,
            "rewritePrefix": undefined,
            "rules": {
              "allow": undefined,
              "deny": [],
            },
            "timeoutMs": 30000,
            "upstream": "http://127.0.0.1:9100",
            "websocket": false,
            "websocketMaxMessage": 1048576,
          },
        ],
        "server": {
          "baseUrl": "http://localhost:8080",
          "host": "0.0.0.0",
          "port": 8080,
          "shutdownTimeoutMs": 10000,
          "trustProxy": false,
          "workers": 1,
        },
        "session": {
          "cacheTtlMs": 1000,
          "cookieDomain": undefined,
          "cookieName": "gw_session",
          "cookieSecure": false,
          "maxAgeMs": 604800000,
          "previousSecrets": [],
          "secret": undefined,
          "ttlMs": 28800000,
        },
        "state": {
          "ttlMs": 300000,
        },
        "store": {
          "cluster": undefined,
          "keyPrefix": "gw:",
          "readiness": "required",
          "sentinel": undefined,
          "timeoutMs": 500,
          "type": "memory",
          "url": undefined,
          "waitForReplica": 0,
        },
        "tracing": {
          "otlp": undefined,
          "sampleRatio": 1,
          "serviceName": "oauth-gateway",
        },
      }
    `)
  })
})
