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

/** Node's timers, unref'd. */
export const nodeTimers: Timers = {
  setTimeout: (callback, ms) => {
    const timer = setTimeout(callback, ms).unref()
    return () => clearTimeout(timer)
  },
}
