// The one clock: what "now" is, injected wherever expiry or a time window is decided, so that tests
// move time instead of sleeping on it.

/** Milliseconds since the epoch, as `Date.now()` gives them. */
export interface Clock {
  now (): number
}

/** The wall clock (through `Date.now`, so vitest's fake timers move it too). */
export const systemClock: Clock = { now: () => Date.now() }

/** Sets a timer that must not keep the process alive; the returned function cancels it. Tests give their own, to fire timers themselves. */
export interface Timers {
  setTimeout (callback: () => void, ms: number): () => void
}

/**
 * The longest a deadline's timer is set for: Node fires a timer set for more than 2^31 - 1 ms
 * (24.8 days) at once, and a session may live 400 days. A later deadline is reached in several
 * waits, each looking again when it fires.
 */
export const MAX_TIMER_MS = 24 * 3600 * 1000

/** Node's timers, unref'd. */
export const nodeTimers: Timers = {
  setTimeout: (callback, ms) => {
    const timer = setTimeout(callback, ms).unref()
    return () => clearTimeout(timer)
  },
}
