// A deadline on the upstream bodies a route reads whole before sending them on (routes.ts): such a
// body must have arrived, all of it, within the route's timeout of the answer's headers. undici's
// body timeout bounds only the gaps between chunks, so an upstream that trickled a small body held
// the client, with nothing sent yet, for as long as it liked. Past the deadline the body is
// destroyed with undici's BodyTimeoutError: undici then closes the upstream's connection, and the
// read fails as a late first body byte does (504 gateway_timeout).
import { errors } from 'undici'

/** What the deadline needs of a body: destroying it ends the read and the upstream's connection. */
interface Destroyable { destroy (error: Error): unknown }

/** One body being read whole, as long as it is in the route's list. */
export class BodyRead {
  prev: BodyRead | null = null
  next: BodyRead | null = null
  /** Null once the read has ended or its deadline has passed: it is out of the list. */
  body: Destroyable | null

  constructor (body: Destroyable, readonly deadline: number) {
    this.body = body
  }
}

/**
 * The reads of one route in the order they began, which is also the order of their deadlines (one
 * timeout per route): a single timer, set for the oldest, is enough, and a read that ends costs
 * two pointer updates, no timer of its own (this is on the path of every small answer).
 * @see https://www.rfc-editor.org/rfc/rfc9110#section-15.6.5 (504 Gateway Timeout)
 */
export class BodyDeadlines {
  private head: BodyRead | null = null
  private tail: BodyRead | null = null
  private timer: NodeJS.Timeout | undefined = undefined

  constructor (private readonly timeoutMs: number) {}

  /** Starts the clock on `body`, whose headers have just arrived; call {@link end} when its read settles. */
  start (body: Destroyable): BodyRead {
    const read = new BodyRead(body, performance.now() + this.timeoutMs)
    if (this.tail === null) {
      this.head = read
    } else {
      this.tail.next = read
      read.prev = this.tail
    }
    this.tail = read
    this.schedule()
    return read
  }

  /** The read has settled (whole, failed, or destroyed at its deadline): it leaves the list. */
  end (read: BodyRead): void {
    if (read.body === null) return
    read.body = null
    if (read.prev === null) this.head = read.next
    else read.prev.next = read.next
    if (read.next === null) this.tail = read.prev
    else read.next.prev = read.prev
    read.prev = null
    read.next = null
  }

  /** No read is timed after the route's scope has closed. */
  close (): void {
    clearTimeout(this.timer)
    this.timer = undefined
  }

  /** Destroys every body whose deadline has passed, then waits for the next oldest one. */
  private readonly sweep = (): void => {
    this.timer = undefined
    // A timer may fire a little before performance.now() reaches its deadline (libuv's clock is
    // the loop's, in whole milliseconds): such a read is waited for again, never cut early.
    const now = performance.now()
    try {
      while (this.head !== null && this.head.deadline <= now) {
        const read = this.head
        const body = read.body!
        this.end(read)
        body.destroy(new errors.BodyTimeoutError(`Body not read whole within ${this.timeoutMs} ms`))
      }
    } finally {
      this.schedule()
    }
  }

  private schedule (): void {
    if (this.timer !== undefined || this.head === null) return
    this.timer = setTimeout(this.sweep, Math.max(0, this.head.deadline - performance.now()))
    this.timer.unref()
  }
}
