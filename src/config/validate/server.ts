// The `server` and `rateLimit` sections.
import { availableParallelism } from 'node:os'
import type { RateBudget, RateLimitConfig, ServerConfig } from '../types.js'
import { describe, Issues } from '../problems.js'
import { type Sections, duration, url } from './values.js'
import { trustProxy, checkTrustAll } from './proxy-ranges.js'

export function validateServer (issues: Issues, raw: Sections['server']): ServerConfig {
  const port = raw.port
  // Computed from the port, so the schema only describes it (defaultText).
  const baseUrl = url(issues, ['server', 'baseUrl'], raw.baseUrl, ['http', 'https']) ?? `http://localhost:${port}`
  if (raw.baseUrl !== undefined && /[?#]/.test(baseUrl)) issues.add(['server', 'baseUrl'], 'must not have a query or fragment')
  else if (raw.baseUrl !== undefined && !issues.touched(['server', 'baseUrl'])) checkOrigin(issues, baseUrl)
  const host = raw.host
  const trusted = trustProxy(issues, raw.trustProxy)
  if (!issues.touched(['server', 'host'])) checkTrustAll(issues, trusted, host)
  return {
    host,
    port,
    // As written, which checkOrigin has found to be the origin it names (an attacker's finding:
    // `https://h/.`, a trailing \r or tab, `https://h\` passed as origins and were sent on as written,
    // in every redirect_uri and Location).
    baseUrl: baseUrl.replace(/\/+$/, ''),
    trustProxy: trusted,
    shutdownTimeoutMs: duration(issues, ['server', 'shutdownTimeout'], raw.shutdownTimeout, 0, 300_000),
    // `auto` is this machine's core count, known only here.
    workers: raw.workers === 'auto' ? availableParallelism() : raw.workers,
  }
}

const RATE_WINDOWS: Record<string, number> = { s: 1000, sec: 1000, second: 1000, min: 60_000, minute: 60_000, h: 3_600_000, hour: 3_600_000 }

/** `600/min`, `10/s`, `5000/h`, or `off` (the schema has checked the form). */
export function validateRateLimit (raw: Sections['rateLimit']): RateLimitConfig {
  const value = raw.login
  if (value === false || value.trim() === 'off') return { login: undefined }
  // RATE_PATTERN (schema.ts) has let through only `N/unit` with a unit of RATE_WINDOWS.
  const [max, unit] = value.replace(/\s+/g, '').split('/') as [string, string]
  return { login: { max: Number(max), windowMs: RATE_WINDOWS[unit]! } satisfies RateBudget }
}

/**
 * The gateway's address is an origin: it serves its endpoints at the root of its host (`/oauth/`),
 * and a path (`https://example.com/auth`) would send sign-ins to `<path>/oauth/...`, which it does
 * not serve, and `next` without it (a newcomer's finding: --check passed it).
 */
function checkOrigin (issues: Issues, baseUrl: string): void {
  const url = new URL(baseUrl)
  if (url.username !== '' || url.password !== '') {
    issues.add(['server', 'baseUrl'], 'must not carry a user name or password: it is sent in every redirect_uri and Location')
    return
  }
  const path = url.pathname
  if (path !== '/' && path !== '') {
    issues.add(['server', 'baseUrl'], `must be an origin (scheme, host and port), got the path ${path}`, 'the gateway serves its own endpoints (/oauth/...) and the routes at the root of its host: give it a host name of its own')
    return
  }
  // Written as the origin it names, so that what is sent (redirect_uri, iss) is what the operator
  // registered: a re-reader's finding: `https://Gateway.Example.com`, `:443` or an IDN host were
  // sent in the parser's spelling, and a provider compares the redirect URI as text.
  const written = baseUrl.replace(/\/+$/, '')
  // The default port written out is the origin too (`http://localhost:80`, as the port warning and
  // docker-compose.yml write it: a re-reader's finding), and is sent as written.
  const withPort = url.port === '' ? `${url.protocol}//${url.host}:${url.protocol === 'https:' ? 443 : 80}` : url.origin
  if (written !== url.origin && written !== withPort) {
    // The value quoted: a trailing \r or space shows (a re-reader's finding: the message read as the value itself).
    issues.add(['server', 'baseUrl'], `must be written as the origin it names, ${url.origin}, got ${describe(baseUrl)}`, 'the gateway sends it in every redirect_uri and assertion as written, and providers compare the redirect URI as text: register that one')
  }
}
