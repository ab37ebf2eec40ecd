// The one responder (src/access/responder.ts): every verdict at both sites, the proxy's route and
// forward-auth, as the answer each writes and the audit fields of its log line. No sockets: the
// verdicts are made here as the pipeline gives them. The proxy's and forward-auth's own tests check
// the same answers end to end.
import { describe, expect, it } from 'vitest'
import type { Verdict } from '../../src/access/authorize.js'
import { DEFAULT_IDENTITY_HEADERS } from '../../src/access/identity-headers.js'
import { LOGIN_URL_HEADER, respond, type Answer, type Site } from '../../src/access/responder.js'
import { GatewayError } from '../../src/errors.js'
import type { Identity } from '../../src/session/record.js'

const alice: Identity = { sub: 'alice', email: 'alice@example.com', groups: ['staff'], claims: { tid: ['t1'] } }
const LOGIN = '/oauth/login/demo/?next=%2Fapp%2Fx'
const route: Site = {
  kind: 'route',
  identityHeaders: DEFAULT_IDENTITY_HEADERS,
  claimHeaders: [{ name: 'x-tenant', claim: 'tid' }],
  switchAccountUrl: (next) => `/oauth/switch/demo/?next=${encodeURIComponent(next)}`,
  retry: (next) => ({ retryUrl: next }),
}
const forwardAuth: Site = { ...route, kind: 'forward-auth', claimHeaders: [], retry: () => ({ loginUrl: LOGIN }) }
const NEXT = '/app/x'

/** A fresh verdict of each kind, as the pipeline gives it (a refusal's error is filled in by the responder: one per call). */
function verdictOf (kind: Verdict['kind']): Verdict {
  switch (kind) {
    case 'allow': return { kind, accessToken: 'at-1', identity: alice, rule: 'allow[0]' }
    case 'public': return { kind }
    case 'sign_in': return { kind, loginUrl: LOGIN }
    case 'unauthenticated': return { kind, loginUrl: LOGIN, realm: 'gateway', resourceMetadata: undefined }
    case 'step_up': return { kind, loginUrl: LOGIN, realm: 'gateway', reauth: { maxAgeMs: 900_000, acr: [] }, reauthOf: { identity: alice, rule: 'allow[0]' } }
    case 'forbidden': return { kind, identity: alice, loginUrl: LOGIN, rule: 'deny[1]' }
    case 'unavailable': return { kind, error: new GatewayError('session_store_unavailable', 'The session store cannot be reached.') }
    case 'invalid_request': return { kind, reason: 'the path cannot be told' }
    case 'token_refused': return { kind, problem: 'expired', message: 'The token has expired.', scopes: [], realm: 'gateway', resourceMetadata: undefined }
  }
}
const verdicts = {
  allow: verdictOf('allow') as Extract<Verdict, { kind: 'allow' }>,
  forbidden: verdictOf('forbidden'),
  token_refused: verdictOf('token_refused'),
}

/** What an answer amounts to on the wire: its kind, status, error code and the headers it sets. */
function written (answer: Answer): Record<string, unknown> {
  if (answer.kind !== 'refuse') return { kind: answer.kind }
  const error = answer.error
  if (!(error instanceof GatewayError)) return { kind: 'refuse', status: 500 }
  return { kind: 'refuse', status: error.statusCode, code: error.code, headers: error.details.headers, loginUrl: error.details.loginUrl, retryUrl: error.details.retryUrl, switchAccountUrl: error.details.switchAccountUrl }
}

describe('every verdict, at the proxy and at forward-auth', () => {
  it.each<[Verdict['kind'], Record<string, unknown>, Record<string, unknown>]>([
    ['allow', { kind: 'forward' }, { kind: 'forward' }],
    ['public', { kind: 'forward' }, { kind: 'refuse', status: 500 }],
    ['sign_in', { kind: 'redirect' }, { kind: 'refuse', status: 500 }],
    ['unauthenticated',
      { kind: 'refuse', status: 401, code: 'unauthenticated', loginUrl: LOGIN, headers: { 'www-authenticate': 'Bearer realm="gateway"' } },
      { kind: 'refuse', status: 401, code: 'unauthenticated', loginUrl: LOGIN, headers: { 'www-authenticate': 'Bearer realm="gateway"', [LOGIN_URL_HEADER]: LOGIN } }],
    ['step_up',
      { kind: 'refuse', status: 401, code: 'insufficient_user_authentication', loginUrl: LOGIN, headers: { 'www-authenticate': 'Bearer realm="gateway", error="insufficient_user_authentication", max_age="900"' } },
      { kind: 'refuse', status: 401, code: 'insufficient_user_authentication', loginUrl: LOGIN, headers: { 'www-authenticate': 'Bearer realm="gateway", error="insufficient_user_authentication", max_age="900"', [LOGIN_URL_HEADER]: LOGIN } }],
    ['forbidden',
      { kind: 'refuse', status: 403, code: 'forbidden', loginUrl: LOGIN, switchAccountUrl: '/oauth/switch/demo/?next=%2Fapp%2Fx' },
      { kind: 'refuse', status: 403, code: 'forbidden', loginUrl: LOGIN, switchAccountUrl: '/oauth/switch/demo/?next=%2Fapp%2Fx' }],
    ['unavailable',
      { kind: 'refuse', status: 503, code: 'session_store_unavailable', retryUrl: NEXT },
      { kind: 'refuse', status: 503, code: 'session_store_unavailable', loginUrl: LOGIN }],
    ['invalid_request', { kind: 'refuse', status: 400, code: 'invalid_request' }, { kind: 'refuse', status: 400, code: 'invalid_request' }],
    ['token_refused',
      { kind: 'refuse', status: 401, code: 'invalid_token', headers: { 'www-authenticate': 'Bearer realm="gateway", error="invalid_token", error_description="The token has expired."' } },
      { kind: 'refuse', status: 401, code: 'invalid_token', headers: { 'www-authenticate': 'Bearer realm="gateway", error="invalid_token", error_description="The token has expired."' } }],
  ])('%s', (kind, atRoute, atForwardAuth) => {
    expect(written(respond(verdictOf(kind), undefined, route, NEXT))).toEqual(expect.objectContaining(atRoute))
    expect(written(respond(verdictOf(kind), undefined, forwardAuth, NEXT))).toEqual(expect.objectContaining(atForwardAuth))
  })
})

describe('what an admitted request carries', () => {
  it('the token, the identity, the assertion and the route\'s claim headers, encoded', () => {
    const answer = respond({ ...verdicts.allow, assertion: 'signed' }, undefined, route, NEXT)
    expect(answer).toEqual({
      kind: 'forward',
      audit: { decision: 'allow', user: 'alice', rule: 'allow[0]', credential: 'session' },
      allowed: { accessToken: 'at-1', keepAuthorization: false, identity: alice, assertion: 'signed', claimHeaders: [['x-tenant', 't1']] },
    })
  })

  it('a machine client\'s token in Proxy-Authorization: no token injected, the client\'s own Authorization kept', () => {
    const answer = respond({ ...verdicts.allow, via: 'proxy-authorization' }, 'Bearer t', route, NEXT)
    expect(answer).toMatchObject({ kind: 'forward', audit: { credential: 'bearer' }, allowed: { accessToken: undefined, keepAuthorization: true } })
  })

  it.each<[string, Identity, string]>([
    ['an identity header value with a control character', { ...alice, sub: 'ali\nce' }, 'x-forwarded-user'],
    ['a claim header value over its bound', { ...alice, claims: { tid: ['t'.repeat(5000)] } }, 'x-tenant'],
  ])('%s is refused (403, forbidden in the audit), naming the header, at the route', (_case, identity, header) => {
    const answer = respond({ ...verdicts.allow, identity }, undefined, route, NEXT)
    expect(answer.kind).toBe('refuse')
    expect(answer.audit.decision).toBe('forbidden')
    expect(written(answer)).toMatchObject({ status: 403, code: 'forbidden' })
    expect((answer as { error: Error }).error.message).toContain(header)
    expect((answer as { error: Error }).error.message).toMatch(/^This route /)
  })

  it('at forward-auth an unsendable identity header is "This host"', () => {
    const answer = respond({ ...verdicts.allow, identity: { ...alice, sub: 'ali\nce' } }, undefined, forwardAuth, NEXT)
    expect((answer as { error: Error }).error.message).toMatch(/^This host /)
  })
})

// A person the rules admitted, asked for a fresher sign-in (the route's `reauth`): the line names
// them, not `user: null` as for nobody signed in (an attacker's finding).
describe('a signed-in person asked to sign in again', () => {
  it.each([
    ['an API client (401 step_up)', verdictOf('step_up'), 'step_up'],
    ['a browser (302 sign_in)', { kind: 'sign_in', loginUrl: LOGIN, reauthOf: { identity: alice, rule: 'allow[0]' } } as const, 'sign_in'],
  ])('%s is audited with the person and the rule that admitted them', (_case, verdict, decision) => {
    expect(respond(verdict, undefined, route, NEXT).audit).toEqual({ decision, user: 'alice', rule: 'allow[0]', credential: 'session', reason: undefined })
  })

  it('a browser with no session is still nobody', () => {
    expect(respond(verdictOf('sign_in'), undefined, route, NEXT).audit).toEqual({ decision: 'sign_in', user: null, rule: 'none', credential: null, reason: undefined })
  })
})

describe('a caller that brought a token', () => {
  it('is refused without a sign-in or another account', () => {
    const forbidden = written(respond(verdicts.forbidden, 'Bearer t', route, NEXT))
    expect(forbidden).toMatchObject({ status: 403, loginUrl: undefined, switchAccountUrl: undefined })
    const unavailable = written(respond({ kind: 'unavailable', error: new GatewayError('session_store_unavailable', 'x') }, 'Bearer t', forwardAuth, NEXT))
    expect(unavailable).toMatchObject({ status: 503, loginUrl: undefined })
  })

  // An attacker's finding: an agent's refusal, once logged credential: agent, was offered a sign-in.
  it('an agent\'s token too (judged as its grant, refused by the rules): audited agent, no sign-in offered', () => {
    const answer = respond({ kind: 'forbidden', identity: alice, loginUrl: LOGIN, rule: 'deny[1]', ofGrant: true }, 'Bearer t', route, NEXT)
    expect(answer.audit).toMatchObject({ decision: 'forbidden', credential: 'agent' })
    expect(written(answer)).toMatchObject({ status: 403, loginUrl: undefined, switchAccountUrl: undefined })
  })

  it('is audited as bearer, with the refused token\'s reason and never the token', () => {
    const { audit } = respond(verdicts.token_refused, 'Bearer secret-token', route, NEXT)
    expect(audit).toEqual({ decision: 'token_refused', user: null, rule: 'none', credential: 'bearer', reason: 'expired' })
    expect(JSON.stringify(audit)).not.toContain('secret-token')
  })
})
