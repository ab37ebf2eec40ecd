// Forms that survive a sign-in (`routes[].preserveBody`): a browser's form POST that met a missing or
// expired session is kept in the store, sealed, until the sign-in ends, then taken once. The store
// key is a keyed hash of a random token (held only by the browser's form cookie) and of the form's
// path; the value is sealed with a key derived from that token, so a store dump reveals neither the
// body nor which browser it belongs to. It lives at most `state.ttl` (the store's own expiry, and
// the expiry inside the sealed value against the injected clock), and `take` is the store's atomic
// get-and-delete: usable once, and nothing is left in the store once used or expired.
import type { Clock } from '../ops/clock.js'
import { randomToken, type Sealer } from '../session/seal.js'
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

/** The token's shape (randomToken: 32 bytes base64url): anything else is no token and opens nothing. */
const TOKEN = /^[A-Za-z0-9_-]{43}$/

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

  /** The store key of the body `token` kept for `path`: a keyed hash of both. */
  private key (token: string, path: string): string {
    return `preserved-body:${this.sealer.idFor(PURPOSE, `${token}\n${path}`)}`
  }

  /** Keeps `kept` for `ttlMs`; the new token, for the browser's form cookie. */
  async keep (kept: KeptBody): Promise<string> {
    const token = randomToken()
    const wire: KeptWire = {
      method: kept.method,
      path: kept.path,
      contentType: kept.contentType,
      body: kept.body.toString('base64'),
      expiresAt: this.clock.now() + this.ttlMs,
    }
    await this.store.set(this.key(token, kept.path), this.sealer.seal(PURPOSE, token, JSON.stringify(wire)), this.ttlMs)
    return token
  }

  /** Whether `token` holds a body for `path` (read, not taken): the callback's question. */
  async holds (token: string, path: string): Promise<boolean> {
    const sealed = await this.store.get(this.key(token, path))
    return sealed !== null && this.open(token, path, sealed) !== undefined
  }

  /** The body `token` kept for `path`, deleted as it is read: only one caller ever gets it. */
  async take (token: string, path: string): Promise<KeptBody | undefined> {
    const sealed = await this.store.take(this.key(token, path))
    return sealed === null ? undefined : this.open(token, path, sealed)
  }

  /** The sealed value opened and checked (sealed to this token, for this path, not expired). */
  private open (token: string, path: string, sealed: string): KeptBody | undefined {
    const text = this.sealer.open(PURPOSE, token, sealed)
    if (text === null) return undefined
    const wire = JSON.parse(text) as KeptWire
    if (wire.path !== path || wire.expiresAt <= this.clock.now()) return undefined
    return { method: wire.method, path: wire.path, contentType: wire.contentType, body: Buffer.from(wire.body, 'base64') }
  }
}
