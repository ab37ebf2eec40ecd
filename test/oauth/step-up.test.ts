// Step-up's one definition of "recent enough" (oauth/step-up.ts), over hostile ID token claims; the
// route a `next` is for (access/step-up-route.ts); the gate's order (the rules before the step-up); and
// the config that step-up refuses (with `bearer:`, or on a provider without ID tokens).
import { describe, expect, it } from 'vitest'
import { ConfigError, parseConfig } from '../../src/config/config.js'
import { compileGate, decide, signedIn } from '../../src/access/gate.js'
import { reauthFor, routeFor } from '../../src/access/step-up-route.js'
import { checkStepUp } from '../../src/oauth/sign-in.js'
import { AUTH_TIME_SKEW_SECONDS, stepUpProblem } from '../../src/oauth/step-up.js'
import type { ReauthConfig, RouteConfig } from '../../src/config/types.js'

const NOW_MS = 1_800_000_000_000
const NOW = NOW_MS / 1000
const FIFTEEN_MINUTES: ReauthConfig = { maxAgeMs: 900_000, acr: [] }
const GOLD: ReauthConfig = { maxAgeMs: 900_000, acr: ['urn:gold', 'urn:platinum'] }

describe('stepUpProblem', () => {
  // [what, reauth, auth_time, acr, problem]
  const cases: Array<[string, ReauthConfig, unknown, unknown, string | undefined]> = [
    ['just now', FIFTEEN_MINUTES, NOW, undefined, undefined],
    ['exactly maxAge old', FIFTEEN_MINUTES, NOW - 900, undefined, undefined],
    ['maxAge and the skew old', FIFTEEN_MINUTES, NOW - 900 - AUTH_TIME_SKEW_SECONDS, undefined, undefined],
    ['a second more', FIFTEEN_MINUTES, NOW - 901 - AUTH_TIME_SKEW_SECONDS, undefined, 'too_old'],
    ['30 minutes old', FIFTEEN_MINUTES, NOW - 1800, undefined, 'too_old'],
    ['absent', FIFTEEN_MINUTES, undefined, undefined, 'no_auth_time'],
    ['null', FIFTEEN_MINUTES, null, undefined, 'no_auth_time'],
    ['a string of now', FIFTEEN_MINUTES, String(NOW), undefined, 'no_auth_time'],
    ['NaN', FIFTEEN_MINUTES, Number.NaN, undefined, 'no_auth_time'],
    ['Infinity', FIFTEEN_MINUTES, Number.POSITIVE_INFINITY, undefined, 'no_auth_time'],
    ['an array', FIFTEEN_MINUTES, [NOW], undefined, 'no_auth_time'],
    ['zero', FIFTEEN_MINUTES, 0, undefined, 'too_old'],
    ['negative', FIFTEEN_MINUTES, -1, undefined, 'too_old'],
    ['in milliseconds by mistake (far future)', FIFTEEN_MINUTES, NOW_MS, undefined, 'no_auth_time'],
    ['a minute and more ahead (a provider\'s clock gone wrong)', FIFTEEN_MINUTES, NOW + 61, undefined, 'no_auth_time'],
    ['within the skew ahead', FIFTEEN_MINUTES, NOW + 60, undefined, undefined],
    ['a listed acr', GOLD, NOW, 'urn:platinum', undefined],
    ['another acr', GOLD, NOW, 'urn:silver', 'wrong_acr'],
    ['no acr', GOLD, NOW, undefined, 'wrong_acr'],
    ['an acr that differs in case', GOLD, NOW, 'URN:GOLD', 'wrong_acr'],
    ['an acr list', GOLD, NOW, ['urn:gold'], 'wrong_acr'],
    ['an acr that is an object', GOLD, NOW, { toString: () => 'urn:gold' }, 'wrong_acr'],
    ['an old sign-in with a listed acr', GOLD, NOW - 3600, 'urn:gold', 'too_old'],
  ]
  it.each(cases)('%s', (_what, reauth, authTime, acr, problem) => {
    expect(stepUpProblem(reauth, { authTime, acr }, NOW_MS)).toBe(problem)
  })

  it('the callback refuses what the gate would send round again, with a 403 that says the provider did not honour it', () => {
    expect(() => checkStepUp(FIFTEEN_MINUTES, { auth_time: NOW - 1800 }, NOW_MS)).toThrow(/did not honour the fresh sign-in this page needs: it reused a sign-in older than the 900 seconds/)
    expect(() => checkStepUp(FIFTEEN_MINUTES, {}, NOW_MS)).toThrow(/it did not say when you signed in\.$/)
    expect(() => checkStepUp(GOLD, { auth_time: NOW, acr: 'urn:silver' }, NOW_MS)).toThrow(/did not sign you in with one of: urn:gold, urn:platinum/)
    try {
      checkStepUp(FIFTEEN_MINUTES, undefined, NOW_MS)
      expect.unreachable()
    } catch (error) {
      expect(error).toMatchObject({ code: 'access_denied', statusCode: 403 })
    }
    expect(() => checkStepUp(GOLD, { auth_time: NOW - 10, acr: 'urn:gold' }, NOW_MS)).not.toThrow()
  })
})

describe('the route a sign-in is for', () => {
  const route = (path: string, provider: string, reauth?: ReauthConfig): RouteConfig => ({ path, provider, auth: 'required', reauth } as RouteConfig)
  const routes = [route('/', 'demo'), route('/app', 'demo'), route('/app/admin', 'demo', FIFTEEN_MINUTES), route('/gh', 'github', GOLD), route('/caf%C3%A9', 'demo', GOLD)]

  it.each([
    ['/app/admin/x', '/app/admin'],
    ['/app/admin', '/app/admin'],
    ['/app/admin?x=1', '/app/admin'],
    ['/app/administrator', '/app'],
    ['/app/x/admin/', '/app'],
    ['/elsewhere', '/'],
    ['/caf%C3%A9/x', '/caf%C3%A9'],
  ])('%s is served by %s (the longest prefix that covers it)', (target, path) => {
    expect(routeFor(routes, target)?.path).toBe(path)
  })

  it('asks the step-up only of a sign-in at the route\'s own provider', () => {
    expect(reauthFor(routes, 'demo', '/app/admin/x')).toBe(FIFTEEN_MINUTES)
    expect(reauthFor(routes, 'github', '/app/admin/x')).toBeUndefined()
    expect(reauthFor(routes, 'github', '/gh/x')).toBe(GOLD)
    expect(reauthFor(routes, 'demo', '/gh/x')).toBeUndefined()
  })
})

describe('the gate on a route with reauth', () => {
  const gate = compileGate({ path: '/admin', auth: 'required', provider: 'demo', rules: { allow: undefined, deny: [] }, public: [], reauth: FIFTEEN_MINUTES },
    (next) => `/oauth/login/demo/?next=${encodeURIComponent(next)}`, (identity) => ({ admit: identity?.sub === 'alice', rule: undefined }))
  const alice = { sub: 'alice', groups: [] }

  it('a person the rules refuse is told so, not sent to sign in again', () => {
    expect(decide(gate, { method: 'GET', target: '/admin/x', address: undefined }, true, signedIn('t', { sub: 'mallory', groups: [] }, true)).kind).toBe('forbidden')
  })

  it('a sign-in too old: a browser signs in again toward the same page, an API client is told how recent', () => {
    // Either names the person the rules admitted, for the log line (an attacker's finding: `user: null`).
    const reauthOf = { identity: alice, rule: undefined }
    expect(decide(gate, { method: 'GET', target: '/admin/x?y=1', address: undefined }, true, signedIn('t', alice, true))).toEqual({ kind: 'sign_in', loginUrl: '/oauth/login/demo/?next=%2Fadmin%2Fx%3Fy%3D1', reauthOf })
    expect(decide(gate, { method: 'GET', target: '/admin/x', address: undefined }, false, signedIn('t', alice, true))).toEqual({ kind: 'step_up', loginUrl: '/oauth/login/demo/?next=%2Fadmin%2Fx', realm: 'demo', reauth: FIFTEEN_MINUTES, reauthOf })
    expect(decide(gate, { method: 'GET', target: '/admin/x', address: undefined }, false, signedIn('t', alice)).kind).toBe('allow')
  })
})

describe('config', () => {
  const problems = (yaml: string): string[] => {
    try {
      parseConfig(yaml, {})
      return []
    } catch (error) {
      if (error instanceof ConfigError) return error.issues
      throw error
    }
  }
  const base = `providers:
  oidc: { clientId: c, clientSecret: s, issuer: "http://127.0.0.1:9/", scope: openid }
  plain: { clientId: c, clientSecret: s, authorizeUrl: "http://127.0.0.1:9/a", tokenUrl: "http://127.0.0.1:9/t", scope: read }
routes:
`
  it('refuses reauth with bearer, and on a provider without ID tokens', () => {
    expect(problems(`${base}  - { path: /api/, upstream: "http://127.0.0.1:9", provider: oidc, reauth: { maxAge: 15m }, bearer: { audience: api } }`).join('\n'))
      .toMatch(/routes\[0\]\.reauth: cannot be combined with bearer/)
    expect(problems(`${base}  - { path: /app/, upstream: "http://127.0.0.1:9", provider: plain, reauth: { maxAge: 15m } }`).join('\n'))
      .toMatch(/routes\[0\]\.reauth: needs a provider whose scope includes openid: "plain" gives no ID token/)
    expect(problems(`${base}  - { path: /app/, upstream: "http://127.0.0.1:9", provider: oidc, reauth: { maxAge: 15m, acr: [urn:gold] } }`)).toEqual([])
  })

  it.each(['urn:gold silver', 'urn:"gold"', 'urn:gold\\x', 'urn:göld', 'urn:gold\t'])('refuses the acr value %j (sent in acr_values and a quoted challenge)', (value) => {
    expect(problems(`${base}  - { path: /app/, upstream: "http://127.0.0.1:9", provider: oidc, reauth: { maxAge: 15m, acr: [${JSON.stringify(value)}] } }`).join('\n'))
      .toMatch(/routes\[0\]\.reauth\.acr\[0\]: must be printable ASCII without spaces, quotes or backslashes/)
  })
})
