// Signed identity assertions for upstreams: an ES256 JWT (RFC 7519) saying who the user is, for one
// audience (the upstream's origin). Not signed per request: one assertion is reused per session,
// provider and audience until less than a third of its lifetime is left, or the person's groups or
// address change, from bounded LRU caches (the proxy's header rewrite reads its route's without a
// promise).
// @see https://www.rfc-editor.org/rfc/rfc7519#section-4.1 (registered claims)
import { SignJWT } from 'jose'
import type { Identity } from '../session/record.js'
import type { Clock } from '../ops/clock.js'
import type { KeyRing } from './keys.js'
import { Lru } from '../ops/lru.js'

export interface AssertionOptions {
  /** `iss`: the gateway's server.baseUrl. */
  issuer: string
  /** `exp` - `iat`. */
  ttlMs: number
  /** What "now" is for `iat`, `exp` and renewal (injected: tests move it). */
  clock: Clock
  /**
   * Cached assertions per route audience, and in all for the audiences forward-auth is asked for;
   * the least recently used goes first.
   */
  maxEntries?: number
  /** Forward-auth audiences kept at once (each a small object; their assertions share maxEntries). */
  maxAudiences?: number
}

interface Entry {
  token: string
  /** After this (clock time, ms), a new assertion is signed. */
  renewAt: number
}

/** The e-mail address an assertion shows: none when the provider marked it unverified. */
const shownEmail = (identity: Identity) => identity.emailVerified === false ? undefined : identity.email

/**
 * What each identity's assertion says (`sub`, the shown e-mail, `groups`; `provider` and `aud` are
 * the cache's own), as a key: made once per identity object (a session's and a token's are the same
 * object from request to request until they are read again).
 */
const sayings = new WeakMap<Identity, string>()

/**
 * The cache key of `id`'s assertion for `identity`: `id` and what the assertion says. Two routes to
 * one upstream share its cache, and may read one token's person differently (`claimsFrom` is a
 * route's): keyed by `id` alone, each route's identity pushed out the other's, and a client
 * alternating between them had an assertion signed at every request (an outside tester's finding).
 */
function keyOf (id: string, identity: Identity): string {
  let saying = sayings.get(identity)
  if (saying === undefined) {
    saying = JSON.stringify([identity.sub, shownEmail(identity) ?? null, identity.groups ?? []])
    sayings.set(identity, saying)
  }
  return `${id} ${saying}`
}

/** Re-sign when less than this share of the lifetime is left. */
const RENEW_WHEN_LEFT = 1 / 3

/** The assertions of one provider for one audience, by session id (or a machine client's token hash) and the name the route gives the person (authorize.ts signed). */
export class AudienceAssertions {
  /** Signings under way, by session id and what it says: concurrent requests of one session share one. */
  private readonly signing = new Map<string, Promise<string>>()

  /**
   * @param cache where the signed assertions are kept: the audience's own, or one shared by many
   * @param cacheKey the cache key of a session id (a shared cache needs the provider and audience in it)
   */
  constructor (private readonly owner: Assertions, readonly provider: string, readonly audience: string,
    private readonly cache: Lru<string, Entry>, private readonly cacheKey: (id: string) => string = (id) => id) {}

  /**
   * The assertion of `id` (a session's id, or a machine client's token hash) if one is signed for
   * what `identity` says, and fresh: no promise, for the proxy's fast path. An identity read again
   * with other groups or another address (a refresh, a token's claims asked again) is signed anew,
   * never sent upstream on an assertion that still says what the gateway no longer holds.
   */
  ready (id: string, identity: Identity): string | undefined {
    const entry = this.cache.get(this.cacheKey(keyOf(id, identity)))
    return entry !== undefined && this.owner.now() < entry.renewAt ? entry.token : undefined
  }

  /** The assertion of `id` for `identity`, signed if none is fresh. */
  async assertion (id: string, identity: Identity): Promise<string> {
    const ready = this.ready(id, identity)
    if (ready !== undefined) return ready
    const key = keyOf(id, identity)
    let pending = this.signing.get(key)
    if (pending === undefined) {
      pending = this.sign(key, identity).finally(() => this.signing.delete(key))
      this.signing.set(key, pending)
    }
    return await pending
  }

  /** `id` here is the key of `id` and what the identity says (keyOf). */
  private async sign (id: string, identity: Identity): Promise<string> {
    // A signing that began before a key change does not refill the cache the change emptied.
    const generation = this.owner.generation
    const signedAt = this.owner.now()
    const token = await this.owner.sign(identity, this.provider, this.audience, signedAt)
    if (generation === this.owner.generation) {
      this.cache.set(this.cacheKey(id), { token, renewAt: signedAt + this.owner.ttlMs * (1 - RENEW_WHEN_LEFT) })
    }
    return token
  }
}

/**
 * Signs identity assertions with the shared key ring, and caches them per provider and audience:
 * the routes' audiences (from the config) each with a cache of their own; the audiences forward-auth
 * is asked for (named by a proxy's header) in an LRU, their assertions in one shared LRU.
 */
export class Assertions {
  /** How many assertions this instance has signed (tests and metrics: the hot path must not sign). */
  signed = 0
  readonly ttlMs: number
  /** Counts key changes; a signing that began under another generation is not cached. */
  generation = 0
  private readonly maxEntries: number
  private readonly routes = new Map<string, { audience: AudienceAssertions, cache: Lru<string, Entry> }>()
  private readonly visited: Lru<string, AudienceAssertions>
  private readonly shared: Lru<string, Entry>

  constructor (readonly keys: KeyRing, private readonly options: AssertionOptions) {
    this.ttlMs = options.ttlMs
    this.maxEntries = options.maxEntries ?? 10_000
    this.visited = new Lru(options.maxAudiences ?? 256)
    this.shared = new Lru(this.maxEntries)
    // An assertion may name a key that is no longer published: sign anew.
    keys.onChange(() => {
      this.generation++
      for (const { cache } of this.routes.values()) cache.clear()
      this.shared.clear()
    })
  }

  now (): number {
    return this.options.clock.now()
  }

  /** Follows key rotations made by other instances (call once, before serving). */
  async listen (): Promise<void> {
    await this.keys.listen()
  }

  /**
   * The cache of one provider and a route's audience (one per pair, made on first use, kept: the
   * proxy holds it). Only for audiences the config names: each one is kept for good.
   */
  forAudience (provider: string, audience: string): AudienceAssertions {
    const name = `${provider} ${audience}`
    let found = this.routes.get(name)
    if (!found) {
      const cache = new Lru<string, Entry>(this.maxEntries)
      found = { audience: new AudienceAssertions(this, provider, audience, cache), cache }
      this.routes.set(name, found)
    }
    return found.audience
  }

  /**
   * The assertions of `provider` for an audience a request named (forward-auth's original URL): a
   * route's own cache when a route names it, else one kept in the bounded LRU only (their
   * assertions in the shared LRU).
   */
  forAnyAudience (provider: string, audience: string): AudienceAssertions {
    const name = `${provider} ${audience}`
    let found = this.routes.get(name)?.audience ?? this.visited.get(name)
    if (!found) {
      found = new AudienceAssertions(this, provider, audience, this.shared, (id) => `${name} ${id}`)
      this.visited.set(name, found)
    }
    return found
  }

  /** How many audiences and cached assertions this instance holds (tests: the caches stay bounded). */
  get cached (): { audiences: number, assertions: number } {
    let assertions = this.shared.size
    for (const { cache } of this.routes.values()) assertions += cache.size
    return { audiences: this.routes.size + this.visited.size, assertions }
  }

  /**
   * A new assertion: `iss`, `aud`, `sub`, `email` (only when not marked unverified), `groups`,
   * `provider`, `iat`, `exp`, and the signing key's `kid` in the header.
   * @see https://www.rfc-editor.org/rfc/rfc7515#section-4.1.4 (kid)
   */
  async sign (identity: Identity, provider: string, audience: string, now: number): Promise<string> {
    const key = await this.keys.signingKey()
    const iat = Math.floor(now / 1000)
    const email = identity.email !== undefined && identity.emailVerified !== false ? { email: identity.email } : {}
    const token = await new SignJWT({ ...email, groups: identity.groups, provider })
      .setProtectedHeader({ alg: 'ES256', typ: 'JWT', kid: key.kid })
      .setIssuer(this.options.issuer)
      .setAudience(audience)
      .setSubject(identity.sub)
      .setIssuedAt(iat)
      .setExpirationTime(iat + Math.floor(this.options.ttlMs / 1000))
      .sign(key.privateKey)
    this.signed++
    return token
  }
}
