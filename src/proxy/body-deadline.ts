// A deadline on the upstream bodies a route reads whole before sending them on (upstream-response.ts): such a
// body must have arrived, all of it, within the route's timeout of the answer's headers. undici's
// body timeout bounds only the gaps between chunks, so an upstream that trickled a small body held
// the client, with nothing sent yet, for as long as it liked. Past the deadline the body is
// destroyed with undici's BodyTimeoutError: undici then closes the upstream's connection, and the
// read fails as a late first body byte does (504 gateway_timeout).
import { errors } from 'undici'
import { DeadlineList, type Timed } from './deadline-list.js'

/** What the deadline needs of a body: destroying it ends the read and the upstream's connection. */
interface Destroyable { destroy (error: Error): unknown }

/** One body being read whole, as long as it is in the route's list. */
export class BodyRead implements Timed<BodyRead> {
  prev: BodyRead | null = null
  next: BodyRead | null = null
  /** Null once the read has ended or its deadline has passed: it is out of the list. */
  body: Destroyable | null

  constructor (body: Destroyable, readonly deadline: number) {
    this.body = body
  }
}

/**
 * The reads of one route, on one {@link DeadlineList}: a read is never cut before its deadline.
 * @see https://www.rfc-editor.org/rfc/rfc9110#section-15.6.5 (504 Gateway Timeout)
 */
export class BodyDeadlines {
  private readonly reads = new DeadlineList<BodyRead>((read) => this.expire(read), 0)

  constructor (private readonly timeoutMs: number) {}

  /** Starts the clock on `body`, whose headers have just arrived; call {@link end} when its read settles. */
  start (body: Destroyable): BodyRead {
    const read = new BodyRead(body, performance.now() + this.timeoutMs)
    this.reads.append(read)
    return read
  }

  /** The read has settled (whole, failed, or destroyed at its deadline): it leaves the list. */
  end (read: BodyRead): void {
    if (read.body === null) return
    read.body = null
    this.reads.remove(read)
  }

  /** No read is timed after the route's scope has closed. */
  close (): void {
    this.reads.close()
  }

  private expire (read: BodyRead): void {
    const body = read.body!
    read.body = null
    body.destroy(new errors.BodyTimeoutError(`Body not read whole within ${this.timeoutMs} ms`))
  }
}
