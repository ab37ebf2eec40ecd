// `agents:` and a route's `agents: true` as gateway.yaml writes them: the defaults, and a table of
// mistaken files, each refused with one `--check` problem at its key path, never an authorization
// server that issues tokens over plain http to the internet or for a route nobody signs in to.
import { describe, expect, it } from 'vitest'
import { parseConfig } from '../../src/config/config.js'
import { configProblems } from '../helpers/config.js'
import { TEST_SECRET } from '../helpers/gateway.js'

function file ({ baseUrl = 'https://gw.example.com', route = 'provider: corp\n    agents: true', section = '' } = {}): string {
  return `server: { baseUrl: ${baseUrl} }
session: { secret: ${TEST_SECRET} }
providers:
  corp: { issuer: https://login.example.com, clientId: c, clientSecret: s, scope: openid email }
routes:
  - path: /mcp
    upstream: http://127.0.0.1:9200
    ${route}
${section}`
}

describe('agents as read', () => {
  it('is on with the defaults when a route has agents: true, and off otherwise', () => {
    expect(parseConfig(file(), {}).agents).toEqual({ enabled: true, accessTokenTtlMs: 600_000, refreshTokenTtlMs: 30 * 24 * 3_600_000, registration: true, registrationsPerHour: 1000, tokenRequestsPerMinute: 600, deviceFlow: false, clientMetadataDocuments: false, clientMetadataPrivateHosts: [] })
    expect(parseConfig(file(), {}).routes[0]!.agents).toBe(true)
    expect(parseConfig(file({ route: 'provider: corp' }), {}).agents.enabled).toBe(false)
  })

  it('keeps what the section gives', () => {
    const config = parseConfig(file({ section: 'agents: { accessTokenTtl: 5m, refreshTokenTtl: 7d, registration: off, tokenRequestsPerMinute: 2000, deviceFlow: true, clientMetadataDocuments: true, clientMetadataPrivateHosts: [Agents.Corp.Internal, "[fd00::1]"] }\n' }), {})
    expect(config.agents).toEqual({ enabled: true, accessTokenTtlMs: 300_000, refreshTokenTtlMs: 7 * 24 * 3_600_000, registration: false, registrationsPerHour: 1000, tokenRequestsPerMinute: 2000, deviceFlow: true, clientMetadataDocuments: true, clientMetadataPrivateHosts: ['agents.corp.internal', '[fd00::1]'] })
  })

  it('takes a loopback http baseUrl (the demo)', () => {
    expect(configProblems(file({ baseUrl: 'http://localhost:8080' }))).toEqual([])
    expect(configProblems(file({ baseUrl: 'http://127.0.0.1:8080' }))).toEqual([])
  })
})

describe('agents refused', () => {
  it.each([
    ['an http issuer on the internet', file({ baseUrl: 'http://gw.example.com' }), 'server.baseUrl: must be https when a route has agents: true'],
    ['a public route', file({ route: 'auth: none\n    agents: true' }), 'routes[0].agents: needs auth: required'],
    ['an access token for a day', file({ section: 'agents: { accessTokenTtl: 1d }\n' }), 'agents.accessTokenTtl:'],
    ['an access token for a second', file({ section: 'agents: { accessTokenTtl: 1s }\n' }), 'agents.accessTokenTtl:'],
    ['a refresh token for a year', file({ section: 'agents: { refreshTokenTtl: 365d }\n' }), 'agents.refreshTokenTtl:'],
    ['registration neither open nor off', file({ section: 'agents: { registration: closed }\n' }), 'agents.registration:'],
    ['an unknown key', file({ section: 'agents: { staticClients: [] }\n' }), 'agents.staticClients:'],
    ['a private host given as a URL', file({ section: 'agents: { clientMetadataPrivateHosts: ["https://agents.corp"] }\n' }), 'agents.clientMetadataPrivateHosts[0]:'],
    ['a private host with a port', file({ section: 'agents: { clientMetadataPrivateHosts: ["agents.corp:8443"] }\n' }), 'agents.clientMetadataPrivateHosts[0]:'],
    ['a private host that is empty', file({ section: 'agents: { clientMetadataPrivateHosts: [""] }\n' }), 'agents.clientMetadataPrivateHosts[0]:'],
    ['a private host with a path', file({ section: 'agents: { clientMetadataPrivateHosts: ["agents.corp/x"] }\n' }), 'agents.clientMetadataPrivateHosts[0]:'],
    ['no registrations at all per hour (say registration: off)', file({ section: 'agents: { registrationsPerHour: 0 }\n' }), 'agents.registrationsPerHour:'],
    ['registrations per hour that are not a number', file({ section: 'agents: { registrationsPerHour: many }\n' }), 'agents.registrationsPerHour:'],
    ['no token requests at all per minute', file({ section: 'agents: { tokenRequestsPerMinute: 0 }\n' }), 'agents.tokenRequestsPerMinute:'],
    ['token requests per minute that are not a whole number', file({ section: 'agents: { tokenRequestsPerMinute: 1.5 }\n' }), 'agents.tokenRequestsPerMinute:'],
    ['a device flow that is not a flag', file({ section: 'agents: { deviceFlow: maybe }\n' }), 'agents.deviceFlow:'],
    ['agents that is not a flag', file({ route: 'provider: corp\n    agents: yes please' }), 'routes[0].agents:'],
  ])('%s', (_name, text, start) => {
    const problems = configProblems(text)
    expect(problems).toHaveLength(1)
    expect(problems[0]).toContain(start)
  })
})
