// Marks of a moment that another instance compares with when its own work began: a back-channel
// logout, a sign-out everywhere, and a sign-in under way when one came. A mark is a key kept for
// MARK_MS whatever the config, and read as an age on the store's clock: MARK_MS less the key's
// remaining time. Each instance measures its own part as an interval on its own clock, so instances
// whose clocks disagree still agree on which came first. Instance times compared with each other
// did not: 100 ms of skew undid a back-channel logout (an attacker's finding).
import type { KeyValue } from './store.js'

/**
 * How long a mark is kept: longer than what it is compared with can last. That is a sign-in under
 * way (the longest state.ttl, 1 h, then two provider calls of the longest timeout, 2 min each), or
 * an agent's kept sign-in waiting for its Allow (state.ttl).
 */
export const MARK_MS = 3_600_000 + 2 * 120_000 + 60_000

/** Marks `key` now; done once a replica has it (a failover must not forget a logout). */
export async function mark (store: Pick<KeyValue, 'set'>, key: string): Promise<void> {
  await store.set(key, '1', MARK_MS, { replicated: true })
}

/** Whether `key` was marked within the last `withinMs` (Infinity: at all, within MARK_MS). */
export async function markedWithin (store: Pick<KeyValue, 'remainingMs'>, key: string, withinMs: number): Promise<boolean> {
  const left = await store.remainingMs(key)
  return left !== null && MARK_MS - left <= withinMs
}
