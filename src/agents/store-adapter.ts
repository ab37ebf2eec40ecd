// oidc-provider's storage (its Adapter interface) on the gateway's store: every artefact of the
// authorization server for agents (clients, interactions, codes, refresh tokens, grants) is one
// record, sealed like a session (seal.ts): the store sees a keyed hash of each id and ciphertext
// bound to that id, so a store dump holds no usable code, token or client. A code or refresh token
// is used once: `consume` claims it with a set-if-absent, for as long as a request may take, and
// the request, once answered, marks it used for the token's life; a use after that revokes
// everything its grant issued (RFC 6749 §4.1.2, OAuth 2.1 §4.3.1). A use while another holds the
// claim (a request still under way, or one whose undo the store refused) is answered 503, which
// the client retries: it is a second use once the first has been answered. A record is kept
// under the id of the secret that was current when it was made, and found under any secret the
// gateway holds (Sealer.idsFor), so a rotation of session.secret loses no client, grant or token
// before its step 3 (an outside tester's finding: an instance at step 2 found none of them).
// @see https://github.com/panva/node-oidc-provider/blob/main/example/my_adapter.js
import { errors, type Adapter, type AdapterPayload } from 'oidc-provider'
import type { Clock } from '../ops/clock.js'
import type { Sealer } from '../session/seal.js'
import { GatewayError } from '../errors.js'
import { firstHeld, ownClaim, type OwnClaim, type SessionStore } from '../store/store.js'
import { AGENT_SCOPE } from './endpoints.js'
import { markOnceAnswered, onceAnswered, onFailure, STORE_REFUSED, undoAll } from './request-undo.js'

const PREFIX = 'agents:'
/**
 * How long a claim of a code or token is held: longer than a token request takes (a few store
 * commands, each bounded by store.timeout). Should its request fail and the store refuse its undo
 * too, the claim ends with this, and the client's retry at another instance then goes on (this
 * one gives it back as soon as the store writes again: request-undo.ts).
 */
const CLAIM_MS = 30_000

/**
 * Claims the one use of the code or token kept at `key`: the claim when this request took it. It
 * holds a value of this request's own, so that the request's failure gives back only its own claim
 * (request-undo.ts), never another use's.
 */
async function claimOnce (store: SessionStore, key: string, ttlMs: number): Promise<OwnClaim | undefined> {
  const claim = ownClaim(store, claimKey(key))
  return await undoneOnStoreFailure(async () => {
    onFailure(claim.giveBackOrThrow)
    return await claim.take(Math.min(ttlMs, CLAIM_MS)) ? claim : undefined
  })
}

/**
 * A code or token this request claimed and found unused, marked used once the request has been
 * answered: its answer leaves only once the mark is written (else it is 503, the mark taken back:
 * an attacker's finding, a 200 whose mark the store refused left the token usable again). Then its
 * claim goes, and a used refresh token keeps what its second use needs, no more (`shrink`). The
 * mark holds this request's own value, so that taking it back, owed until the store writes again,
 * never takes back another instance's mark of the retry (a re-reader's finding: the code was then
 * used a third time, and got tokens).
 */
async function usedOnceAnswered (store: SessionStore, key: string, ttlMs: number, claim: OwnClaim, shrink: () => Promise<void>): Promise<void> {
  const mark = ownClaim(store, consumedKey(key))
  const write = async (): Promise<void> => { if (!await mark.take(ttlMs)) throw new Error('marked used by another request') }
  await markOnceAnswered({ write, undo: mark.giveBackOrThrow })
  await onceAnswered(async () => { await shrink(); await claim.giveBackOrThrow() })
}

/**
 * A use of a code or token this request could not claim, or found marked used: 503 while another
 * request's claim holds it unmarked ({@link InUse}); else a second use, whose grant is revoked
 * (`revoke`) and which is refused (`invalid_grant`).
 */
async function refusedUse (model: string, claim: OwnClaim | undefined, used: boolean, revoke: () => Promise<void>): Promise<never> {
  await claim?.giveBack()
  if (!used) throw new InUse()
  await revoke()
  throw new errors.InvalidGrant(`${model === 'RefreshToken' ? 'refresh token' : 'authorization code'} already used`)
}

/**
 * A code or token another request has claimed and not answered yet (or whose undo the store
 * refused): 503, which the client retries once that request is over, or its claim has ended.
 */
class InUse extends errors.OIDCProviderError {
  constructor () {
    super(503, 'temporarily_unavailable')
    this.expose = true
    this.error_description = 'This code or token is being used by another request right now; try again shortly.'
  }
}

/**
 * Deletes a record under every secret's key. A revocation (RFC 7009) deletes the refresh token
 * (`kept`), then revokes its grant: should the request fail after, the token is put back for the
 * client's retry to find (it found none and answered 200, the grant going on: an outside tester's finding).
 */
async function destroyRecord (store: SessionStore, keys: readonly string[], kept: { key: string, value: string } | undefined): Promise<void> {
  if (kept !== undefined) {
    const ttlMs = Math.max(await store.remainingMs(kept.key) ?? 0, 1000)
    onFailure(async () => { await store.set(kept.key, kept.value, ttlMs) })
  }
  await undoneOnStoreFailure(async () => { for (const key of keys) await store.delete(key) })
}

/** `step`, and when the store fails in it, the request's claims given back before oidc-provider answers 503 (request-undo.ts). */
async function undoneOnStoreFailure<T> (step: () => Promise<T>): Promise<T> {
  try {
    return await step()
  } catch (error) {
    await undoAll()
    throw error
  }
}

/** Models whose records a second use must find consumed. */
const CONSUMABLE = new Set(['AuthorizationCode', 'RefreshToken', 'DeviceCode'])
/** What a record keeps when oidc-provider gives no lifetime (a registered client): bounded all the same. */
const UNBOUNDED_MS = 30 * 24 * 3600 * 1000

/** What the adapter does beyond storing: a grant revoked, so that the gateway ends its session too. */
export interface AdapterEvents {
  /** A grant ended (a code or refresh token used twice, a revocation, a grant deleted). */
  grantRevoked: (grantId: string) => Promise<void>
  /** How long a registered client is kept before a person first allows it (keepClient then keeps it longer). */
  unusedClientMs: number
  /** What "now" is when a record is found consumed. */
  clock: Clock
}

/**
 * A store failure as oidc-provider answers it: 503 `temporarily_unavailable`, which an OAuth client
 * retries, naming the store. Unexposed, it answered `server_error` ("oops! something went wrong"),
 * which the MCP SDK takes for a refresh that failed for good, and sends its person back to sign in
 * over a blip (an outside tester's finding). The store logs its outage once (outage-log.ts).
 */
class StoreUnavailable extends errors.OIDCProviderError {
  constructor (cause: unknown) {
    super(503, 'temporarily_unavailable', { cause })
    this.expose = true
    this.error_description = STORE_REFUSED
  }
}

async function answered<T> (step: () => Promise<T>): Promise<T> {
  try {
    return await step()
  } catch (error) {
    throw error instanceof GatewayError && error.code === 'session_store_unavailable' ? new StoreUnavailable(error) : error
  }
}

/** The store adapters of one authorization server, one per oidc-provider model; a store failure in any answered as {@link StoreUnavailable}. */
export function storeAdapter (store: SessionStore, sealer: Sealer, events: AdapterEvents): new (model: string) => Adapter {
  const Stored = storedAdapter(store, sealer, events)
  return class AnsweredAdapter implements Adapter {
    private readonly stored: Adapter
    constructor (model: string) { this.stored = new Stored(model) }
    async upsert (...args: Parameters<Adapter['upsert']>) { await answered(async () => { await this.stored.upsert(...args) }) }
    async find (id: string) { return await answered(async () => await this.stored.find(id)) }
    async findByUid (uid: string) { return await answered(async () => await this.stored.findByUid(uid)) }
    async findByUserCode (userCode: string) { return await answered(async () => await this.stored.findByUserCode(userCode)) }
    async consume (id: string) { await answered(async () => { await this.stored.consume(id) }) }
    async destroy (id: string) { await answered(async () => { await this.stored.destroy(id) }) }
    async revokeByGrantId (grantId: string) { await answered(async () => { await this.stored.revokeByGrantId(grantId) }) }
  }
}

function storedAdapter (store: SessionStore, sealer: Sealer, events: AdapterEvents): new (model: string) => Adapter {
  const grants = new GrantKeys(store, sealer, events)
  return class StoreAdapter implements Adapter {
    constructor (private readonly model: string) {}

    /** Where the record of `id` is kept (under an earlier secret's id, made before a rotation), or undefined. */
    private async located (id: string): Promise<{ key: string, value: string } | undefined> {
      return await firstHeld(store, recordKeys(sealer, this.model, id))
    }

    private indexes (kind: string, value: string): string[] {
      return sealer.idsFor(`agents-${this.model}-${kind}`, value).map((each) => `${PREFIX}${this.model}-${kind}:${each}`)
    }

    async upsert (id: string, payload: AdapterPayload, expiresIn: number | undefined): Promise<void> {
      // A device code keeps its request, which oidc-provider checks again once the person allowed it: with
      // the route's scope, whatever the CLI asked for (often none), as routes/agents.ts sets it on an authorization request.
      if (this.model === 'DeviceCode' && payload.params !== undefined) payload.params = { ...payload.params, scope: AGENT_SCOPE }
      const ttlMs = expiresIn === undefined ? (this.model === 'Client' ? events.unusedClientMs : UNBOUNDED_MS) : Math.max(1, expiresIn) * 1000
      const key = await writeKey(store, sealer, this.model, id)
      const put = this.model === 'DeviceCode' && isConfirmation(payload) ? saveInFlight : setRecord
      await put(store, key, sealer.seal(`agents-${this.model}`, id, JSON.stringify(payload)), ttlMs)
      if (payload.grantId !== undefined) await grants.add(payload.grantId, key, ttlMs)
      if (payload.uid !== undefined) await store.set(this.indexes('uid', payload.uid)[0]!, sealer.seal('agents-uid', payload.uid, id), ttlMs)
      if (payload.userCode !== undefined) await indexUserCode(store, sealer, this.indexes('user-code', payload.userCode)[0]!, payload.userCode, id, ttlMs)
    }

    async find (id: string): Promise<AdapterPayload | undefined> {
      const found = await this.located(id)
      if (found === undefined) return undefined
      const { key, value: raw } = found
      const plain = sealer.open(`agents-${this.model}`, id, raw)
      if (plain === null) return undefined
      const payload = JSON.parse(plain) as AdapterPayload
      // A rotated refresh token presented again (it leaked, and its two holders both use it): its grant ends.
      if (payload.used === true) return await grants.revoke(String(payload.grantId)).then(() => undefined)
      if (CONSUMABLE.has(this.model) && await store.get(consumedKey(key)) !== null) payload.consumed = payload.consumed ?? Math.floor(events.clock.now() / 1000)
      return payload
    }

    async findByUid (uid: string): Promise<AdapterPayload | undefined> { return await this.findIndexed('uid', uid) }
    async findByUserCode (userCode: string): Promise<AdapterPayload | undefined> { return await this.findIndexed('user-code', userCode) }

    /** The record an index (`uid`, `user-code`) names for `value`. */
    private async findIndexed (kind: string, value: string): Promise<AdapterPayload | undefined> {
      const sealed = await firstHeld(store, this.indexes(kind, value))
      const id = sealed === undefined ? null : sealer.open(`agents-${kind}`, value, sealed.value)
      return id === null ? undefined : await this.find(id)
    }

    /**
     * Marks a code or token used, once: of two uses, one claims it, and the other is answered 503
     * while the first is under way, and refused (`invalid_grant`, its grant revoked) once it has
     * been answered. It is marked used (and a refresh token's record shrunk: GrantKeys.rotated)
     * once its request has been answered: a store failure before that never leaves it used.
     */
    async consume (id: string): Promise<void> {
      const key = await writeKey(store, sealer, this.model, id)
      const ttlMs = Math.max(await store.remainingMs(key) ?? 0, 1000)
      const claim = await claimOnce(store, key, ttlMs)
      // A use that read the code or token before another's was answered, and claims it once that
      // one gave its claim back, finds it marked (an attacker's finding: both got tokens).
      const used = await store.get(consumedKey(key)) !== null
      if (claim === undefined || used) return await refusedUse(this.model, claim, used, async () => { const { grantId } = await this.find(id) ?? {}; if (grantId !== undefined) await grants.revoke(grantId) })
      const { kept, grantId } = this.model === 'RefreshToken' ? { kept: await this.located(id), grantId: (await this.find(id))?.grantId } : {}
      await usedOnceAnswered(store, key, ttlMs, claim, async () => { await grants.rotated(id, kept, grantId, ttlMs) })
    }

    async destroy (id: string): Promise<void> {
      await destroyRecord(store, recordKeys(sealer, this.model, id), this.model === 'RefreshToken' ? await this.located(id) : undefined)
    }

    async revokeByGrantId (grantId: string): Promise<void> {
      await undoneOnStoreFailure(async () => { await grants.revoke(grantId) })
    }
  }
}

/** What each grant issued (the store keys of its codes and tokens, and of the grant itself), so that revoking it deletes them all. */
class GrantKeys {
  constructor (private readonly store: SessionStore, private readonly sealer: Sealer, private readonly events: AdapterEvents) {}

  /** The grant's list under every secret's id, the current one first (where add puts what it issues). */
  private keys (grantId: string): string[] {
    return this.sealer.idsFor('agents-grant', grantId).map((id) => `${PREFIX}grant:${id}`)
  }

  async add (grantId: string, key: string, ttlMs: number): Promise<void> {
    await this.store.addMember(this.keys(grantId)[0]!, key, ttlMs)
  }

  /**
   * A refresh token of the grant used, and replaced by a new one: its record shrinks to what its
   * second use needs, its grant (which that use ends, `find`), and it leaves the grant's list. Kept
   * whole, each rotated token's record (1.2 KB) and list entry stayed for the token's 30 days: a
   * person refreshing at 120 a minute grew the store by 200 MB a day. Now about 300 bytes.
   */
  async rotated (id: string, kept: { key: string, value: string } | undefined, grantId: string | undefined, ttlMs: number): Promise<void> {
    if (grantId === undefined || kept === undefined) return
    await this.store.set(kept.key, this.sealer.seal('agents-RefreshToken', id, JSON.stringify({ grantId, used: true })), ttlMs)
    for (const list of this.keys(grantId)) await this.store.removeMember(list, kept.key)
  }

  /** Everything the grant issued, and the grant, deleted; then the gateway's side of it (its session). */
  async revoke (grantId: string): Promise<void> {
    // Each list read, what it names deleted, then the list: a reply lost half-way leaves the rest to a retry.
    for (const list of this.keys(grantId)) {
      const keys = await this.store.members(list)
      for (const key of keys) await this.store.delete(key)
      for (const key of keys) await this.store.removeMember(list, key)
    }
    for (const key of recordKeys(this.sealer, 'Grant', grantId)) await this.store.delete(key)
    await this.events.grantRevoked(grantId)
  }
}

/**
 * The first person to confirm a device code claims it, before oidc-provider saves it in flight (two
 * confirming at once would each start a sign-in, and the last to allow would put their account in
 * the other's CLI); the second is refused.
 */
async function setRecord (store: SessionStore, key: string, sealed: string, ttlMs: number): Promise<void> {
  await store.set(key, sealed, ttlMs)
}

/**
 * Whether a device code's write is its person's confirmation: in flight, with neither the sign-in
 * behind it (`accountId`) nor its end (`error`), which oidc-provider's later writes of the code
 * carry. Judged on the write, not on the record kept: of two people who confirmed one code at the
 * same moment, the second one's write came after the first's had put it in flight, and read so it
 * went through as a later write (a re-reader's finding).
 */
function isConfirmation (payload: AdapterPayload): boolean {
  return payload.inFlight === true && payload.accountId === undefined && payload.error === undefined
}

/**
 * A device code's record put in flight (its person confirmed it): once (the in-flight claim), and
 * undone when the store fails (a claim or a write that ran, its reply late), so that the person's
 * retry of Continue goes on (a tester's finding: the code stayed claimed, or in flight with no
 * sign-in behind it, and the CLI polled until it expired).
 */
async function saveInFlight (store: SessionStore, key: string, sealed: string, ttlMs: number): Promise<void> {
  const claim = ownClaim(store, `${key}:in-flight`)
  if (!await claim.take(ttlMs)) throw new errors.InvalidRequest('this code is being used already')
  let before: string | null = null
  try {
    before = await store.get(key)
    await store.set(key, sealed, ttlMs)
  } catch (error) {
    if (before !== null) await store.set(key, before, ttlMs).catch(() => {})
    await claim.giveBack()
    throw error
  }
}

/** A user code names one device code: a new one that happens to equal a live one is refused, never takes its place. */
async function indexUserCode (store: SessionStore, sealer: Sealer, key: string, userCode: string, id: string, ttlMs: number): Promise<void> {
  if (await store.claim(key, sealer.seal('agents-user-code', userCode, id), ttlMs)) return
  const sealed = await store.get(key)
  if (sealed === null || sealer.open('agents-user-code', userCode, sealed) !== id) throw new Error('a user code equal to a live one was drawn')
}

function recordKey (sealer: Sealer, model: string, id: string): string {
  return `${PREFIX}${model}:${sealer.idFor(`agents-${model}`, id)}`
}

/** Where a record of `model` may be: under every secret's id, the current one first. */
function recordKeys (sealer: Sealer, model: string, id: string): string[] {
  return sealer.idsFor(`agents-${model}`, id).map((each) => `${PREFIX}${model}:${each}`)
}

/** Where a write of `id` goes: where its record is kept already, else under the current secret's id. */
async function writeKey (store: SessionStore, sealer: Sealer, model: string, id: string): Promise<string> {
  const current = recordKey(sealer, model, id)
  return sealer.keys.length === 1 ? current : (await firstHeld(store, recordKeys(sealer, model, id)))?.key ?? current
}

/**
 * Keeps a registered client for `ttlMs` more: once a person allowed it, and at each refresh of one
 * of its grants. A client nobody allowed goes after `unusedClientMs` (registration is open to anyone).
 */
export async function keepClient (store: SessionStore, sealer: Sealer, clientId: string, ttlMs: number): Promise<void> {
  for (const key of recordKeys(sealer, 'Client', clientId)) {
    if (await store.getAndTouchBytes(key, ttlMs) !== null) return
  }
}

/** Where a used code or token is marked so, for its life. */
function consumedKey (key: string): string {
  return `${key}:consumed`
}

/** Where the request using a code or token claims it, for that request's time. */
function claimKey (key: string): string {
  return `${key}:in-use`
}
