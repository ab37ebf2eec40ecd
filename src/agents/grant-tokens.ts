// The access tokens the gateway issued to agents, checked where they are used: an ES256 JWT of the
// assertion key ring (`typ` at+jwt, RFC 9068), `iss` the gateway's base URL, `aud` exactly this
// route's resource (a token for one route is refused on another), within its lifetime (60 s of
// clock skew), naming a grant (`gid`) that still has its session.
// @see https://www.rfc-editor.org/rfc/rfc9068
import { createLocalJWKSet, decodeJwt, errors, jwtVerify, type JWTVerifyGetKey } from 'jose'
import type { GrantGuard, GrantOutcome } from '../access/authorize.js'
import type { KeyRing } from '../assertion/keys.js'
import type { TokenProblem } from '../oauth/access-tokens.js'
import { agentTokenAudience } from '../oauth/urls.js'
import type { Clock } from '../ops/clock.js'
import { Lru } from '../ops/lru.js'
import type { AgentsCount } from './provider-events.js'
import type { AgentGrants } from './grants.js'

const SKEW_SECONDS = 60
/** The same skew in ms: a token is let through until its `exp` plus this, and an agent's stream lasts as long. */
export const TOKEN_SKEW_MS = SKEW_SECONDS * 1000
/**
 * Tokens whose signature this instance checked, kept until their `exp`: a request with one then
 * costs no signature check (a session cookie costs none either). Keyed by the token itself (under
 * 1 KB each, so at most a few MB), not a hash of it: a hash per request cost more than the rest of
 * the check.
 */
const CHECKED_TOKENS = 10_000

export class GrantTokens {
  private keySet: Promise<JWTVerifyGetKey> | undefined
  /** A token -> its grant, audience and `exp` (clock ms): what a verified token said. */
  private readonly checked = new Lru<string, { gid: string, resource: string, until: number }>(CHECKED_TOKENS)

  constructor (private readonly issuer: string, private readonly keys: KeyRing, private readonly grants: AgentGrants, private readonly clock: Clock, private readonly count: AgentsCount) {
    keys.onChange(() => { this.keySet = undefined })
  }

  /** The check of one route's tokens: those whose audience is `resource`. */
  forResource (resource: string): GrantGuard {
    return {
      issuedHere: (token) => this.issuedHere(token),
      checked: (token) => {
        const cookie = this.checkedBefore(token, resource)
        if (cookie !== undefined) this.count('route', 'accepted')
        return cookie
      },
      check: async (token) => {
        const outcome = await this.check(token, resource)
        this.count('route', outcome.ok ? 'accepted' : outcome.problem)
        return outcome
      },
      until: (token) => {
        const known = this.checked.get(token)
        return known?.resource === resource ? known.until : undefined
      },
    }
  }

  private issuedHere (token: string): boolean {
    try {
      return decodeJwt(token).iss === this.issuer
    } catch {
      return false
    }
  }

  /** The grant of a token this instance checked for `resource`, while still before its exp; else undefined. */
  private knownGrant (token: string, resource: string): string | undefined {
    const known = this.checked.get(token)
    return known !== undefined && known.resource === resource && this.clock.now() < known.until ? known.gid : undefined
  }

  /** The grant's session cookie for a token checked before, when the grant's cookie is at hand. */
  private checkedBefore (token: string, resource: string): string | undefined {
    const gid = this.knownGrant(token, resource)
    return gid === undefined ? undefined : this.grants.knownCookieHeader(gid)
  }

  private async check (token: string, resource: string): Promise<GrantOutcome> {
    const known = this.knownGrant(token, resource)
    if (known !== undefined) return await this.session(known)
    let gid: unknown
    let exp: unknown
    try {
      const { payload } = await jwtVerify(token, await this.verificationKeys(), {
        issuer: this.issuer,
        audience: agentTokenAudience(resource),
        algorithms: ['ES256'],
        typ: 'at+jwt',
        requiredClaims: ['exp', 'sub', 'client_id'],
        clockTolerance: SKEW_SECONDS,
        currentDate: new Date(this.clock.now()),
      })
      gid = payload.gid
      exp = payload.exp
    } catch (error) {
      return refusal(error)
    }
    if (typeof gid !== 'string' || gid === '') return { ok: false, problem: 'malformed', message: 'The token names no grant.', signed: true }
    // Kept only until its exp (without the skew): from then on it is checked, and refused, again.
    if (typeof exp === 'number') this.checked.set(token, { gid, resource, until: exp * 1000 })
    return await this.session(gid)
  }

  /** The grant's session, or `inactive` when the grant has none any more. */
  private async session (gid: string): Promise<GrantOutcome> {
    const cookie = await this.grants.cookieHeader(gid)
    if (cookie === undefined) return { ok: false, problem: 'inactive', message: 'The grant this token belongs to has ended (signed out, revoked or expired): authorize again.', signed: true }
    return { ok: true, cookie }
  }

  private async verificationKeys (): Promise<JWTVerifyGetKey> {
    this.keySet ??= this.keys.jwks().then((set) => createLocalJWKSet(set))
    return await this.keySet.catch((error: unknown) => {
      this.keySet = undefined
      throw error
    })
  }
}

/**
 * Why jose refused the token, as the gate names refusals. jose checks the claims (times, audience,
 * issuer, the required ones) only once the signature checked: such a token is the gateway's own.
 */
function refusal (error: unknown): GrantOutcome {
  const signed = error instanceof errors.JWTClaimValidationFailed || error instanceof errors.JWTExpired
  const refused = (problem: TokenProblem, message: string): GrantOutcome => ({ ok: false, problem, message, signed })
  if (error instanceof errors.JWTExpired) return refused('expired', 'The token has expired: refresh it, or authorize again.')
  if (error instanceof errors.JWTClaimValidationFailed && error.claim === 'aud') return refused('wrong_audience', 'The token was issued for another route.')
  if (error instanceof errors.JWTClaimValidationFailed && error.claim === 'nbf') return refused('not_yet_valid', 'The token is not valid yet.')
  if (error instanceof errors.JWKSNoMatchingKey) return refused('unknown_key', 'The token was signed with a key the gateway does not hold.')
  if (error instanceof errors.JWSSignatureVerificationFailed) return refused('bad_signature', 'The token\'s signature does not check.')
  return refused('malformed', 'The token is not one the gateway issued to this route.')
}
