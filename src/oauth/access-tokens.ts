// Access tokens that machine clients bring (CI jobs, CLIs, services, AI agents): checked here, with
// no Fastify in it, against the providers that issued them. A JWT is verified with jose against the
// issuer's keys from discovery: an asymmetric `alg` only (never `none`, never HS*: a public key
// used as an HMAC secret proves nothing), the exact `iss` of a configured provider, `exp` required
// and `exp`/`nbf` within 60 s, and never an ID token (`typ` `id+jwt`, or a `nonce`). Tokens that are
// not JWTs go, where the route asks, to the issuer's RFC 7662 introspection endpoint with the
// gateway's client credentials. What each route asks besides (audience, scopes) is access/bearer.ts's.
//
// A verified token is cached by the SHA-256 of the token (never the token itself) for as long as it
// passes (a JWT to its `exp` plus the 60 s tolerance, an introspected one at most 60 s), in a
// bounded LRU: a request with a known token costs a hash and a map lookup, no signature check. Keys
// are fetched per issuer into a set of their own (issuer-keys.ts) with the sign-in set's refetch
// rule: an unknown `kid` refetches it when it is older than 5 s, one fetch at a time. While the
// keys cannot be read (the issuer down, or a `kid` newer than the set read moments ago) a token is
// answered 503 `issuer_keys_unavailable` with Retry-After, never refused: a 401 would tell the
// client to throw away a token that may be good.
// @see https://www.rfc-editor.org/rfc/rfc9068 (JWT profile for access tokens)
// @see https://www.rfc-editor.org/rfc/rfc7662 (token introspection)
import { hash as digest } from 'node:crypto'
import { decodeJwt, decodeProtectedHeader, errors as joseErrors, type JWTPayload, type ProtectedHeaderParameters } from 'jose'
import { TooManyCandidates } from './verify-jwt.js'
import { sameIssuer } from '../config/bearer-section.js'
import { GatewayError, waitedOn } from '../errors.js'
import type { Clock } from '../ops/clock.js'
import { Lru } from '../ops/lru.js'
import { introspection, INTROSPECTION_CACHE_MS } from './introspection.js'
import { JWKS_COOLDOWN_MS, KeysUnavailable, verifiedClaims, type IssuerKeys } from './issuer-keys.js'
import { PersonClaims } from './person-claims.js'
import { TOKEN_MESSAGES, tokenMessage } from './token-messages.js'
import type { Providers, ResolvedProvider } from './providers.js'

/** Why a token is refused: a metrics label and a log field, never a token or subject. */
export type TokenProblem =
  | 'no_token' | 'malformed' | 'not_a_jwt' | 'algorithm' | 'id_token' | 'other_token' | 'unknown_issuer' | 'unknown_key' | 'bad_signature'
  | 'no_expiry' | 'expired' | 'not_yet_valid' | 'inactive' | 'sender_constrained' | 'wrong_audience' | 'insufficient_scope' | 'no_subject'
  | 'wrong_subject'

/** A token this gateway has verified: who issued it and what it says. */
export interface VerifiedToken {
  /** SHA-256 of the token, base64url: the cache key, and the name assertions are cached under. */
  readonly hash: string
  /** The configured provider (by name) that issued it. */
  readonly issuer: string
  readonly claims: Readonly<JWTPayload>
  /** Clock milliseconds until which this verification holds (its `exp`; at most 60 s when introspected). */
  readonly until: number
  /**
   * Clock milliseconds until which it passes without being checked again: a JWT's `exp` plus the
   * clock tolerance, within which it still verifies (else each request in that minute verified it
   * again, and asked a route's `claimsFrom` source again); `until` when introspected.
   */
  readonly kept: number
  /** Its issuer's introspection endpoint vouched for it (an opaque token): only routes that introspect accept it. */
  readonly introspected: boolean
}

export type TokenCheck =
  | { readonly ok: true, readonly token: VerifiedToken }
  | { readonly ok: false, readonly problem: TokenProblem, readonly message: string }

/** Algorithms of public-key signatures: the only ones a token from a provider's JWKS may use. */
export const ASYMMETRIC_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519']

/** How far `exp` and `nbf` may be off the gateway's clock (seconds). */
export const CLOCK_TOLERANCE_S = 60
/** An unknown `kid` refetches an issuer's keys at most this often: the sign-in key set's rule. */
export const BEARER_JWKS_COOLDOWN_MS = JWKS_COOLDOWN_MS

/**
 * A token bound to a key (`cnf`: DPoP's `jkt`, mutual TLS's `x5t#S256`) is good only with a proof of
 * that key, which the Bearer scheme does not carry: whoever copied it could replay it here.
 * @see https://www.rfc-editor.org/rfc/rfc9449#section-7.1
 * @see https://www.rfc-editor.org/rfc/rfc8705#section-3
 */
/** A JWT's compact form: three base64url parts (the signature may be empty only for `none`, refused anyway). */
function isCompactJwt (token: string): boolean {
  let dots = 0
  for (let i = 0; i < token.length; i++) {
    const code = token.charCodeAt(i)
    if (code === 46 /* . */) dots++
    else if (!(code >= 48 && code <= 57) && !(code >= 65 && code <= 90) && !(code >= 97 && code <= 122) && code !== 45 && code !== 95) return false
  }
  return dots === 2
}

function refused (problem: TokenProblem, message: string): TokenCheck {
  return { ok: false, problem, message }
}

/** The media type in `typ`, lower case and without `application/` (RFC 7515 §4.1.9). */
function mediaType (header: ProtectedHeaderParameters): string | undefined {
  return typeof header.typ === 'string' ? header.typ.split(';')[0]!.trim().toLowerCase().replace(/^application\//, '') : undefined
}

/**
 * 503 `issuer_keys_unavailable`: the token cannot be judged now, with when to try again. A 503 is
 * no verdict on the token, so it carries no `WWW-Authenticate` error (RFC 6750 §3.1 names none).
 * @see https://www.rfc-editor.org/rfc/rfc9110#section-10.2.3 (Retry-After)
 */
function keysUnavailable (message: string, retryAfterS: number, cause: unknown): GatewayError {
  return new GatewayError('issuer_keys_unavailable', message, { cause, details: { headers: { 'retry-after': String(retryAfterS) } } })
}

/** An introspection answer's `token_type` or `typ` that names another kind of token than an access token. */
function notAnAccessToken (type: unknown): boolean {
  return typeof type === 'string' && /refresh|offline|id[_-]?token|^id$/i.test(type)
}

/**
 * Why a JWT, by what it says of itself, is another kind of token than an access token: an ID token
 * (`typ` `id+jwt`, a `nonce`, an `at_hash` or `c_hash`, or its own `typ` claim `ID` or
 * `Serialized-ID` as Keycloak writes), a logout token or
 * another security event (`typ` `logout+jwt`/`secevent+jwt`, an `events` claim: RFC 8417; its `typ` claim
 * `Logout`), or a
 * refresh token (its `typ` claim `Refresh` or `Offline`). Undefined: nothing says so.
 * @see https://openid.net/specs/openid-connect-backchannel-1_0.html#LogoutToken
 */
function otherKind (header: ProtectedHeaderParameters, claims: JWTPayload): TokenCheck | undefined {
  const type = mediaType(header)
  if (type === 'id+jwt' || claims.nonce !== undefined || claims.at_hash !== undefined || claims.c_hash !== undefined || (typeof claims.typ === 'string' && /^(?:serialized-)?id$/i.test(claims.typ))) return refused('id_token', TOKEN_MESSAGES.idToken)
  if (type === 'logout+jwt' || type === 'secevent+jwt' || claims.events !== undefined || (typeof claims.typ === 'string' && /^logout$/i.test(claims.typ))) return refused('other_token', TOKEN_MESSAGES.securityEvent)
  if (notAnAccessToken(claims.typ)) return refused('other_token', TOKEN_MESSAGES.refreshToken)
  return undefined
}

/** What a failed jose verification means for the caller: a refusal, or (thrown) the provider's keys cannot be read. */

function verificationProblem (error: unknown, provider: ResolvedProvider): TokenCheck {
  if (error instanceof KeysUnavailable) throw keysUnavailable(error.message, error.retryAfterS, error.cause)
  if (error instanceof joseErrors.JWTExpired) return refused('expired', TOKEN_MESSAGES.expired)
  if (error instanceof joseErrors.JWTClaimValidationFailed) {
    if (error.claim === 'nbf') return refused('not_yet_valid', TOKEN_MESSAGES.notYetValid)
    if (error.claim === 'exp' && error.reason === 'missing') return refused('no_expiry', TOKEN_MESSAGES.noExpiry)
    return refused('malformed', tokenMessage('claimNotValid', { claim: error.claim }))
  }
  if (error instanceof joseErrors.JWKSNoMatchingKey) return refused('unknown_key', TOKEN_MESSAGES.unknownKey)
  if (error instanceof TooManyCandidates) return refused('unknown_key', TOKEN_MESSAGES.tooManyKeys)
  if (error instanceof joseErrors.JWSSignatureVerificationFailed) return refused('bad_signature', TOKEN_MESSAGES.badSignature)
  if (error instanceof joseErrors.JOSEAlgNotAllowed || error instanceof joseErrors.JOSENotSupported) return refused('algorithm', TOKEN_MESSAGES.algorithm)
  if (error instanceof joseErrors.JWSInvalid || error instanceof joseErrors.JWTInvalid) {
    return refused('malformed', TOKEN_MESSAGES.notWellFormed)
  }
  throw new GatewayError('provider_unavailable', `The signing keys of provider "${provider.name}" could not be read.`, { cause: error })
}

export class AccessTokens {
  private readonly cache: Lru<string, VerifiedToken>
  /** Introspections under way, by token hash and issuers: concurrent requests with one token share one. */
  private readonly introspecting = new Map<string, Promise<TokenCheck>>()

  /** The person claims a token lacks, from its issuer's userinfo or introspection (`bearer.claimsFrom`). */
  readonly person: PersonClaims

  constructor (private readonly providers: Providers, private readonly clock: Clock, maxEntries = 10_000) {
    this.cache = new Lru(maxEntries)
    this.person = new PersonClaims(providers, clock, maxEntries)
  }

  /** How many verified tokens are cached (at most `maxEntries`). */
  get size (): number {
    return this.cache.size
  }

  /**
   * Checks `token` as issued by one of `issuers` (provider names). Answers at once (no promise) for a
   * token verified before and not expired. Rejects `issuer_keys_unavailable` (503, Retry-After) when a
   * JWT's issuer's discovery or keys cannot be read, `provider_unavailable` when its introspection
   * endpoint cannot be reached: an outage, not a refusal.
   * @param introspected the issuers, among `issuers`, at whose introspection endpoints a token that
   * is not a JWT is checked, in order (none: it is refused); no other issuer ever sees it
   */
  check (token: string, issuers: readonly string[], introspected: readonly string[]): TokenCheck | Promise<TokenCheck> {
    // One-shot: about half a microsecond less per request than createHash's object (docs/performance.md).
    const hash = digest('sha256', token, 'base64url')
    const known = this.cache.peek(hash)
    if (known !== undefined) {
      if (this.clock.now() < known.kept && (known.introspected ? introspected : issuers).includes(known.issuer)) return { ok: true, token: known }
      if (this.clock.now() >= known.kept) this.cache.delete(hash)
    }
    if (isCompactJwt(token)) return this.verifyJwt(token, hash, issuers)
    if (introspected.length === 0) return refused('not_a_jwt', TOKEN_MESSAGES.notJwt)
    // One introspection per token and set of issuers: a route that accepts other issuers must not
    // be handed the answer of an issuer it does not trust.
    const asking = JSON.stringify([hash, introspected])
    const joined = this.introspecting.get(asking)
    if (joined !== undefined) return joined.catch((error: unknown) => { throw waitedOn(error) })
    const pending = this.introspect(token, hash, introspected).finally(() => this.introspecting.delete(asking))
    this.introspecting.set(asking, pending)
    return pending
  }

  /**
   * The provider among `issuers` whose `iss` is `iss`, exactly. A provider whose discovery fails does
   * not stop a token of another one; when no provider matches and one could not be asked, whose the
   * token is cannot be told: that provider's failure is thrown (an outage, not a refusal).
   */
  private async issuerOf (iss: unknown, issuers: readonly string[]): Promise<ResolvedProvider | undefined> {
    if (typeof iss !== 'string') return undefined
    // Only the issuers configured under the token's `iss` are looked up (discovery confirms it), so a
    // token of one never waits for another's discovery that hangs (an outside tester's finding: a
    // GitHub Actions token waited out an unreachable issuer listed before it, every few seconds).
    const wanted = sameIssuer(iss)
    const named = issuers.filter((name) => {
      const configured = this.providers.configuredIssuer(name)
      return configured !== undefined && sameIssuer(configured) === wanted
    })
    let failure: IssuerUnavailable | undefined
    for (const name of named.length > 0 ? named : issuers) {
      try {
        const provider = await this.providers.get(name)
        if (provider.expectedIssuer === iss) return provider
      } catch (error) {
        failure ??= new IssuerUnavailable(named.length > 0 ? name : undefined, error)
      }
    }
    if (failure !== undefined) throw failure
    return undefined
  }

  private async verifyJwt (token: string, hash: string, issuers: readonly string[]): Promise<TokenCheck> {
    let header: ProtectedHeaderParameters
    let unverified: JWTPayload
    try {
      header = decodeProtectedHeader(token)
      unverified = decodeJwt(token)
    } catch {
      return refused('malformed', TOKEN_MESSAGES.notWellFormed)
    }
    if (typeof header.alg !== 'string' || !ASYMMETRIC_ALGORITHMS.includes(header.alg)) return refused('algorithm', TOKEN_MESSAGES.asymmetricOnly)
    const other = otherKind(header, unverified)
    if (other !== undefined) return other
    if (unverified.cnf !== undefined) return refused('sender_constrained', TOKEN_MESSAGES.senderConstrained)
    let provider: ResolvedProvider | undefined
    try {
      provider = await this.issuerOf(unverified.iss, issuers)
    } catch (error) {
      // No discovery yet, so no keys: the same "try again" as keys that cannot be read (discovery is retried after as long).
      const { provider: name, cause } = error as IssuerUnavailable
      const whose = name === undefined ? 'the token\'s issuer' : `provider "${name}"`
      throw keysUnavailable(`The signing keys of ${whose} could not be read (its configuration could not be read); try again in ${BEARER_JWKS_COOLDOWN_MS / 1000} s.`, BEARER_JWKS_COOLDOWN_MS / 1000, cause)
    }
    if (provider === undefined) return refused('unknown_issuer', TOKEN_MESSAGES.unknownIssuer)
    let claims: JWTPayload
    try {
      claims = await verifiedClaims(token, this.keySet(provider), { issuer: provider.expectedIssuer, algorithms: ASYMMETRIC_ALGORITHMS, clockTolerance: CLOCK_TOLERANCE_S, currentDate: new Date(this.clock.now()), requiredClaims: ['exp'] })
    } catch (error) {
      return verificationProblem(error, provider)
    }
    const verified: VerifiedToken = { hash, issuer: provider.name, claims, until: claims.exp! * 1000, kept: (claims.exp! + CLOCK_TOLERANCE_S) * 1000, introspected: false }
    this.cache.set(hash, verified)
    return { ok: true, token: verified }
  }

  /** The issuer's keys (issuer-keys.ts: one set per provider, which sign-ins use too). */
  private keySet (provider: ResolvedProvider): IssuerKeys {
    if (provider.keys === undefined) throw new GatewayError('provider_unavailable', `Provider "${provider.name}" publishes no signing keys (jwks_uri).`)
    return provider.keys
  }

  /**
   * RFC 7662 at each issuer that advertises an introspection endpoint, in order, until one says
   * the token is active. `exp`, `nbf` and `iss` are checked as for a JWT.
   */
  private async introspect (token: string, hash: string, issuers: readonly string[]): Promise<TokenCheck> {
    let asked = false
    // An issuer whose configuration cannot be read (down since the gateway started, or unreachable)
    // does not stop the others: its failure is the answer only when none of them calls the token
    // active (it might have). One that was read but whose introspection fails (an error, a 429, a
    // timeout) ends it with 502: that it fail is no stranger's way to send its tokens on to the
    // issuers listed after it (an outside reviewer's point).
    let failure: unknown
    for (const name of issuers) {
      let provider: ResolvedProvider
      try {
        provider = await this.providers.get(name)
      } catch (error) {
        failure ??= error
        continue
      }
      if (provider.introspectionUrl === undefined) continue
      asked = true
      const claims = await introspection(provider, token)
      if (claims.active !== true) continue
      if (claims.iss !== undefined && claims.iss !== provider.expectedIssuer) continue
      // Active, but not an access token: a refresh token (oidc-provider leaves its token_type out;
      // Keycloak says typ Refresh or Offline), meant for the token endpoint with the client's own
      // authentication, or an ID token. As an access token it is no token at all.
      if (notAnAccessToken(claims.token_type) || notAnAccessToken(claims.typ)) return refused('inactive', TOKEN_MESSAGES.inactive)
      if (claims.cnf !== undefined) return refused('sender_constrained', TOKEN_MESSAGES.senderConstrained)
      const now = this.clock.now() / 1000
      if (typeof claims.exp === 'number' && claims.exp + CLOCK_TOLERANCE_S <= now) return refused('expired', TOKEN_MESSAGES.expired)
      if (typeof claims.nbf === 'number' && claims.nbf - CLOCK_TOLERANCE_S > now) return refused('not_yet_valid', TOKEN_MESSAGES.notYetValid)
      const until = Math.min(this.clock.now() + INTROSPECTION_CACHE_MS, typeof claims.exp === 'number' ? claims.exp * 1000 : Infinity)
      const verified: VerifiedToken = { hash, issuer: provider.name, claims: claims as JWTPayload, until, kept: until, introspected: true }
      if (until > this.clock.now()) this.cache.set(hash, verified)
      return { ok: true, token: verified }
    }
    if (failure !== undefined) throw failure
    return asked
      ? refused('inactive', TOKEN_MESSAGES.inactive)
      : refused('not_a_jwt', TOKEN_MESSAGES.noIntrospection)
  }
}

/** Why a token's issuer could not be looked up: the provider, when the token's `iss` named it. */
class IssuerUnavailable extends Error {
  constructor (readonly provider: string | undefined, override readonly cause: unknown) {
    super('the issuer\'s configuration could not be read', { cause })
  }
}
