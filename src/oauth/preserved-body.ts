// Forms that survive a sign-in (`routes[].preserveBody`): a browser's form POST that met a missing or
// expired session is kept in the store, sealed, until the sign-in ends, then taken once. The store
// key is a keyed hash of a random token (held only by the browser's form cookie) and of the form's
// path; the value is sealed with a key derived from that token, so a store dump reveals neither the
// body nor which browser it belongs to. It lives at most `state.ttl` (the store's own expiry, and
// the expiry inside the sealed value against the injected clock), and `take` is the store's atomic
// get-and-delete: usable once, and nothing is left in the store once used or expired. The token
// names the secret it was kept under (`<random>.<key id>`): a form kept just before a secret
// rotation is still found after it (session.previousSecrets), in one try.
// The cookie alone delivers nothing: a kept body is bound to the sign-in flow it starts (a random
// binding in the sealed value, carried by the login address into that flow's signed state). Only
// the callback of that flow may offer it, which marks it offered, and only an offered body is taken:
// a form cookie planted from another browser, or left from before a different sign-in, is not replayed.
import { createHash } from 'node:crypto'
import type { Clock } from '../ops/clock.js'
import type { Identity } from '../session/record.js'
import { KEY_ID_LENGTH, randomToken, type Sealer, type SealingKey } from '../session/seal.js'
import { GatewayError } from '../errors.js'
import { ownClaim, type KeyValue, type Lock } from '../store/store.js'

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
  /** The binding of the sign-in flow it waits for. */
  flow: string
  /** That flow's callback has offered it: the one state in which it is taken. */
  offered: boolean
  /** The session that callback started, and who signed in ({@link FormOwner}): the one session it is delivered to. */
  owner?: FormOwner
}

/**
 * Whose a kept form is once its flow signed someone in: the session that sign-in started (a hash of
 * its store id), the one session it is delivered to, and the person (the provider, `iss` and
 * subject of the sign-in), the one person it may be offered to again: the marker met an ended
 * session (signed out on another device), and the same person signed in again through the same
 * flow. An outside tester's finding: an offered form outlived a sign-out in its browser and went
 * upstream as the next person who signed in there.
 */
export interface FormOwner {
  readonly session: string
  readonly person: string
}

const PURPOSE = 'preserved-body'

/** How long a take holds its form against another's (given back at once; this only if the store fails to). */
const TAKING_MS = 30_000

/** What a second take of one form is told while the first is under way (a double submit). */
const BEING_DELIVERED = 'This form is being sent already (a second click?): its answer goes to the first request. Open the page again in a moment.'

/** The token's shape (randomToken: 32 bytes base64url, then the key id): anything else is no token and opens nothing. */
const TOKEN = new RegExp(`^[A-Za-z0-9_-]{43}\\.[A-Za-z0-9_-]{${KEY_ID_LENGTH}}$`)

/** A flow binding's shape (randomToken without a key id). */
const BINDING = /^[A-Za-z0-9_-]{43}$/

/** The kept form's flow binding in the login address's `form`, or undefined when absent or malformed. */
export function parseFormBinding (value: unknown): string | undefined {
  return typeof value === 'string' && BINDING.test(value) ? value : undefined
}

/** The owner of a form a sign-in of `provider` as `identity` offers to the session `sessionId` it started. */
export function formOwner (sessionId: string, provider: string, identity: Identity | undefined): FormOwner {
  return { session: sessionSeal(sessionId), person: JSON.stringify([provider, identity?.iss ?? null, identity?.subject ?? identity?.sub ?? null]) }
}

/** Whether `caller` may take the form `wire`: it was offered, to that session or to that person. */
function ownedBy (wire: KeptWire, caller: FormOwner): boolean {
  return wire.owner !== undefined && (wire.owner.session === caller.session || wire.owner.person === caller.person)
}

/** How a kept form names the session it goes to: a hash of its store id. */
function sessionSeal (sessionId: string): string {
  return createHash('sha256').update(sessionId).digest('base64url')
}

/** The token in a form cookie's value, or undefined when absent or malformed. */
export function parseFormToken (value: string | undefined): string | undefined {
  return value !== undefined && TOKEN.test(value) ? value : undefined
}

/** The kept form bodies of browsers in the middle of a sign-in. */
export class PreservedBodies {
  constructor (
    private readonly store: KeyValue & Pick<Lock, 'release'>,
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

  /**
   * Keeps `kept` for `ttlMs`: the new token, for the browser's form cookie, and the binding of the
   * sign-in flow it waits for, for the login address.
   */
  async keep (kept: KeptBody): Promise<{ token: string, flow: string }> {
    const sealing = this.sealer.current
    const token = `${randomToken()}.${sealing.kid}`
    const flow = randomToken()
    await this.write(sealing, token, {
      method: kept.method,
      path: kept.path,
      contentType: kept.contentType,
      body: kept.body.toString('base64'),
      expiresAt: this.clock.now() + this.ttlMs,
      flow,
      offered: false,
    })
    return { token, flow }
  }

  /**
   * The sign-in callback's question: whether `token` holds a body for `path` that waits for the
   * flow whose binding is `flow`. If so it is marked offered to `owner`, the session that flow started
   * (written back for the rest of its lifetime); a body of another flow stays as it is, and so does
   * one offered before to another person.
   */
  async offer (token: string, path: string, flow: string, owner: FormOwner): Promise<boolean> {
    const found = await this.read(token, path)
    if (found === undefined || found.wire.flow !== flow) return false
    const before = found.wire.owner
    if (before !== undefined && before.person !== owner.person) return false
    if (before?.session !== owner.session) await this.write(found.sealing, token, { ...found.wire, offered: true, owner })
    return true
  }

  /** The flow binding of the body `token` kept for `path` (read, not taken), if there is one. */
  async binding (token: string, path: string): Promise<string | undefined> {
    return (await this.read(token, path))?.wire.flow
  }

  /**
   * The offered body `token` kept for `path`, deleted as it is read: only one caller ever gets it,
   * and only the owner it was offered to ({@link FormOwner}): that session, or another session of
   * that person (a sign-in in another tab renamed the session between the replay page and its
   * POST). One not offered yet, or offered to someone else, is left where it is (a stray marker
   * does not spend the form of a flow under way, nor one its person may still be offered again).
   */
  async take (token: string, path: string, caller: FormOwner): Promise<KeptBody | undefined> {
    const sealing = this.sealingKey(token)
    if (!sealing) return undefined
    // Anything else found (an expired or unreadable value) is taken, and so gone from the store.
    const found = (await this.read(token, path))?.wire
    if (found !== undefined && !ownedBy(found, caller)) return undefined
    const key = this.key(sealing, token, path)
    // One take at a time (a double submit reaches two instances): the form put back below is then
    // never one another request has taken and delivered (a re-reader's finding: it was delivered twice).
    const taking = ownClaim(this.store, `${key}:taking`)
    if (!(await taking.take(TAKING_MS))) throw new GatewayError('invalid_request', BEING_DELIVERED)
    const sealed = await this.store.take(key).catch(async (error: unknown) => {
      // The take may have run, its reply lost (a late reply): the form read just before is put back
      // (only where nothing is), for the reload that posts the marker again (a tester's finding: it
      // was gone, and the reload was told it had been delivered). Nothing went upstream.
      if (found !== undefined) await this.store.claim(key, sealing.seal(PURPOSE, token, JSON.stringify(found)), found.expiresAt - this.clock.now()).catch(() => false)
      throw error
    }).finally(async () => { await taking.giveBack() })
    const wire = sealed === null ? undefined : this.open(sealing, token, path, sealed)
    if (wire === undefined || !ownedBy(wire, caller)) return undefined
    return { method: wire.method, path: wire.path, contentType: wire.contentType, body: Buffer.from(wire.body, 'base64') }
  }

  private async write (sealing: SealingKey, token: string, wire: KeptWire): Promise<void> {
    await this.store.set(this.key(sealing, token, wire.path), sealing.seal(PURPOSE, token, JSON.stringify(wire)), wire.expiresAt - this.clock.now())
  }

  private async read (token: string, path: string): Promise<{ sealing: SealingKey, wire: KeptWire } | undefined> {
    const sealing = this.sealingKey(token)
    if (!sealing) return undefined
    const sealed = await this.store.get(this.key(sealing, token, path))
    const wire = sealed === null ? undefined : this.open(sealing, token, path, sealed)
    return wire === undefined ? undefined : { sealing, wire }
  }

  /** The sealed value opened and checked (sealed to this token, for this path, not expired). */
  private open (sealing: SealingKey, token: string, path: string, sealed: string): KeptWire | undefined {
    const text = sealing.open(PURPOSE, token, sealed)
    if (text === null) return undefined
    const wire = JSON.parse(text) as KeptWire
    return wire.path !== path || wire.expiresAt <= this.clock.now() ? undefined : wire
  }
}
