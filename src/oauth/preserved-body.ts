// Forms that survive a sign-in (`routes[].preserveBody`): a browser's form POST that met a missing or
// expired session is kept in the store, sealed, until the sign-in ends, then taken once. The store
// key is a keyed hash of a random token (held only by the browser's form cookie) and of the form's
// path; the value is sealed with a key derived from that token, so a store dump reveals neither the
// body nor which browser it belongs to. It lives at most `state.ttl` (the store's own expiry, and
// the expiry inside the sealed value against the injected clock), and `take` is the store's atomic
// get-and-delete: usable once, and nothing is left in the store once used or expired. The token
// names the secret it was kept under (`<random>.<key id>`): a form kept just before a secret
// rotation is still found after it (session.previousSecrets), in one try.
import type { Clock } from '../ops/clock.js'
import { KEY_ID_LENGTH, randomToken, type Sealer, type SealingKey } from '../session/seal.js'
import type { KeyValue } from '../store/store.js'

/** A kept form POST: what the upstream receives after the sign-in, byte for byte. */
export interface KeptBody {
  readonly method: string
  /** The canonical request target (path and query) the form was posted to. */
  readonly path: string
  /** The Content-Type as the browser sent it (a multipart boundary included). */
  readonly contentType: string
  readonly body: Buffer
}

/** What the sealed value holds. */
interface KeptWire {
  method: string
  path: string
  contentType: string
  /** base64 */
  body: string
  /** ms since the epoch, by the gateway's clock */
  expiresAt: number
}

const PURPOSE = 'preserved-body'

/** The token's shape (randomToken: 32 bytes base64url, then the key id): anything else is no token and opens nothing. */
const TOKEN = new RegExp(`^[A-Za-z0-9_-]{43}\\.[A-Za-z0-9_-]{${KEY_ID_LENGTH}}$`)

/** The token in a form cookie's value, or undefined when absent or malformed. */
export function parseFormToken (value: string | undefined): string | undefined {
  return value !== undefined && TOKEN.test(value) ? value : undefined
}

/** The kept form bodies of browsers in the middle of a sign-in. */
export class PreservedBodies {
  constructor (
    private readonly store: KeyValue,
    private readonly sealer: Sealer,
    /** `state.ttl`: a kept body lives no longer than the sign-in it waits for. */
    readonly ttlMs: number,
    private readonly clock: Clock
  ) {}

  /** The keys of the secret the token names; undefined for a secret this gateway no longer holds (no store read). */
  private sealingKey (token: string): SealingKey | undefined {
    return this.sealer.key(token.slice(token.length - KEY_ID_LENGTH))
  }

  /** The store key of the body `token` kept for `path`: a keyed hash of both. */
  private key (sealing: SealingKey, token: string, path: string): string {
    return `preserved-body:${sealing.idFor(PURPOSE, `${token}\n${path}`)}`
  }

  /** Keeps `kept` for `ttlMs`; the new token, for the browser's form cookie. */
  async keep (kept: KeptBody): Promise<string> {
    const sealing = this.sealer.current
    const token = `${randomToken()}.${sealing.kid}`
    const wire: KeptWire = {
      method: kept.method,
      path: kept.path,
      contentType: kept.contentType,
      body: kept.body.toString('base64'),
      expiresAt: this.clock.now() + this.ttlMs,
    }
    await this.store.set(this.key(sealing, token, kept.path), sealing.seal(PURPOSE, token, JSON.stringify(wire)), this.ttlMs)
    return token
  }

  /** Whether `token` holds a body for `path` (read, not taken): the callback's question. */
  async holds (token: string, path: string): Promise<boolean> {
    const sealing = this.sealingKey(token)
    if (!sealing) return false
    const sealed = await this.store.get(this.key(sealing, token, path))
    return sealed !== null && this.open(sealing, token, path, sealed) !== undefined
  }

  /** The body `token` kept for `path`, deleted as it is read: only one caller ever gets it. */
  async take (token: string, path: string): Promise<KeptBody | undefined> {
    const sealing = this.sealingKey(token)
    if (!sealing) return undefined
    const sealed = await this.store.take(this.key(sealing, token, path))
    return sealed === null ? undefined : this.open(sealing, token, path, sealed)
  }

  /** The sealed value opened and checked (sealed to this token, for this path, not expired). */
  private open (sealing: SealingKey, token: string, path: string, sealed: string): KeptBody | undefined {
    const text = sealing.open(PURPOSE, token, sealed)
    if (text === null) return undefined
    const wire = JSON.parse(text) as KeptWire
    if (wire.path !== path || wire.expiresAt <= this.clock.now()) return undefined
    return { method: wire.method, path: wire.path, contentType: wire.contentType, body: Buffer.from(wire.body, 'base64') }
  }
}
