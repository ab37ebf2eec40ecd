// The `agents` section and what routes with `agents: true` need of the rest of the file.
import type { AgentsConfig, RouteConfig, ServerConfig } from '../types.js'
import { Issues } from '../problems.js'
import { isLoopbackHost } from '../loopback.js'
import { DAY, duration, type Sections } from './values.js'

/**
 * The authorization server for agents: on when a route has `agents: true` (the section only tunes
 * it). Its issuer is `server.baseUrl`, which OAuth 2.1 wants on https (loopback http is the demo's).
 */
export function validateAgents (issues: Issues, raw: Sections['agents'], routes: readonly RouteConfig[], server: ServerConfig): AgentsConfig {
  const enabled = routes.some((route) => route.agents)
  const base = new URL(server.baseUrl)
  if (enabled && base.protocol !== 'https:' && !isLoopbackHost(base.hostname)) {
    issues.add(['server', 'baseUrl'], 'must be https when a route has agents: true: it is the issuer of their tokens, and clients send codes and refresh tokens to it')
  }
  return {
    enabled,
    accessTokenTtlMs: duration(issues, ['agents', 'accessTokenTtl'], raw.accessTokenTtl, 60_000, 3_600_000),
    refreshTokenTtlMs: duration(issues, ['agents', 'refreshTokenTtl'], raw.refreshTokenTtl, 3_600_000, 90 * DAY),
    registration: raw.registration === 'open',
    registrationsPerHour: raw.registrationsPerHour ?? 1000,
    tokenRequestsPerMinute: raw.tokenRequestsPerMinute ?? 600,
    deviceFlow: raw.deviceFlow === true,
    clientMetadataDocuments: raw.clientMetadataDocuments === true,
    clientMetadataPrivateHosts: (raw.clientMetadataPrivateHosts ?? []).map((host) => host.toLowerCase()),
  }
}
