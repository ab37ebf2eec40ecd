// Deadlines of one route's waits (a request for its answer, a small body for its last byte) without
// a timer per wait: every wait of a route has the same timeout, so the order they began in is the
// order of their deadlines. A doubly linked list in that order and one timer, set for the oldest,
// are enough; a wait that ends leaves the list with two pointer updates (this is on the path of
// every proxied request).

/** One wait in a {@link DeadlineList}: its links belong to the list. */
export interface Timed<T> {
  prev: T | null
  next: T | null
  /** The list's `now()` (performance.now() unless a test gives another) at which it expires. */
  readonly deadline: number
}

import { nodeTimers, type Timers } from '../ops/clock.js'

/** The clock and the timer a list keeps its deadlines with; a test gives its own to move time itself. */
export interface DeadlineTimers extends Timers {
  /** Monotonic milliseconds. */
  now (): number
}

/** performance.now() and Node's unref'd timers (ops/clock.ts). */
export const deadlineTimers: DeadlineTimers = { now: () => performance.now(), setTimeout: nodeTimers.setTimeout }

export class DeadlineList<T extends Timed<T>> {
  private head: T | null = null
  private tail: T | null = null
  /** Cancels the one timer, set for the head's deadline; undefined when none is set. */
  private cancel: (() => void) | undefined = undefined

  constructor (
    /** Called once for each wait whose deadline has come, after it has left the list. */
    private readonly expire: (item: T) => void,
    /**
     * How early a deadline may count as come: timers fire on whole milliseconds, so a request
     * waiting for its answer takes 1; a wait that must never end before its timeout takes 0 (the
     * timer is set again for the remaining fraction).
     */
    private readonly earlyMs: number,
    private readonly timers: DeadlineTimers = deadlineTimers
  ) {}

  append (item: T): void {
    if (this.tail === null) {
      this.head = item
    } else {
      this.tail.next = item
      item.prev = this.tail
    }
    this.tail = item
    this.schedule()
  }

  /** Takes `item`, which must be in this list, out of it. */
  remove (item: T): void {
    if (item.prev === null) this.head = item.next
    else item.prev.next = item.next
    if (item.next === null) this.tail = item.prev
    else item.next.prev = item.prev
    item.prev = null
    item.next = null
  }

  /** No deadline is kept after this (the route's scope has closed). */
  close (): void {
    this.cancel?.()
    this.cancel = undefined
  }

  private readonly sweep = (): void => {
    this.cancel = undefined
    const now = this.timers.now() + this.earlyMs
    try {
      while (this.head !== null && this.head.deadline <= now) {
        const item = this.head
        this.remove(item)
        this.expire(item)
      }
    } finally {
      // Even if one expiry threw, the waits behind it still get their deadline.
      this.schedule()
    }
  }

  private schedule (): void {
    if (this.cancel !== undefined || this.head === null) return
    this.cancel = this.timers.setTimeout(this.sweep, Math.max(0, this.head.deadline - this.timers.now()))
  }
}
