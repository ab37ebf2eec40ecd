// The session store as its users see it: small roles, each with one meaning per method, so that a
// caller depends only on what it uses (the refresher on KeyValue and Lock, the probes on Readiness,
// sign-out on Broadcast). Values are opaque strings (already encrypted by the caller). The memory
// and Redis stores implement every role; `SessionStore` is all of them together.
import { randomBytes } from 'node:crypto'
import type { Cluster, Redis } from 'ioredis'
import { GatewayError } from '../errors.js'

/** How a write counts as done. */
export interface WriteOptions {
  /**
   * Only once a replica has acknowledged it (WAIT 1 <store.timeout> on the connection that took
   * it), where the store is set to wait (`store.waitForReplica`): for what a browser is told exists
   * (a new session, a refreshed one) and a logout's mark, which a failover must not lose (an ending
   * waits with {@link KeyValue.settled}). A write no replica acknowledged in time is
   * `session_store_unavailable` with {@link ReplicaUnacknowledged} as its cause: it may be on the
   * master alone, which a failover would lose.
   */
  readonly replicated?: boolean
}

/**
 * Key-value with per-key expiry. On Redis each method is one command (GET, GETEX, PTTL, SET PX, GETDEL,
 * DEL, SET NX PX), but {@link replace} and {@link capExpiry}, one Lua script on one key each, and,
 * where the store waits for replicas, {@link end} (one script over two keys in one slot) and {@link settled}
 * (a SET and its WAIT, then a DEL).
 */
export interface KeyValue {
  /** The value, or null when absent or expired. */
  get (key: string): Promise<string | null>
  /** The value's bytes as stored (a string value as UTF-8), or null. For binary values (session records). */
  getBytes (key: string): Promise<Buffer | null>
  /** The value's bytes, and the key's expiry reset to `ttlMs` (sliding idle timeout). */
  getAndTouchBytes (key: string, ttlMs: number): Promise<Buffer | null>
  /** How long the key has left before it expires (PTTL), without renewing it: null when absent, Infinity when it has no expiry. */
  remainingMs (key: string): Promise<number | null>
  /** Makes the key expire within `ttlMs` at the latest, never later than it would; nothing if it is absent. */
  capExpiry (key: string, ttlMs: number): Promise<void>
  /** Stores a value (text, or bytes as they are) for `ttlMs`. */
  set (key: string, value: string | Uint8Array, ttlMs: number, options?: WriteOptions): Promise<void>
  /**
   * Stores `value` for `ttlMs` only while the key still holds exactly `expected` (the bytes a reader
   * got); true when it did. A key deleted or changed since is left as it is, never created again:
   * a write that was under way cannot bring back what was ended meanwhile.
   */
  replace (key: string, expected: Uint8Array, value: string | Uint8Array, ttlMs: number, options?: WriteOptions): Promise<boolean>
  /** Reads and deletes atomically: only one caller ever gets the value (one-time login flows). */
  take (key: string): Promise<string | null>
  delete (key: string): Promise<void>
  /**
   * An ending's delete: `key` deleted, and, where the store waits for replicas and `key` was there,
   * marked {@link unsettled} in the same transaction, until {@link settled} counts a replica. Marked
   * with the delete: a failure anywhere after it (a broadcast, the wait's connection, a crash)
   * leaves the mark, and the ending is finished when tried again (an attacker's finding: the mark was
   * written by settled alone, and such a retry answered done). A key already gone writes nothing.
   * True when `key` was there.
   */
  end (key: string): Promise<boolean>
  /**
   * Ends `key` for good: resolves once a replica has its delete and every write made before now on
   * the node holding it, where the store waits for replicas (`store.waitForReplica`; at once
   * elsewhere): `key` deleted again, a write that always replicates, on that node, then WAIT.
   * After an ending's delete, and when an ending finds nothing left to end: the delete of its first
   * try, answered 503, may be on the master alone (a DEL of a key already gone replicates nothing,
   * so a WAIT after it would count nothing), and the node the wait reaches may be a master promoted
   * since, which still holds the key.
   */
  settled (key: string): Promise<void>
  /**
   * Whether a {@link settled} of `key` was answered without a replica (within the last hour): an
   * ending to finish when tried again. False at once where the store does not wait for replicas, so
   * a made-up cookie costs one read at most, never a write (an attacker's finding: a flood of them,
   * each settled, held up every sign-in's WAIT).
   */
  unsettled (key: string): Promise<boolean>
  /**
   * Sets only if absent, for `ttlMs`; true when this caller set it. For a marker that only expires
   * (a used state, the first signing-key set); a lock that is released again is a {@link Lock}.
   */
  claim (key: string, value: string, ttlMs: number): Promise<boolean>
}

/**
 * Sets of short strings (ranked sets: of bytes) with an expiry that only ever grows, for indexes whose entries must live
 * as long as the longest-lived thing they point to. On Redis each method is one Lua script on one
 * key (atomic, and fine on a Cluster).
 */
export interface Sets {
  /** Adds `member` to the set (created if absent) and makes it live at least `ttlMs` more: how many members it then has. */
  addMember (key: string, member: string, ttlMs: number): Promise<number>
  /** Makes the set live at least `ttlMs` more (never shortens it); nothing if it is absent. */
  extend (key: string, ttlMs: number): Promise<void>
  /**
   * Every member (none when absent). Read, not taken: a caller ends what they point to, then takes
   * each out, so that a reply lost on the way (a 503) leaves them to the retry (an outside tester's
   * finding: a back-channel logout whose take answered late was answered 200 on its retry and ended nothing).
   */
  members (key: string): Promise<string[]>
  /** Takes `member` out of the set, its expiry unchanged (an empty set is gone); nothing if it is absent. */
  removeMember (key: string, member: string): Promise<void>
  /**
   * Adds `member` with `score` to a ranked set (created if absent), makes it live at least `ttlMs`
   * more, and keeps only the `max` highest-scored members besides `exempt`, which, while it is
   * there, is neither counted nor dropped: the ones dropped (lowest first), so the caller can end
   * what they stood for. One Lua script on Redis (ZADD, ZREM).
   */
  addRanked (key: string, member: Buffer, score: number, ttlMs: number, max: number, exempt?: Buffer): Promise<Buffer[]>
  /**
   * The same add, only when the set then holds at most `max` members (a member already there is
   * only re-scored): true when added; false, and nothing changed, when the set is full.
   */
  addRankedIfRoom (key: string, member: Buffer, score: number, ttlMs: number, max: number): Promise<boolean>
  /** A ranked set's members (bytes), lowest score first (none when absent). */
  rankedMembers (key: string): Promise<Buffer[]>
  /** Removes `member` from a ranked set; nothing if it is not there. */
  removeRanked (key: string, member: Buffer): Promise<void>
}

/** A held lock: its key and the random token of the owner that acquired it. */
export interface LockHandle {
  readonly key: string
  readonly owner: string
}

/** A new lock owner token: 128 random bits, so no two acquisitions share one. */
export function lockOwner (): string {
  return randomBytes(16).toString('base64url')
}

/** A claim of one key under a value of its taker's own (ownClaim). */
export interface OwnClaim {
  /** Sets the key if absent, for `ttlMs`: true when this claim did. When the store fails, the claim is given back (the write may have landed, its reply lost), and the error thrown. */
  take (ttlMs: number): Promise<boolean>
  /** Deletes the key while it holds this claim's value, never another's; best effort. */
  giveBack (): Promise<void>
  /** The same, the store's failure thrown (for a caller that does it again later). */
  giveBackOrThrow (): Promise<void>
}

/**
 * A claim of `key` that can be given back: a used code or token whose request failed, an answer
 * that could not be written. It holds a value of its own, so that giving it back never frees a
 * claim another request took meanwhile.
 */
export function ownClaim (store: Pick<KeyValue, 'claim'> & Pick<Lock, 'release'>, key: string): OwnClaim {
  const handle = { key, owner: lockOwner() }
  const giveBackOrThrow = async (): Promise<void> => { await store.release(handle) }
  const giveBack = async (): Promise<void> => { await giveBackOrThrow().catch(() => {}) }
  return {
    take: async (ttlMs) => {
      try {
        return await store.claim(key, handle.owner, ttlMs)
      } catch (error) {
        await giveBack()
        throw error
      }
    },
    giveBack,
    giveBackOrThrow,
  }
}

/**
 * A lock shared by every instance on the store, held until released or until its time runs out.
 * Acquire is SET key owner NX PX ttl; release deletes the key only while it still holds this
 * owner's token (one compare-and-delete script on Redis), so a holder that was too slow and lost
 * the lock to its expiry cannot release the next holder's lock.
 */
export interface Lock {
  /** Acquires `key` for `ttlMs` under a new owner token: the handle, or null when another owner holds it. */
  acquire (key: string, ttlMs: number): Promise<LockHandle | null>
  /** Releases the lock if `handle`'s owner still holds it; true when it did, false when it had expired (and maybe passed on). */
  release (handle: LockHandle): Promise<boolean>
}

/** Invalidation broadcasts: messages to every instance sharing the store (itself included). */
export interface Broadcast {
  /** Tells every instance sharing the store; best effort. */
  publish (channel: string, message: string): Promise<void>
  /**
   * Calls `onMessage` for each message published on `channel` by any instance, from when it is
   * subscribed (made in the background: a store unreachable at start subscribes once it is back).
   * `onListening(false)` when messages may be missed from then on (not subscribed yet, or the
   * subscription was lost), `onListening(true)` once they are heard again: what was published in
   * between never arrives.
   */
  subscribe (channel: string, onMessage: (message: string) => void, onListening?: (listening: boolean) => void): Promise<void>
}

/**
 * The store as /readyz reports it: `up`, `down` (nothing answers), or `degraded` (some nodes of a
 * Redis Cluster answer, others do not: the sessions on those fail, the others work).
 */
export interface StoreHealth {
  state: 'up' | 'degraded' | 'down'
  /** Nodes (host:port) known unreachable; for a single Redis, the store itself when down. */
  unreachable: string[]
}

/** Whether the store answers: at start, for /readyz, and for a quick check. */
export interface Readiness {
  /** Resolves true once the store is connected (at once for memory), false after `timeoutMs` without. */
  ready (timeoutMs: number): Promise<boolean>
  /** Resolves when the store answers; rejects with `session_store_unavailable` otherwise. */
  ping (): Promise<void>
  /** How much of the store answers now (a cluster can be partly down). */
  health (): Promise<StoreHealth>
}

/** The Redis connection behind a store, for a library that keeps its own keys beside the sessions (the sign-in rate limiter). */
export interface SharedConnection {
  /** undefined for the memory store: such a library then keeps its keys in this process. */
  readonly redis: Redis | Cluster | undefined
}

/** Every role together: what the composition root creates and closes. */
export interface SessionStore extends KeyValue, Sets, Lock, Broadcast, Readiness, SharedConnection {
  close (): Promise<void>
}

/**
 * Why a store refused a command it received and answered (not an outage: the connection works):
 * Redis's own error code word (`OOM` under `maxmemory` with `noeviction`, `READONLY` on a replica,
 * `NOPERM` for a missing ACL permission), else `other`. The label of gateway_store_refusals_total.
 */
export const COMMAND_REFUSAL_REASONS = ['OOM', 'READONLY', 'NOPERM', 'other'] as const
export type CommandRefusalReason = typeof COMMAND_REFUSAL_REASONS[number]

/**
 * The cause of a `session_store_unavailable` error when the store answered the command with a
 * refusal. `message` is the store's own error text (never a key or a value).
 */
export class StoreRefusal extends Error {
  constructor (readonly reason: CommandRefusalReason, message: string, options: { cause?: unknown } = {}) {
    super(message, options)
    this.name = 'StoreRefusal'
  }
}

/**
 * The cause of a `session_store_unavailable` error when a write was made but no replica
 * acknowledged it within store.timeout (see {@link WriteOptions.replicated}). `message` says how
 * long was waited and what WAIT answered (never a key or a value).
 */
export class ReplicaUnacknowledged extends Error {
  constructor (message: string) {
    super(message)
    this.name = 'ReplicaUnacknowledged'
  }
}

/** True when `error` is a write no replica acknowledged (see {@link ReplicaUnacknowledged}). */
export function unacknowledgedByReplica (error: unknown): error is GatewayError & { cause: ReplicaUnacknowledged } {
  return error instanceof GatewayError && error.code === 'session_store_unavailable' && error.cause instanceof ReplicaUnacknowledged
}

/**
 * True when `error` is a store command the store refused (see {@link StoreRefusal}): reads may
 * still work, so a caller that only wanted to write (a refresh's lock or result) can go on with
 * what it has.
 */
export function refusedByStore (error: unknown): error is GatewayError & { cause: StoreRefusal } {
  return error instanceof GatewayError && error.code === 'session_store_unavailable' && error.cause instanceof StoreRefusal
}

/** Key names, in one place. The caller-supplied id is always a hash, never a cookie value. */
export const storeKeys = {
  session: (id: string) => `session:${id}`,
  /** A sign-in state that came back once (the state's random id, not a secret). */
  usedState: (id: string) => `used-state:${id}`,
  refreshLock: (sessionId: string, provider: string) => `refresh:${sessionId}:${provider}`,
  /** A renamed session's old id, pointing at its new one for a minute (src/session/renames.ts). */
  renamed: (oldId: string) => `renamed:${oldId}`,
  /** A person's sessions (src/session/person-index.ts): `hash` is a keyed hash of (provider, sub). */
  person: (hash: string) => `person:${hash}`,
  /** When the person of a person key last signed out everywhere: a sign-in kept from before then is made no session (src/session/person-index.ts). */
  signedOutEverywhere: (personKey: string) => `signed-out:${personKey}`,
  /** A sign-in kept for an agent's authorization until the person allows it (src/agents/pending.ts), listed for back-channel logout as a session id is. */
  pendingSignIn: (hash: string) => `agents:pending:${hash}`,
} as const

/** Whether an id the back-channel index lists is a kept sign-in's key (storeKeys.pendingSignIn), not a session's id, which has no `:`. */
export function isPendingSignInKey (id: string): boolean {
  return id.startsWith('agents:pending:')
}

/** The first of `keys` the store holds, with its value (a record kept under an earlier secret's id: Sealer.idsFor). */
export async function firstHeld (store: Pick<KeyValue, 'get'>, keys: readonly string[]): Promise<{ key: string, value: string } | undefined> {
  for (const key of keys) {
    const value = await store.get(key)
    if (value !== null) return { key, value }
  }
  return undefined
}
