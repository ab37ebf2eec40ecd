// One route's connections to its upstream, and a deadline on every request sent there. undici
// starts a request's headersTimeout only once the request is written to a connection, so a request
// waiting for one of a busy pool's connections was not timed at all: under load it waited several
// timeouts. Here the route's timeout counts from the moment the request is handed to the pool.
import type { IncomingHttpHeaders } from 'node:http'
import { Pool, errors, type Dispatcher } from 'undici'
import { sharedLookup } from '../ops/shared-lookup.js'
import { DeadlineList, deadlineTimers, type DeadlineTimers, type Timed } from './deadline-list.js'
import { bodiless, readsWhole, StreamedBody, WholeBody, type UpstreamBody } from './upstream-body.js'

/** What a request's caller gets: the answer's status and headers, and its body as it comes. */
export interface UpstreamAnswer {
  statusCode: number
  headers: IncomingHttpHeaders
  body: WholeBody | StreamedBody | UpstreamFailure
}

/** Called once, with the answer or the failure in its place. */
type Callback = (answer: UpstreamAnswer) => void

/**
 * Why a request got no answer from the upstream: what the pool hands back, as the body of a
 * response, so that every answer takes one path (src/proxy/upstream-response.ts turns it into 502
 * or 504, and logs it once).
 */
export class UpstreamFailure {
  constructor (readonly reason: Error & { code?: string }) {}
  /** A body is destroyed when the client has gone away meanwhile: there is nothing to free. */
  destroy (): void {}
}

/**
 * A request given to the pool and not answered yet, and undici's handler of it: the answer's
 * headers go to the caller at once, with a body the bytes then feed ({@link UpstreamBody}).
 */
class Pending implements Timed<Pending>, Dispatcher.DispatchHandler {
  prev: Pending | null = null
  next: Pending | null = null
  /** Undici's hold on the request, once it is on a connection. */
  private controller: Dispatcher.DispatchController | undefined = undefined
  /** Set at the deadline before the request reached a connection: it is aborted as soon as it does. */
  private expired: Error | undefined = undefined
  private body: UpstreamBody | undefined = undefined

  constructor (readonly deadline: number, public callback: Callback | null, private readonly method: string, private readonly pool: UpstreamPool) {}

  onRequestStart (controller: Dispatcher.DispatchController): void {
    this.controller = controller
    if (this.expired !== undefined) controller.abort(this.expired)
  }

  onResponseStart (controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    // An interim answer (102 Processing, 103 Early Hints) is not the answer: the final one follows,
    // within the same deadline (undici's request API skipped them too).
    if (statusCode < 200) return
    const callback = this.callback
    // Answered already, at its deadline: the late response is not wanted.
    if (callback === null) return controller.abort(new errors.RequestAbortedError())
    this.callback = null
    this.pool.settled(this)
    const body = readsWhole(this.method, statusCode, headers) ? new WholeBody(controller) : new StreamedBody(controller)
    if (bodiless(statusCode)) {
      // No body, whatever length it declares (a 304 may declare the 200's: RFC 9110 8.6): it ends
      // with its headers. undici would fail it for the declared bytes that never come (its parser
      // spares only a HEAD's answer), and the client would get 502 for its 304.
      body.end()
    } else {
      this.body = body
    }
    callback({ statusCode, headers, body })
  }

  onResponseData (_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.body?.add(chunk)
  }

  onResponseEnd (): void {
    this.body?.end()
  }

  onResponseError (_controller: Dispatcher.DispatchController, error: Error): void {
    if (this.body !== undefined) return this.body.fail(error)
    const callback = this.callback
    // Answered already, at its deadline, and aborted since.
    if (callback === null) return
    this.callback = null
    this.pool.settled(this)
    callback(failure(error))
  }

  /**
   * The client has gone before the answer's headers (an attacker's finding: the request held the
   * upstream and a connection of the pool until the route's timeout): nobody waits for the answer,
   * so undici lets go of the request now, a queued one as soon as it reaches a connection. False
   * when it had been answered (or had failed) already: nothing to let go.
   */
  cancel (): boolean {
    if (this.callback === null) return false
    this.callback = null
    this.pool.settled(this)
    const error = new errors.RequestAbortedError('The client went away before the answer')
    if (this.controller !== undefined) this.controller.abort(error)
    else this.expired = error
    return true
  }

  /** Whether undici has put the request on a connection (it may have been sent). */
  get connected (): boolean {
    return this.controller !== undefined
  }

  /** The deadline has come before the answer's headers: the caller gets a timeout, then undici lets go of the request. */
  expire (error: Error): void {
    const callback = this.callback!
    this.callback = null
    callback(failure(error))
    if (this.controller !== undefined) this.controller.abort(error)
    else this.expired = error
  }
}

/** What the pool needs to know of its route. */
export interface UpstreamPoolOptions {
  /** The upstream's origin. */
  origin: string
  /** The answer's headers must arrive within this long of the request entering the pool; body chunks within this long of each other. */
  timeoutMs: number
  /** At most this many connections at once; requests beyond wait for one, within their timeout. */
  maxConnections: number
}

/** What a test may give in place of the real parts: its own clock and timer, and its own undici Pool. */
export interface UpstreamPoolParts {
  timers?: DeadlineTimers
  pool?: Pick<Pool, 'dispatch' | 'destroy'>
}

/**
 * An undici Pool behind a deadline per request. The pending requests are kept in a list in the
 * order they came, which is also the order of their deadlines (one timeout per pool), so a single
 * timer per pool, set for the oldest, is enough: no timer per request.
 * @see https://www.rfc-editor.org/rfc/rfc9110#section-15.6.5 (504 Gateway Timeout: what an expired request becomes)
 */
export class UpstreamPool {
  private readonly pool: Pick<Pool, 'dispatch' | 'destroy'>
  private readonly timeoutMs: number
  private readonly maxConnections: number
  private readonly timers: DeadlineTimers
  private readonly pending: DeadlineList<Pending>

  constructor ({ origin, timeoutMs, maxConnections }: UpstreamPoolOptions, parts: UpstreamPoolParts = {}) {
    this.timeoutMs = timeoutMs
    this.maxConnections = maxConnections
    this.timers = parts.timers ?? deadlineTimers
    // Timers fire on whole milliseconds: a deadline within one of now has come.
    this.pending = new DeadlineList<Pending>((pending) => this.expire(pending), 1, this.timers)
    // headersTimeout stays as a backstop: the deadline here always comes first. Connecting longer
    // than the route would wait for an answer is pointless. An upstream name whose lookup hangs costs
    // one thread-pool thread, not one per connection attempt (src/ops/shared-lookup.ts), and stays
    // shared for as long as a connection waits for it: the connect timeout.
    const connectTimeout = Math.min(timeoutMs, 10_000)
    this.pool = parts.pool ?? new Pool(origin, {
      connections: maxConnections,
      pipelining: 1,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      connectTimeout,
      connect: { lookup: sharedLookup(connectTimeout) },
    })
  }

  /**
   * Sends a request; `callback` gets the upstream's answer (its body then streams in), or at the
   * latest when the route's timeout is up, a response whose body is an {@link UpstreamFailure}. It
   * is called once, unless the request is cancelled first (the client has gone).
   */
  request (options: Dispatcher.DispatchOptions, callback: Callback): { cancel (): boolean } {
    const pending = new Pending(this.timers.now() + this.timeoutMs, callback, options.method, this)
    this.pending.append(pending)
    this.pool.dispatch(options, pending)
    return pending
  }

  /** `pending` has its answer's headers, or its failure: its deadline no longer applies. */
  settled (pending: Pending): void {
    this.pending.remove(pending)
  }

  /** Lets the pool go: pending requests fail, open connections are closed. */
  async destroy (): Promise<void> {
    this.pending.close()
    await this.pool.destroy()
  }

  /**
   * A request whose deadline has come, out of the list: it is answered 504, then aborted. In that
   * order: the answer is on its way before undici lets go of the request's body.
   */
  private expire (pending: Pending): void {
    // Never on a connection: the upstream never had it, so the line says so (a tester's finding: a
    // name whose lookup never answers was logged as an application that answered late).
    pending.expire(pending.connected
      ? new errors.HeadersTimeoutError(`No answer within ${this.timeoutMs} ms`)
      : new errors.ConnectTimeoutError(`No connection to the upstream within ${this.timeoutMs} ms: its name did not resolve, its connection did not open, or all ${this.maxConnections} of the route's connections stayed busy`))
  }
}

/** A response in place of the one that did not come; src/proxy/upstream-response.ts turns it into 502 or 504. */
function failure (error: Error): UpstreamAnswer {
  // The status and headers are never read: the gateway answers with its own.
  return { statusCode: 502, headers: {}, body: new UpstreamFailure(error) }
}
