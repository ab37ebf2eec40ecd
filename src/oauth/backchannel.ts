// Back-channel logout: the provider POSTs a logout token naming a session of its own (`sid`) or a
// user (`sub`); once the token is verified in full, every gateway session signed in with that
// session or user ends, on every instance (the store's session index, and the invalidation
// broadcast that sign-out uses).
// @see https://openid.net/specs/openid-connect-backchannel-1_0.html
import { createHash } from 'node:crypto'
import type { Clock } from '../ops/clock.js'
import type { Logger } from '../ops/logger.js'
import { errors as joseErrors, type JWTPayload } from 'jose'
import { KeysUnavailable, verifiedClaims } from './issuer-keys.js'
import { TooManyCandidates } from './verify-jwt.js'
import { keysOutage } from './client.js'
import { GatewayError } from '../errors.js'
import type { ProviderConfig } from '../config/types.js'
import { issuerSiblings } from '../session/person-index.js'
import type { Sessions } from '../session/session.js'
import { isPendingSignInKey, ownClaim, storeKeys, type SessionStore } from '../store/store.js'
import type { ResolvedProvider } from './providers.js'
import type { SessionIndex } from './session-index.js'

/** The member of the `events` claim that makes a JWT a logout token. */
export const BACKCHANNEL_LOGOUT_EVENT = 'http://schemas.openid.net/event/backchannel-logout'
/** A logout token older than this (by its `iat`) is refused; its `jti` is remembered this long. */
export const LOGOUT_TOKEN_MAX_AGE_S = 300
const CLOCK_TOLERANCE_S = 60

/** What a verified logout token names. */
export interface LogoutClaims {
  sid?: string
  sub?: string
  jti: string
}

const invalid = (message: string, cause?: unknown) => new GatewayError('invalid_request', message, { cause })

function joseProblem (error: unknown, provider: string): GatewayError {
  // jose reports an iat older than maxTokenAge as expired, naming iat.
  if (error instanceof joseErrors.JWTExpired && error.claim === 'iat') return invalid('The logout token has no iat, or one in the future or too long ago.', error)
  if (error instanceof joseErrors.JWTExpired) return invalid('The logout token has expired.', error)
  if (error instanceof joseErrors.JWTClaimValidationFailed) {
    switch (error.claim) {
      case 'iss': return invalid('The logout token was issued by another issuer (iss).', error)
      case 'aud': return invalid('The logout token is meant for another client (aud).', error)
      case 'iat': return invalid('The logout token has no iat, or one in the future or too long ago.', error)
      case 'jti': return invalid('The logout token has no jti.', error)
      default: return invalid(`The logout token's ${error.claim.slice(0, 32)} claim is invalid.`, error)
    }
  }
  if (error instanceof joseErrors.JWSSignatureVerificationFailed || error instanceof joseErrors.JWKSNoMatchingKey ||
    error instanceof joseErrors.JOSEAlgNotAllowed || error instanceof TooManyCandidates ||
    // A JWK Set holds no symmetric keys: an HS256 token (signed with the client secret, say) lands here.
    error instanceof joseErrors.JOSENotSupported) {
    return invalid('The logout token is not signed with the provider\'s keys.', error)
  }
  // The token may be good: the keys it needs could not be read. A 5xx, not 400 ("this token is
  // bad"), which would tell the provider not to send it again (an outside tester's finding).
  // Logged at debug: the keys log the outage once, and a provider sends its refused tokens again.
  if (error instanceof KeysUnavailable) return new GatewayError('provider_unavailable', error.message, { cause: error, details: { log: keysOutage(provider) } })
  return invalid('The logout token is not a valid signed JWT.', error)
}

/**
 * Verifies a logout token as the spec's §2.6 says: signature with the provider's JWKS, `iss`,
 * `aud`, `iat` (recent), `exp` when present, an `events` claim with the back-channel logout
 * member, `sid` or `sub`, no `nonce`, a `jti`. Throws `invalid_request` naming the first problem.
 * @see https://openid.net/specs/openid-connect-backchannel-1_0.html#Validation
 */
export async function verifyLogoutToken (provider: ResolvedProvider, token: unknown, currentDate?: Date): Promise<LogoutClaims> {
  if (typeof token !== 'string' || token === '') throw invalid('The request has no logout_token.')
  if (!provider.keys) throw invalid(`Provider "${provider.name}" is not an OpenID Connect provider: there are no keys to verify a logout token with.`)
  let claims: JWTPayload
  try {
    claims = await verifiedClaims(token, provider.keys, {
      issuer: provider.expectedIssuer,
      audience: provider.clientId,
      requiredClaims: ['iat', 'jti'],
      maxTokenAge: LOGOUT_TOKEN_MAX_AGE_S,
      clockTolerance: CLOCK_TOLERANCE_S,
      ...(currentDate ? { currentDate } : {}),
    })
  } catch (error) {
    throw joseProblem(error, provider.name)
  }
  return logoutClaims(claims)
}

/** The claims §2.6 asks of a logout token whose signature and times were verified. */
function logoutClaims (claims: JWTPayload): LogoutClaims {
  // §2.4: `events` is a JSON object, and so is its back-channel logout member (not null, not a list).
  const isObject = (value: unknown) => typeof value === 'object' && value !== null && !Array.isArray(value)
  const events = claims.events
  if (!isObject(events) || !isObject((events as Record<string, unknown>)[BACKCHANNEL_LOGOUT_EVENT])) {
    throw invalid(`The logout token has no events claim with the member ${BACKCHANNEL_LOGOUT_EVENT}.`)
  }
  if (claims.nonce !== undefined) throw invalid('The logout token carries a nonce, which a logout token must not.')
  const sid = typeof claims.sid === 'string' && claims.sid !== '' ? claims.sid : undefined
  const sub = typeof claims.sub === 'string' && claims.sub !== '' ? claims.sub : undefined
  if (sid === undefined && sub === undefined) throw invalid('The logout token names neither sid nor sub.')
  if (typeof claims.jti !== 'string' || claims.jti === '') throw invalid('The logout token has no jti.')
  return { jti: claims.jti, ...(sid !== undefined ? { sid } : {}), ...(sub !== undefined ? { sub } : {}) }
}

/**
 * The providers configured with the same issuer and client id as each one, itself included. The
 * provider knows one client and sends its logout token to one address: it ends the sessions
 * signed in under every name of that client (an attacker's finding: those under the second name lived on).
 */
export function clientSiblings (providers: Readonly<Record<string, Pick<ProviderConfig, 'issuer' | 'openid' | 'clientId'>>>): (provider: string) => readonly string[] {
  const sameIssuer = issuerSiblings(providers)
  return (name) => sameIssuer(name).filter((other) => providers[other]?.clientId === providers[name]?.clientId)
}

/** Deletes a kept sign-in, done once a replica has the delete (a first try answered 503 may have left it on the master alone). */
async function endKept (store: SessionStore, key: string): Promise<void> {
  await store.end(key)
  await store.settled(key)
}

export class BackchannelLogout {
  constructor (
    private readonly store: SessionStore,
    private readonly index: SessionIndex,
    private readonly sessions: Sessions,
    private readonly log: Logger,
    private readonly clock: Clock,
    /** {@link clientSiblings}. */
    private readonly sameClient: (provider: string) => readonly string[] = (provider) => [provider]
  ) {}

  /**
   * Verifies `token` for `provider`, marks its `jti` used, and ends the sessions it names: those
   * with its `sid` when it has one, else every session of its `sub`, signed in under any name of the
   * same client ({@link clientSiblings}). Returns how many ended. A provider that does not announce
   * back-channel logout is refused (`invalid_request`): none of its sessions is listed to end.
   */
  async logout (provider: ResolvedProvider, token: unknown): Promise<number> {
    const claims = await verifyLogoutToken(provider, token, new Date(this.clock.now()))
    // Its sign-ins were listed nowhere (sign-in.ts providerSession): a 200 would tell the provider
    // that the logout took place while every session went on. Refused after the verification, so
    // that only the provider learns it, and before the jti is taken, so that it can be sent again.
    if (!provider.backchannelLogout) {
      this.log.warn({ provider: provider.name }, 'back-channel logout refused: the provider\'s discovery document does not say backchannel_logout_supported, so its sign-ins are not listed for it')
      throw invalid(`Provider "${provider.name}" does not offer back-channel logout (its discovery document does not say backchannel_logout_supported): no session is listed for a logout token to end.`)
    }
    const jti = createHash('sha256').update(claims.jti).digest('base64url')
    // 2 s more than a token can be accepted for: its age is checked in whole seconds.
    const rememberMs = (LOGOUT_TOKEN_MAX_AGE_S + 2 * CLOCK_TOLERANCE_S + 2) * 1000
    // Given back when the store fails, the claim too (a reply that came too late may be of a claim
    // Redis made), or the provider's retry is refused as a replay and the sessions never end (found
    // through a suite run on a busy machine: only the later steps gave it back).
    // Used once for the client, under whichever of its names it came (an attacker's finding: it ended the other name's sessions again).
    const names = this.sameClient(provider.name)
    const used = ownClaim(this.store, storeKeys.usedState(`logout-token:${names[0] ?? provider.name}:${jti}`))
    if (!(await used.take(rememberMs))) throw invalid('The logout token has already been used (jti).')
    const [claim, value] = claims.sid !== undefined ? ['sid', claims.sid] as const : ['sub', claims.sub!] as const
    let ids: string[] = []
    try {
      // Marked first: a sign-in of this provider session indexed after the read below ends itself.
      for (const name of names) await this.index.markLoggedOut(name, claim, value)
      // Read, ended, then taken out of the index: a store that fails half-way (a 503, a reply come
      // too late) leaves the index whole for the provider's retry of the same token.
      ids = [...new Set((await Promise.all(names.map((name) => this.index.find(name, claim, value)))).flat())]
      for (const id of ids) {
        // A kept sign-in that waits for the person's consent to an agent (agents/pending.ts) goes with its provider session.
        if (isPendingSignInKey(id)) await endKept(this.store, id)
        else await this.sessions.endById(id)
        // Every session of the subject: one a sign-in in its browser renamed since the index was read
        // too (an outside tester's finding). Not by `sid`: a rename is a new sign-in, another provider session.
        if (claim === 'sub' && !isPendingSignInKey(id)) await this.sessions.endRenamed(id)
      }
      for (const name of names) await this.index.drop(name, claim, value, ids)
    } catch (error) {
      // The retry must be taken: the jti is released (best effort, since the store may fail again:
      // it then stays used until rememberMs, and those sessions end at their own timeouts).
      await used.giveBack()
      throw error
    }
    this.log.info({ provider: provider.name, by: claim, sessions: ids.length }, 'back-channel logout')
    return ids.length
  }
}
