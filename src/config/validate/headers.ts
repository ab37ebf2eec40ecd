// The headers the gateway fills: identity headers, claim headers (`headers:`) and the assertion's,
// and clashes between them.
import type { AssertionConfig, ClaimHeader, IdentityHeaders, RouteConfig } from '../types.js'
import { Issues, describe, type Path } from '../problems.js'
import { CLAIM_PATH } from '../rule-lists.js'
import { reservedHeaderProblem } from '../safety.js'
import { DAY, type Sections, type RouteRaw, duration } from './values.js'

/** Headers an assertion may not be named after: the gateway already sets them, or HTTP gives them a meaning. */
const GATEWAY_SET_HEADERS = ['authorization', 'cookie', 'host', 'forwarded', 'x-real-ip']

/** The top-level `assertion` section; enabled when written in the file or when a route asks for it. */
export function validateAssertion (issues: Issues, section: Sections['assertion'], written: boolean, routes: RouteConfig[]): AssertionConfig {
  const header = section.header
  const lower = header.toLowerCase()
  const problem = filledHeaderProblem(header, true)
  if (problem !== undefined) issues.add(['assertion', 'header'], problem)
  return {
    enabled: written || routes.some((route) => route.assertion),
    header: lower,
    ttlMs: duration(issues, ['assertion', 'ttl'], section.ttl, 5000, 600_000),
    rotateEveryMs: duration(issues, ['assertion', 'rotateEvery'], section.rotateEvery, 3_600_000, 90 * DAY),
  }
}

/**
 * Why a header the gateway fills (an identity, claim or assertion header) may not have this name, or
 * undefined: a header HTTP gives a meaning, and (`gatewaySet`) one the gateway sets itself (identity
 * headers are X-Forwarded-* by default). Its shape (letters, digits and `-`) is the schema's.
 */
function filledHeaderProblem (name: string, gatewaySet: boolean): string | undefined {
  const lower = name.toLowerCase()
  if (gatewaySet && (GATEWAY_SET_HEADERS.includes(lower) || lower.startsWith('x-forwarded-'))) {
    return `must not be a header the gateway sets itself (${lower}), got ${describe(name)}`
  }
  return reservedHeaderProblem(name)
}

export function validateIdentityHeaders (issues: Issues, path: Path, raw: RouteRaw['identityHeaders']): IdentityHeaders {
  const header = (key: keyof IdentityHeaders) => {
    const name = raw[key]
    const problem = filledHeaderProblem(name, false)
    if (problem !== undefined) issues.add([...path, key], problem)
    return name.toLowerCase()
  }
  return { user: header('user'), email: header('email'), groups: header('groups') }
}

/**
 * A route's `headers`: `Name: claims.<path>`. Names as identity headers' (letters, digits and `-`,
 * none HTTP gives a meaning to, not the route's identity or assertion headers), lower case.
 */
export function validateClaimHeaders (issues: Issues, path: Path, raw: Record<string, string>): ClaimHeader[] {
  const seen = new Set<string>()
  return Object.entries(raw).flatMap(([name, source]) => {
    const at = [...path, name]
    const lower = name.toLowerCase()
    if (seen.has(lower)) {
      issues.add(at, `names the header ${lower} a second time (header names are the same in any case)`)
      return []
    }
    seen.add(lower)
    const problem = filledHeaderProblem(name, true)
    if (problem !== undefined) {
      issues.add(at, problem)
      return []
    }
    const claim = source.trim().startsWith('claims.') ? source.trim().slice('claims.'.length) : undefined
    if (claim === undefined || !CLAIM_PATH.test(claim)) {
      issues.add(at, `must be claims.<path>, such as claims.realm_access.roles or claims.tid, got ${describe(source)}`)
      return []
    }
    return [{ name: name.toLowerCase(), claim }]
  })
}

/**
 * What a route without a session cannot use (rules judge nobody, there are no claims to send), and
 * claim headers named as one of its identity headers or the assertion header (two values for one name).
 */
export function reportHeaderClashes (issues: Issues, routes: readonly RouteConfig[], assertionHeader: string): void {
  routes.forEach((route, i) => {
    if (route.auth === 'none') {
      for (const key of ['allow', 'deny'] as const) {
        if (key === 'allow' ? route.rules.allow !== undefined : route.rules.deny.length > 0) {
          issues.add(['routes', i, key], 'needs auth: required (a route without a session has nobody to judge: its requests pass before any rule)')
        }
      }
    }
    if (route.auth === 'none' && route.headers.length > 0) {
      issues.add(['routes', i, 'headers'], 'needs auth: required (a route without a session has no claims to send)')
      return
    }
    for (const header of route.headers) {
      if (Object.values(route.identityHeaders).includes(header.name) || header.name === assertionHeader) {
        issues.add(['routes', i, 'headers'], `names ${header.name}, which is one of this route's identity headers or the assertion header: give the claim another header`)
      }
    }
  })
}
