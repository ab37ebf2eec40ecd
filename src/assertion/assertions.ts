// Signed identity assertions for upstreams: an ES256 JWT (RFC 7519) saying who the user is, for one
// audience (the upstream's origin). Not signed per request: one assertion is reused per session,
// provider and audience until less than a third of its lifetime is left, from a bounded cache the
// proxy's header rewrite can read without a promise.
// @see https://www.rfc-editor.org/rfc/rfc7519#section-4.1 (registered claims)
import { SignJWT } from 'jose'
import type { GatewayConfig } from '../config/config.js'
import type { Identity } from '../access/identity.js'
import type { ExtraHeaders } from '../oauth/forward-auth.js'
import { RedirectHosts } from '../oauth/redirect-hosts.js'
import type { Session } from '../session/session.js'
import type { KeyRing } from './keys.js'

export interface AssertionOptions {
  /** `iss`: the gateway's server.baseUrl. */
  issuer: string
  /** `exp` - `iat`. */
  ttlMs: number
  /** Milliseconds since the epoch (injected: tests move it). */
  clock: () => number
  /** Cached assertions per provider and audience; the oldest goes first. */
  maxEntries?: number
}

interface Entry {
  token: string
  /** After this (clock time, ms), a new assertion is signed. */
  renewAt: number
}

/** Re-sign when less than this share of the lifetime is left. */
const RENEW_WHEN_LEFT = 1 / 3

/** The assertions of one provider for one audience, by session id. */
export class AudienceAssertions {
  private readonly byId = new Map<string, Entry>()
  /** Signings under way, by session id: concurrent requests of one session share one. */
  private readonly signing = new Map<string, Promise<string>>()
  /** Counts clears, so a signing that began before a key change does not refill the cache. */
  private generation = 0

  constructor (private readonly owner: Assertions, readonly provider: string, readonly audience: string, private readonly maxEntries: number) {}

  /** The session's assertion if one is signed and fresh: no promise, for the proxy's fast path. */
  ready (session: Session): string | undefined {
    const entry = this.byId.get(session.id)
    return entry !== undefined && this.owner.now() < entry.renewAt ? entry.token : undefined
  }

  /** The session's assertion, signed if none is fresh; undefined when the session has no identity at the provider. */
  async assertion (session: Session): Promise<string | undefined> {
    const ready = this.ready(session)
    if (ready !== undefined) return ready
    const identity = session.record.identities?.[this.provider]
    if (!identity) return undefined
    let pending = this.signing.get(session.id)
    if (!pending) {
      pending = this.sign(session.id, identity).finally(() => this.signing.delete(session.id))
      this.signing.set(session.id, pending)
    }
    return await pending
  }

  private async sign (id: string, identity: Identity): Promise<string> {
    const generation = this.generation
    const signedAt = this.owner.now()
    const token = await this.owner.sign(identity, this.provider, this.audience, signedAt)
    if (generation === this.generation) {
      if (this.byId.size >= this.maxEntries && !this.byId.has(id)) this.byId.delete(this.byId.keys().next().value!)
      // Re-inserted, so that Map order stays the order of signing (oldest first).
      this.byId.delete(id)
      this.byId.set(id, { token, renewAt: signedAt + this.owner.ttlMs * (1 - RENEW_WHEN_LEFT) })
    }
    return token
  }

  clear (): void {
    this.generation++
    this.byId.clear()
  }
}

/** Signs identity assertions with the shared key ring, and caches them per provider and audience. */
export class Assertions {
  /** How many assertions this instance has signed (tests and metrics: the hot path must not sign). */
  signed = 0
  readonly ttlMs: number
  private readonly audiences = new Map<string, AudienceAssertions>()

  constructor (readonly keys: KeyRing, private readonly options: AssertionOptions) {
    this.ttlMs = options.ttlMs
    // An assertion may name a key that is no longer published: sign anew.
    keys.onChange(() => { for (const audience of this.audiences.values()) audience.clear() })
  }

  now (): number {
    return this.options.clock()
  }

  /** Follows key rotations made by other instances (call once, before serving). */
  async listen (): Promise<void> {
    await this.keys.listen()
  }

  /** The cache of one provider and audience (one per pair, made on first use). */
  forAudience (provider: string, audience: string): AudienceAssertions {
    const name = `${provider} ${audience}`
    let found = this.audiences.get(name)
    if (!found) {
      found = new AudienceAssertions(this, provider, audience, this.options.maxEntries ?? 10_000)
      this.audiences.set(name, found)
    }
    return found
  }

  /**
   * The assertion for `session` at `provider`, for the upstream whose origin is `audience`: the
   * cached one while fresh, else a new one. Undefined when the session has no identity there.
   * (For callers outside the proxy, such as forward-auth.)
   */
  async assertionFor (session: Session, provider: string, audience: string): Promise<string | undefined> {
    return await this.forAudience(provider, audience).assertion(session)
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

/**
 * Forward-auth's extra header: the assertion for the original URL's origin, the audience an upstream
 * behind nginx or Caddy checks. Only origins the gateway would redirect to (its own, or a host in
 * forwardAuth.allowedRedirectHosts) get one: a proxy's header cannot grow the per-audience cache.
 */
export function forwardAuthAssertion (config: GatewayConfig, assertions: Assertions): ExtraHeaders {
  const own = new URL(config.server.baseUrl).origin
  const hosts = new RedirectHosts(config.forwardAuth.allowedRedirectHosts)
  return async (session, provider, audience) => {
    if (audience === undefined || (audience !== own && !hosts.allows(new URL(audience)))) return {}
    const token = await assertions.assertionFor(session, provider, audience)
    return token === undefined ? {} : { [config.assertion.header]: token }
  }
}
