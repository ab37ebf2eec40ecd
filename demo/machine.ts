// The demo's authorization server as the issuer of machine clients: one CI job's client
// (client credentials, RFC 6749 §4.4) and two APIs it asks tokens for, one with JWT access tokens
// (RFC 9068, checked with the issuer's keys) and one with opaque tokens (checked by introspection,
// RFC 7662). `npm run demo:provider` prints the routes that accept them and a `curl` line that gets
// a token and calls the gateway with it (docs/machine-clients.md, "Try it on your machine").
import type { MachineClient, ResourceServer } from './authorization-server.js'
import { DEMO_PROVIDER } from './options.js'

/** The CI job's client: loopback only, printed for the operator to paste. */
export const MACHINE_CLIENT: MachineClient = { client_id: 'ci-deploy', client_secret: 'ci-secret-change-me' }

/** The two APIs by resource indicator: what they grant and how their tokens look. */
const ORDERS = 'api://orders'
const REPORTS = 'api://reports'

/** The resource servers the demo's authorization server issues machine tokens for, each token living `ttl` seconds. */
export function machineResources (ttl: number): Record<string, ResourceServer> {
  return {
    [ORDERS]: { scope: 'orders.read orders.write', format: 'jwt', ttl },
    [REPORTS]: { scope: 'reports.read', format: 'opaque', ttl },
  }
}

/** The `routes:` entries that accept the machine client's tokens, in front of `appUrl`. */
export function machineRoutesYaml (appUrl: string): string {
  return `  - path: /orders/                  # a CI job's JWT access token (or a person's sign-in)
    upstream: ${appUrl}
    provider: ${DEMO_PROVIDER}
    bearer:
      audience: ${ORDERS}
      scopes: [orders.read]
  - path: /reports/                 # an opaque token, checked at the provider's introspection endpoint
    upstream: ${appUrl}
    provider: ${DEMO_PROVIDER}
    bearer:
      audience: ${REPORTS}
      introspect: true
`
}

/** The `curl` command that gets the machine client a token for `resource` with `scope`. */
export function tokenCommand (issuer: string, resource: string, scope: string): string {
  return `curl -s ${issuer}/token -d grant_type=client_credentials -d client_id=${MACHINE_CLIENT.client_id} ` +
    `-d client_secret=${MACHINE_CLIENT.client_secret} -d resource=${resource} -d scope=${scope}`
}

function duration (seconds: number): string {
  if (seconds % 3600 === 0) return `${seconds / 3600}h`
  return seconds % 60 === 0 ? `${seconds / 60}m` : `${seconds}s`
}

/** What `npm run demo:provider` says of the machine client: its credentials, the APIs, and lines to paste. */
export function machineText (issuer: string, gatewayUrl: string, ttl: number): string {
  return `  Machine client (client credentials: a CI job, a service), for the routes' bearer: blocks:
    client id     ${MACHINE_CLIENT.client_id}
    client secret ${MACHINE_CLIENT.client_secret}
    APIs          ${ORDERS}   JWT access tokens; scopes orders.read, orders.write
                  ${REPORTS}  opaque access tokens (the gateway introspects them); scope reports.read
    tokens live   ${duration(ttl)}${ttl > 60 ? ' (--token-ttl 10s to see one expire)' : ''}

  Get a token as the CI job and call your gateway with it (needs jq):

TOKEN=$(${tokenCommand(issuer, ORDERS, 'orders.read')} | jq -r .access_token)
curl -i -H "Authorization: Bearer $TOKEN" ${gatewayUrl}/orders/
`
}
