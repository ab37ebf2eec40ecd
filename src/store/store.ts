// The session store contract every other module sees: a small key-value interface with one
// meaning per method. Values are opaque strings (already encrypted by the caller).

/** A key-value store with per-key expiry. Implementations: Redis (shared) and memory (one process). */
export interface SessionStore {
  /** The value, or null when absent or expired. */
  get (key: string): Promise<string | null>
  /** The value, and the key's expiry reset to `ttlMs` (sliding idle timeout). */
  getAndTouch (key: string, ttlMs: number): Promise<string | null>
  /** Stores a value for `ttlMs`. */
  set (key: string, value: string, ttlMs: number): Promise<void>
  /** Reads and deletes atomically: only one caller ever gets the value (one-time login flows). */
  take (key: string): Promise<string | null>
  delete (key: string): Promise<void>
  /** Sets only if absent, for `ttlMs`; true when this caller set it (a lock). */
  claim (key: string, value: string, ttlMs: number): Promise<boolean>
  /** Tells every instance sharing the store (itself included); best effort. */
  publish (channel: string, message: string): Promise<void>
  /** Calls `onMessage` for each message published on `channel` by any instance. */
  subscribe (channel: string, onMessage: (message: string) => void): Promise<void>
  /** Resolves when the store answers; rejects with `session_store_unavailable` otherwise. */
  ping (): Promise<void>
  /** How much of the store answers now, for /readyz (a cluster can be partly down). */
  health (): Promise<StoreHealth>
  close (): Promise<void>
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

/** Key names, in one place. The caller-supplied id is always a hash, never a cookie value. */
export const storeKeys = {
  session: (id: string) => `session:${id}`,
  /** A sign-in state that came back once (the state's random id, not a secret). */
  usedState: (id: string) => `used-state:${id}`,
  refreshLock: (sessionId: string, provider: string) => `refresh:${sessionId}:${provider}`,
} as const
