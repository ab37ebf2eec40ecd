// One issuer's signing keys (its JWKS), the one set per provider that ID tokens at sign-in, logout
// tokens at back-channel logout and machine clients' tokens are checked against (reliability round
// 3): a token whose `kid` the set does not hold refetches it when the last fetch began more than
// JWKS_COOLDOWN_MS ago, one fetch at a time, so tokens with made-up `kid`s cost the provider at most
// one fetch per cooldown, whether the fetches succeed or fail. A failed fetch (refused, timed out,
// not a key set) keeps every key already read: a token of a known key passes while the issuer is
// down, and a set older than JWKS_MAX_AGE_MS is read again in the background, never waited for.
// (jose's createRemoteJWKSet, which sign-ins used before, waited for that read and threw when it
// failed, and timed its cooldown from the last good fetch: an outside tester's findings.)
//
// A client must not be told its token is bad when the gateway only could not tell (RFC 6750's 401
// makes it throw the token away): an unknown `kid` is refused (`JWKSNoMatchingKey`) only when a
// successful fetch begun after this token first came did not hold it, or when the issuer dropped
// that key from its set; otherwise the keys "cannot be read yet" ({@link KeysUnavailable}: 503 with
// Retry-After, the time until the next fetch may be made). Judged by when this token first came
// (its signature remembered for a cooldown or two), not by when the gateway first met its `kid`: a key published a
// moment after a read that another token of it had caused (an issuer that signs before it
// publishes), or a `kid` a stranger sent once before, was refused to the next client within the
// cooldown; nor by this request alone: a stranger who began each read just before a client's retry
// kept that client at "try again" for ever (outside testers' findings). Time is the injected clock.
// @see https://www.rfc-editor.org/rfc/rfc7517#section-5 (JWK Set)
// @see https://www.rfc-editor.org/rfc/rfc6750#section-3.1 (invalid_token)
import { hash } from 'node:crypto'
import { createLocalJWKSet, errors as joseErrors, type FlattenedJWSInput, type JSONWebKeySet, type JWSHeaderParameters, type JWTPayload, type JWTVerifyOptions } from 'jose'
import { describeCause } from '../errors.js'
import type { Clock } from '../ops/clock.js'
import type { Logger } from '../ops/logger.js'
import { Lru } from '../ops/lru.js'
import { providerFetch } from './provider-http.js'
import { verifyJwt } from './verify-jwt.js'

/**
 * A token signed with a key the set does not hold (`kid` unknown) refetches the set unless a fetch
 * began this recently (jose's default is 30 s, which kept sign-ins failing that long after a
 * provider rotated its key). It also bounds what tokens with made-up `kid`s can cost the provider:
 * one JWKS fetch per this long, per gateway process and provider.
 */
export const JWKS_COOLDOWN_MS = 5000

/** A set read this long ago is read again in the background when a token is checked (jose's own default). */
export const JWKS_MAX_AGE_MS = 10 * 60_000
/** How many `kid`s the issuer dropped from its set are remembered (their tokens refused at once): a forgotten one only costs one more 503. */
const DROPPED_KIDS = 1000

/** The keys cannot be read now (no set yet, or the `kid` may be newer than the set): try again in `retryAfterS`. */
export class KeysUnavailable extends Error {
  constructor (readonly retryAfterS: number, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'KeysUnavailable'
  }
}

type LocalSet = ReturnType<typeof createLocalJWKSet>
type Key = Awaited<ReturnType<LocalSet>>

/** A `kid` as remembered: short ones as they are, long ones (a stranger's choice) by their hash. */
function kidName (header: JWSHeaderParameters): string {
  const kid = typeof header.kid === 'string' ? header.kid : ''
  return kid.length <= 128 ? kid : hash('sha256', kid, 'base64url')
}

/** The key set in a JWKS answer, or why it is none: not 200, not JSON, not a set, no key in it. */
async function readSet (url: string, timeoutMs: number): Promise<{ local: LocalSet, kids: string[] }> {
  const response = await providerFetch(url, { method: 'GET', headers: { accept: 'application/json, application/jwk-set+json' }, signal: AbortSignal.timeout(timeoutMs) })
  if (response.status !== 200) throw new Error(`the JWKS answered ${response.status}`)
  const json = await response.json() as JSONWebKeySet
  // An empty set is a key set (RFC 7517): the issuer withdrew every key (one revoked before its
  // successor is out), and its tokens are refused, not kept passing (an outside tester's finding).
  const local = createLocalJWKSet(json)
  return { local, kids: json.keys.map((key) => kidName({ kid: key.kid })) }
}

export class IssuerKeys {
  private local: LocalSet | undefined
  private kids: readonly string[] = []
  /** Fetches started so far; `generation`: the one that read the set held now. */
  private started = 0
  private generation = 0
  /** When the set held now was fetched, and when the last fetch (good or not) began. */
  private fetchedAt = -Infinity
  private triedAt = -Infinity
  /** Why the last fetch failed; undefined when it succeeded. */
  private failure: unknown
  private pending: Promise<void> | undefined
  /** The `kid`s the issuer dropped from its set ('' once the set is empty: a token naming no key). */
  private readonly dropped = new Lru<string, true>(DROPPED_KIDS)
  /**
   * Tokens of unknown `kid`s, by a hash of their signature: the fetches started when each first
   * came. Kept for one or two cooldowns after each time it comes (this window's and the last
   * one's), not by count: a stranger's flood of made-up tokens pushed a client's entry out of a
   * bounded list before its retry, which then counted as its first arrival, 503 again, for ever (a
   * re-reader's finding). A flood costs memory for the tokens of two windows only; a client that
   * retries later than its Retry-After meets one more 503 at most.
   */
  private met = new Map<string, number>()
  private metBefore = new Map<string, number>()
  private metSince = -Infinity

  /** `name`: the provider, in log lines and messages. */
  constructor (private readonly name: string, private readonly url: string, private readonly timeoutMs: number,
    private readonly clock: Clock, private readonly log: Logger | undefined) {}

  /** jose's key lookup for `jwtVerify`: rejects `JWKSNoMatchingKey` (a refusal) or {@link KeysUnavailable}. */
  readonly getKey = async (header: JWSHeaderParameters, token: FlattenedJWSInput): Promise<Key> => {
    // Fetches begun from now on were begun after this token was met.
    const arrived = this.started
    if (this.local === undefined) {
      if (this.pending === undefined && !this.coolingDown()) void this.refetch()
      await this.pending
      if (this.local === undefined) throw this.unavailable()
    } else if (this.clock.now() - this.fetchedAt >= JWKS_MAX_AGE_MS && this.pending === undefined && !this.coolingDown()) {
      // Read again in the background; this token is judged by the keys held (a failure keeps them).
      void this.refetch()
    }
    const found = await this.lookup(this.local!, header, token)
    if (found !== undefined) return found
    // No set can hold a key for it (a `kid` that is not a string): a refusal now. The set holds its
    // `kid` and that key is not for its `alg`: read again when the cooldown allows (an issuer that
    // moved to another algorithm under the same `kid`: a re-reading's finding), then a refusal, not
    // "try again" (hostile tokens are refused, never taken for an outage, however many come).
    if (header.kid !== undefined) {
      if (typeof header.kid !== 'string') throw new joseErrors.JWKSNoMatchingKey()
      if (this.kids.includes(kidName(header))) return await this.heldKidAgain(header, token)
    }
    const name = kidName(header)
    // Only its holder can send a token again: a stranger cannot move when someone else's first came.
    const firstCame = this.firstCame(hash('sha256', token.signature, 'base64url'), arrived)
    if (this.pending === undefined && !this.coolingDown()) void this.refetch()
    if (this.pending !== undefined) {
      await this.pending
      const after = await this.lookup(this.local!, header, token)
      if (after !== undefined) return after
    }
    const refusing = this.dropped.get(name) === true ? -1 : firstCame
    if (this.failure === undefined && this.generation > refusing) throw new joseErrors.JWKSNoMatchingKey()
    throw this.unavailable()
  }

  /** When the token known by `seen` first came (the fetches started then): remembered now as `arrived` if it is new. */
  private firstCame (seen: string, arrived: number): number {
    const now = this.clock.now()
    if (now - this.metSince >= JWKS_COOLDOWN_MS) {
      this.metBefore = now - this.metSince < 2 * JWKS_COOLDOWN_MS ? this.met : new Map()
      this.met = new Map()
      this.metSince = now
    }
    // Carried into this window when it comes again: kept while its holder keeps sending it.
    const known = this.met.get(seen) ?? this.metBefore.get(seen) ?? arrived
    this.met.set(seen, known)
    return known
  }

  /** A `kid` the set holds, whose key is not for the token's `alg`: the set read again if the cooldown allows, then the key or a refusal. */
  private async heldKidAgain (header: JWSHeaderParameters, token: FlattenedJWSInput): Promise<Key> {
    if (this.pending === undefined && !this.coolingDown()) void this.refetch()
    if (this.pending !== undefined) await this.pending
    const after = await this.lookup(this.local!, header, token)
    if (after !== undefined) return after
    throw new joseErrors.JWKSNoMatchingKey()
  }

  /** Fetches begun so far: a read counts as begun after a token met now when {@link readAgain} is given this. */
  get mark (): number {
    return this.started
  }

  /**
   * After a token's signature failed with the keys held: whether keys read since `arrived` (the
   * {@link mark} when the token was met) are held now, reading them once more first when none is
   * and the cooldown allows, as for an unknown `kid`. A key the issuer re-published under a `kid`
   * already held (a rotation that keeps its `kid`), or added where the token names none, is then
   * found by verifying again (an outside tester's finding: such tokens were refused until the
   * background read, up to 10 minutes); a forged signature costs the issuer at most one read per
   * cooldown, and within it is refused at once, as before.
   */
  async readAgain (arrived: number): Promise<boolean> {
    if (this.generation <= arrived && this.pending === undefined && !this.coolingDown()) void this.refetch()
    if (this.pending !== undefined) await this.pending
    return this.generation > arrived
  }

  /** The key for `header` in `local`; undefined when it holds none for it. */
  private async lookup (local: LocalSet, header: JWSHeaderParameters, token: FlattenedJWSInput): Promise<Key | undefined> {
    try {
      return await local(header, token)
    } catch (error) {
      if (error instanceof joseErrors.JWKSNoMatchingKey) return undefined
      throw error
    }
  }

  /** Whether the last fetch began less than the cooldown ago (no other may begin yet). */
  private coolingDown (): boolean {
    return this.clock.now() - this.triedAt < JWKS_COOLDOWN_MS
  }

  private unavailable (): KeysUnavailable {
    const seconds = Math.max(1, Math.ceil((this.triedAt + JWKS_COOLDOWN_MS - this.clock.now()) / 1000))
    const message = this.failure === undefined
      ? `The token is signed with a key provider "${this.name}" had not published when its keys were last read; try again in ${seconds} s.`
      : `The signing keys of provider "${this.name}" could not be read; try again in ${seconds} s.`
    return new KeysUnavailable(seconds, message, { cause: this.failure })
  }

  /** One fetch; its outcome replaces the set, or keeps it and says why not. Never rejects. */
  private refetch (): Promise<void> {
    const generation = ++this.started
    const began = this.clock.now()
    this.triedAt = began
    this.pending = readSet(this.url, this.timeoutMs).then(({ local, kids }) => {
      // Said once when the set becomes empty (or is empty at the first read), not at every read.
      if (kids.length === 0 && (this.kids.length > 0 || this.generation === 0)) this.log?.warn({ provider: this.name, url: this.url }, 'the issuer publishes no signing key: every token of it is refused until it publishes one')
      // A key the issuer no longer publishes: its tokens are refused at once, not answered "try again".
      for (const kid of this.kids) if (!kids.includes(kid)) this.dropped.set(kid, true)
      // So does a token that names no key, which any key held would have served (a tester's finding: "try again").
      if (kids.length === 0) this.dropped.set('', true)
      this.local = local
      this.kids = kids
      this.generation = generation
      this.fetchedAt = began
      if (this.failure !== undefined) this.log?.info({ provider: this.name }, 'signing keys read again; tokens are checked against them')
      this.failure = undefined
    }, (error: unknown) => {
      if (this.failure === undefined) {
        // The cause's fields too (a closed connection, a body cut off or too large): the message of
        // the HTTP client's own error is "fetch failed" for each (an outside tester's finding).
        this.log?.warn({ provider: this.name, url: this.url, reason: error instanceof Error ? error.message : String(error), cause: describeCause(error) },
          `signing keys could not be read; tokens of keys already read keep passing, others wait until they can be (sign-ins 502 provider_unavailable, machine clients 503 issuer_keys_unavailable; tried at most once per ${JWKS_COOLDOWN_MS / 1000} s)`)
      }
      this.failure = error ?? new Error('the JWKS could not be read')
    }).finally(() => { this.pending = undefined })
    return this.pending
  }
}

/**
 * A JWT's claims, verified with its issuer's keys. A signature that fails with the keys held may be
 * of a key the issuer published since under a `kid` already held: it is verified once more after
 * the keys are read again, when that may be done ({@link IssuerKeys.readAgain}).
 */
export async function verifiedClaims (token: string, keys: IssuerKeys, options: JWTVerifyOptions): Promise<JWTPayload> {
  const arrived = keys.mark
  try {
    return (await verifyJwt(token, keys.getKey, options)).payload
  } catch (error) {
    if (!(error instanceof joseErrors.JWSSignatureVerificationFailed) || !await keys.readAgain(arrived)) throw error
    return (await verifyJwt(token, keys.getKey, options)).payload
  }
}
