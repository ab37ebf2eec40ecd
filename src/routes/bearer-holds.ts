// A machine client's websockets and streamed answers, held with the bearer token that let them
// through (proxy/bearer-sockets.ts): each ends with the token, is checked again when the answer it
// was judged on ends (an introspection answer after 60 s), and is judged again by the route's rules
// as a request is (an attacker's findings: a socket outlived the issuer's revocation of a JWT read
// with `claimsFrom: introspection`, and a person's lost group; an event stream outlived its token).
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { ServerResponse } from 'node:http'
import { tokenAdmits } from '../access/authorize.js'
import { bearerToken, type BearerGuard, type BearerOutcome } from '../access/bearer.js'
import type { RouteGate } from '../access/gate.js'
import { GatewayError } from '../errors.js'
import { CLOCK_TOLERANCE_S } from '../oauth/access-tokens.js'
import type { BearerSockets, TokenHold, TokenRecheck } from '../proxy/bearer-sockets.js'

/**
 * An upgrade whose token passed within the clock tolerance after its `exp` (BearerSockets.admit):
 * refused, and its log line says so (`token_refused`, `expired`), not the access hook's `allow`.
 */
export function pastExp (): GatewayError {
  return new GatewayError('unauthenticated', 'The token has expired: refresh it before opening a websocket, which ends with its token.', { details: { audit: { decision: 'token_refused', reason: 'expired' } } })
}

/**
 * An upgrade whose token the access hook let through, but which was refused or gone when its
 * websocket was to be kept with it (revoked, or no longer let through by the route's rules, in
 * between): refused, and logged `token_refused`, `inactive`.
 */
export function tokenEnded (): GatewayError {
  return new GatewayError('unauthenticated', 'The token ended before this websocket connection was made.', { details: { audit: { decision: 'token_refused', reason: 'inactive' } } })
}

/** What a route's holds need: its path, its gate, its token check, and whether its rules judge the client's address. */
export interface BearerHolds {
  readonly route: string
  readonly sockets: BearerSockets
  readonly gate: RouteGate
  readonly bearer: BearerGuard
  readonly judgesAddress: boolean
}

/** A route's holds, when it takes machine clients' tokens and the gateway ends what they let through. */
export function bearerHoldsOf (route: string, sockets: BearerSockets | undefined, guard: { readonly gate: RouteGate, readonly bearer?: BearerGuard | undefined }, judgesAddress: boolean): BearerHolds | undefined {
  return sockets !== undefined && guard.bearer !== undefined ? { route, sockets, gate: guard.gate, bearer: guard.bearer, judgesAddress } : undefined
}

/**
 * How `request`'s token (which let it through) is checked again: its hold, or undefined once the
 * token is refused or the route's rules no longer let the request through. A JWT's hold runs
 * `graceMs` past its `exp`; an introspected one's ends with its answer, and is asked again then.
 * `about` gets the fields its log lines say (the route, the person, the token's hash prefix).
 */
function recheckOf (request: FastifyRequest, token: string, holds: BearerHolds, graceMs: number, about: Record<string, unknown>): TokenRecheck {
  const subject = { method: request.method, target: request.url, address: holds.judgesAddress ? request.ip : undefined }
  const held = (outcome: BearerOutcome): TokenHold | undefined => {
    if (!outcome.ok) return undefined
    about.user = outcome.identity.sub
    about.token = outcome.id.slice(0, 8)
    if (!tokenAdmits(holds.gate, subject, token, outcome)) return undefined
    return { until: outcome.introspected ? outcome.until : outcome.until + graceMs, introspected: outcome.introspected, ends: outcome.expires + graceMs }
  }
  return () => {
    const outcome = holds.bearer.recheck(token)
    return outcome instanceof Promise ? outcome.then(held) : held(outcome)
  }
}

/**
 * After the access hook: an upgrade a machine client's token let through is kept with that token,
 * so that its websocket ends at the token's `exp`, or once its issuer or the route's rules no
 * longer let it through.
 */
export function admitBearerSockets (scope: FastifyInstance, holds: BearerHolds): void {
  scope.addHook('onRequest', (request, _reply, done) => {
    const token = bearerToken(request.headers[holds.bearer.header])
    if (request.headers.upgrade?.toLowerCase() !== 'websocket' || request.audit?.decision !== 'allow' || request.audit.credential !== 'bearer' || typeof token !== 'string') return done()
    // The check the access hook has just made, answered from its cache; later, each check asks again.
    const about = { route: holds.route }
    const recheck = recheckOf(request, token, holds, 0, about)
    Promise.resolve(recheck()).then((hold) => {
      if (hold === undefined) return done(tokenEnded())
      done(holds.sockets.admit(request, hold, recheck, about) ? undefined : pastExp())
    }, done)
  })
}

/**
 * A machine client's event stream (the route's streamed answer to a request a token let through),
 * held with that token: cut once a request with it would be refused (a JWT past its `exp` and the
 * clock tolerance, an introspected token its issuer no longer calls active, a rule that no longer
 * lets its person through).
 */
export function holdBearerStream (request: FastifyRequest, response: ServerResponse, holds: BearerHolds): void {
  const token = bearerToken(request.headers[holds.bearer.header])
  if (request.audit?.credential !== 'bearer' || typeof token !== 'string') return
  const about = { route: holds.route, user: request.allowed?.identity?.sub }
  const graceMs = CLOCK_TOLERANCE_S * 1000
  holds.sockets.holdStream(response, recheckOf(request, token, holds, graceMs, about), (request.allowed?.expires ?? Infinity) + graceMs, about)
}
