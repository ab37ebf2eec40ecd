// A clock and timers a test moves itself, for the deadline list (src/proxy/deadline-list.ts) and
// what keeps its deadlines on one: no wall-clock wait, no real timer.
import type { DeadlineTimers } from '../../src/proxy/deadline-list.js'

/** A clock that moves only when told, and the timers set on it, fired as time passes them. */
export class ManualTimers implements DeadlineTimers {
  time = 0

  /**
   * `wholeMs`: a timer fires as Node's do, counted from the last whole millisecond (libuv's clock)
   * and after at least 1 ms, so up to 1 ms before a fractional deadline.
   */
  constructor (private readonly options: { wholeMs?: boolean } = {}) {}
  /** Every timer set, in order, with whether it was cancelled or has fired. */
  readonly set: Array<{ at: number, callback: () => void, done: boolean }> = []

  now (): number {
    return this.time
  }

  setTimeout (callback: () => void, ms: number): () => void {
    const at = this.options.wholeMs === true ? Math.floor(this.time) + Math.max(1, ms) : this.time + ms
    const timer = { at, callback, done: false }
    this.set.push(timer)
    return () => { timer.done = true }
  }

  /** The timers not yet fired nor cancelled. */
  live (): number[] {
    return this.set.filter((timer) => !timer.done).map((timer) => timer.at)
  }

  /**
   * Moves the clock to `to`, firing each timer due on the way at its own time, in time order. A list
   * that keeps setting timers without time moving fails here instead of hanging.
   */
  advance (to: number): void {
    for (let fired = 0; ; fired++) {
      if (fired === 1000) throw new Error(`1000 timers fired before ${to}`)
      const due = this.set.filter((timer) => !timer.done && timer.at <= to).sort((a, b) => a.at - b.at)[0]
      if (due === undefined) break
      this.time = due.at
      due.done = true
      due.callback()
    }
    this.time = to
  }
}
