// The assertion signing keys: one ES256 key pair shared by every instance on one store, kept there
// sealed with a key derived from session.secret, replaced every `rotateEvery` without a restart.
// The first instance creates the set with a set-if-absent (two starting together agree); a rotation
// is claimed once per outgoing key, and announced on the store's pub/sub (each instance also reads
// the store again every minute). A new key is published `lead` before it signs, so a JWK Set cached
// for that long already holds it; the previous key stays published until the next rotation.
// The sealed set names the key id of the secret that sealed it (one try to open); a set sealed with
// a previous secret (session.previousSecrets) is opened, then sealed again with the current one.
// @see https://www.rfc-editor.org/rfc/rfc7517 (JWK) and https://www.rfc-editor.org/rfc/rfc7518#section-3.4 (ES256)
import type { Logger } from '../ops/logger.js'
import { calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, type CryptoKey, type JWK, type JSONWebKeySet } from 'jose'
import { GatewayError } from '../errors.js'
import { randomToken, type Sealer } from '../session/seal.js'
import type { Broadcast, KeyValue } from '../store/store.js'
import { noConnection } from '../store/redis-connection.js'
import type { Clock } from '../ops/clock.js'

/** A key as stored: the private JWK (its public part is derived from it). Times are the gateway clock's, ms. */
interface StoredKey {
  kid: string
  createdAt: number
  /** When it starts signing: at once for the first key, `lead` after its creation for a rotated one. */
  activeFrom: number
  jwk: JWK
}

/** A key ready to sign with. */
export interface SigningKey {
  kid: string
  privateKey: CryptoKey
}

interface LoadedKey extends StoredKey {
  privateKey: CryptoKey
  publicJwk: JWK
}

const STORE_KEY = 'assertion-keys'
const ROTATION_LOCK = (kid: string) => `assertion-keys-rotation:${kid}`
const CHANGED = 'assertion-keys-changed'
/** Sealer purpose and token: the set is sealed with a key derived from session.secret alone. */
const SEAL_PURPOSE = 'assertion-keys'
const SEAL_TOKEN = 'store'
/** How often an instance reads the set again even without a pub/sub message (a lost message is bounded). */
const RELOAD_EVERY_MS = 60_000
/** The JWK Set's max-age, and how long a new key is published before it signs (rotateEvery is at least 1 h). */
export const PUBLISH_LEAD_MS = 300_000
const ROTATION_LOCK_MS = 30_000
/** How long the store keeps the set after its last write, at least (see storeTtl). */
const KEPT_MS = 366 * 86_400_000
const RETRY_MS = 5000

export interface KeyRingOptions {
  rotateEveryMs: number
  /** What "now" is for creation, activation and rotation times (tests move it). */
  clock: Clock
  log: Logger
}

export class KeyRing {
  /** Newest first: at most the current key and the previous one. */
  private keys: LoadedKey[] = []
  private refreshing: Promise<void> | undefined
  private checkAt = 0
  private readonly changeListeners: Array<() => void> = []

  constructor (private readonly store: KeyValue & Broadcast, private readonly sealer: Sealer, private readonly options: KeyRingOptions) {}

  /** Follows rotations made by other instances (call once, before serving). */
  async listen (): Promise<void> {
    const reload = () => {
      this.refresh(false).catch((error: unknown) => this.options.log.warn({ reason: reason(error) }, 'could not read the rotated assertion keys; retrying within a minute'))
    }
    // Subscribed again after a gap (a rotation announced meanwhile was missed): read the set again.
    await this.store.subscribe(CHANGED, reload, (listening) => { if (listening && this.keys.length > 0) reload() })
  }

  /** Reads or makes the set in the background, so the first request need not (best effort). */
  warmUp (): void {
    this.ready().catch((error: unknown) => this.options.log.warn({ reason: reason(error) }, 'could not read the assertion keys yet; the first request that needs them tries again'))
  }

  /** Called when the published set changes (cached assertions may name a key that is gone). */
  onChange (listener: () => void): void {
    this.changeListeners.push(listener)
  }

  /** The key to sign with now; the set is read (or made) first when this instance has none yet. */
  async signingKey (): Promise<SigningKey> {
    await this.ready()
    const now = this.options.clock.now()
    return this.keys.find((key) => key.activeFrom <= now) ?? this.keys.at(-1)!
  }

  /**
   * The key to sign with now as a private JWK (with its `kid`), for a signer that takes keys in that
   * form: the authorization server for agents (src/agents/), whose access tokens this ring signs.
   */
  async signingJwk (): Promise<JWK & { kid: string }> {
    const { kid } = await this.signingKey()
    const key = this.keys.find((each) => each.kid === kid)!
    return { ...key.jwk, kid, alg: 'ES256', use: 'sig' }
  }

  /** The public keys, as a JWK Set: the current key, and the previous one during a rotation. */
  async jwks (): Promise<JSONWebKeySet> {
    // Asked for rarely (verifiers cache it), so it waits for a due check: a rotation shows at once.
    await this.ready(true)
    return { keys: this.keys.map((key) => key.publicJwk) }
  }

  /**
   * Waits for the set when there is none in memory; otherwise uses what is there and, when it is
   * time, reads the store again (and rotates if due): in the background, unless `waitForCheck`.
   */
  private async ready (waitForCheck = false): Promise<void> {
    if (this.keys.length === 0) {
      await this.refresh(true)
      // The refresh under way may have been a pub/sub reload, which does not make a missing set.
      if (this.keys.length === 0) await this.load(true)
      if (this.keys.length === 0) throw new GatewayError('internal_error', 'The assertion keys could not be read.', { cause: new Error('no assertion key set in the store after making one') })
      return
    }
    if (this.options.clock.now() < this.checkAt) return
    const check = this.refresh(true).catch((error: unknown) => this.options.log.warn({ reason: reason(error) }, 'could not check the assertion keys; the current ones stay in use'))
    if (waitForCheck) await check
  }

  /** Reads the set (making it when absent, rotating it when due, if `manage`); one at a time. */
  private refresh (manage: boolean): Promise<void> {
    this.refreshing ??= this.load(manage).finally(() => { this.refreshing = undefined })
    return this.refreshing
  }

  private async load (manage: boolean): Promise<void> {
    // During a store outage, requests do not each try again.
    this.checkAt = this.options.clock.now() + RETRY_MS
    let stored = await this.read()
    if (manage && stored === null) stored = await this.create()
    if (manage && stored !== null && this.options.clock.now() >= stored[0]!.createdAt + this.options.rotateEveryMs) stored = await this.rotate(stored)
    if (stored !== null) await this.adopt(stored)
    this.checkAt = this.options.clock.now() + RELOAD_EVERY_MS
  }

  private async read (): Promise<StoredKey[] | null> {
    const sealed = await this.store.get(STORE_KEY)
    if (sealed === null) return null
    const opened = this.sealer.openNamed(SEAL_PURPOSE, SEAL_TOKEN, sealed)
    if (opened === null) {
      // Instances sharing a store must share session.secret: overwriting the set would break the others.
      throw new GatewayError('internal_error', 'The assertion keys could not be read.', {
        cause: new Error('the assertion keys in the store were sealed with another session.secret: give every instance on this store the same secret'),
      })
    }
    const keys = (JSON.parse(opened.plaintext) as { keys: StoredKey[] }).keys
    if (opened.key !== this.sealer.current) await this.reseal(sealed, keys)
    return keys
  }

  /**
   * The set sealed with a previous secret, sealed again with the current one, unless someone changed
   * it meanwhile; so that it still opens once the previous secret is dropped. Every instance must
   * hold the current secret by then (operations.md, "Rotating the session secret").
   */
  private async reseal (sealed: string, keys: StoredKey[]): Promise<void> {
    if (await this.store.replace(STORE_KEY, Buffer.from(sealed), this.sealed(keys), this.storeTtl)) {
      this.options.log.info('assertion keys sealed again with the current session.secret')
    }
  }

  private sealed (keys: StoredKey[]): string {
    return this.sealer.sealNamed(SEAL_PURPOSE, SEAL_TOKEN, JSON.stringify({ keys }))
  }

  /**
   * Kept until replaced: far past any rotation, so that no quiet spell lets the store forget the set
   * while instances sign with it (an outside tester's finding: it lived two periods, and a quiet
   * weekend lost it). A year, or two periods when those are longer.
   */
  private get storeTtl (): number {
    return Math.max(2 * this.options.rotateEveryMs, KEPT_MS)
  }

  /**
   * The first set, unless another instance made one first (then that one). A set the store lost (a
   * Redis without persistence restarted) while this instance holds one not yet due for rotation is
   * written back as this instance holds it, so the key it signs with stays published. A set held
   * longer may be one this instance heard no rotation of (a lost message, idle since): written
   * back, it would bring a retired key back to sign (a re-reading's finding), so a new key is made,
   * as by an instance that holds none; the others adopt it at once (its message), and what they
   * signed with the key the store lost no longer verifies (at most `ttl`, which their cached
   * assertions live).
   */
  private async create (): Promise<StoredKey[] | null> {
    const now = this.options.clock.now()
    const newest = this.keys[0]
    const held = newest !== undefined && now < newest.createdAt + this.options.rotateEveryMs
    const keys = held ? this.keys.map(storedForm) : [await newKey(now, now)]
    if (await this.store.claim(STORE_KEY, this.sealed(keys), this.storeTtl)) {
      this.options.log.info({ kid: keys[0]!.kid }, held ? 'assertion signing keys written again: the set was gone from the store' : 'assertion signing key created')
      await this.store.publish(CHANGED, keys[0]!.kid)
      return keys
    }
    return await this.read()
  }

  /** A new key before the current one; only one instance rotates away from a given key. */
  private async rotate (stored: StoredKey[]): Promise<StoredKey[] | null> {
    const outgoing = stored[0]!
    if (!(await this.store.claim(ROTATION_LOCK(outgoing.kid), randomToken(), ROTATION_LOCK_MS))) return stored
    // Read again under the lock: another instance may have rotated between our read and the claim.
    const current = await this.read()
    if (current === null || current[0]!.kid !== outgoing.kid) return current
    const now = this.options.clock.now()
    const keys = [await newKey(now, now + PUBLISH_LEAD_MS), outgoing]
    await this.store.set(STORE_KEY, this.sealed(keys), this.storeTtl)
    this.options.log.info({ kid: keys[0]!.kid, previous: outgoing.kid }, 'assertion signing key rotated')
    await this.store.publish(CHANGED, keys[0]!.kid)
    return keys
  }

  private async adopt (stored: StoredKey[]): Promise<void> {
    const same = stored.length === this.keys.length && stored.every((key, i) => key.kid === this.keys[i]!.kid)
    if (same) return
    const known = new Map(this.keys.map((key) => [key.kid, key]))
    this.keys = await Promise.all(stored.map(async (key) => known.get(key.kid) ?? await loadKey(key)))
    for (const listener of this.changeListeners) listener()
  }
}

/** An error's message and its cause's, for the log (the public message alone would hide what to fix). */
function reason (error: unknown): string {
  if (!(error instanceof Error)) return String(error)
  // ioredis's words for a command with no connection to go on (a newcomer's reading): the store's outage line names the cause.
  if (noConnection(error)) return 'the session store is not reachable'
  return error.cause instanceof Error ? `${error.message} (${error.cause.message})` : error.message
}

async function newKey (createdAt: number, activeFrom: number): Promise<StoredKey> {
  const { privateKey } = await generateKeyPair('ES256', { extractable: true })
  const jwk = await exportJWK(privateKey)
  return { kid: await calculateJwkThumbprint(jwk), createdAt, activeFrom, jwk }
}

/** A loaded key as the set stores it. */
function storedForm ({ kid, createdAt, activeFrom, jwk }: LoadedKey): StoredKey {
  return { kid, createdAt, activeFrom, jwk }
}

async function loadKey (key: StoredKey): Promise<LoadedKey> {
  const { kty, crv, x, y } = key.jwk
  return {
    ...key,
    privateKey: await importJWK(key.jwk, 'ES256') as CryptoKey,
    publicJwk: { kty, crv, x, y, kid: key.kid, alg: 'ES256', use: 'sig' },
  }
}
