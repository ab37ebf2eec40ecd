// One route's connections to its upstream, and a deadline on every request sent there. undici
// starts a request's headersTimeout only once the request is written to a connection, so a request
// waiting for one of a busy pool's connections was not timed at all: under load it waited several
// timeouts. Here the route's timeout counts from the moment the request is handed to the pool.
import type { EventEmitter } from 'node:events'
import { Pool, errors, type Dispatcher } from 'undici'
import { sharedLookup } from '../ops/shared-lookup.js'
import { DeadlineList, nodeTimers, type DeadlineTimers, type Timed } from './deadline-list.js'

type ResponseData = Dispatcher.ResponseData<Pending>
/** The callback form of `Dispatcher.request`, the one @fastify/reply-from calls. */
type Callback = (error: Error | null, data: ResponseData) => void

/**
 * Why a request got no answer from the upstream: what the pool hands back, as the body of a
 * response, instead of an error. (@fastify/reply-from logs every error it is given at warn, with
 * its stack, before its onError; the gateway logs each upstream failure once, in src/proxy/upstream-response.ts.)
 */
export class UpstreamFailure {
  constructor (readonly reason: Error & { code?: string }) {}
  /** reply-from destroys the body when the client has gone away meanwhile: there is nothing to free. */
  destroy (): void {}
}

/**
 * A request given to the pool and not answered yet. It is also the request's abort signal (undici
 * accepts an EventEmitter-like one): firing it at the deadline takes the request out of the pool's
 * queue, or aborts it on its connection.
 */
class Pending implements Timed<Pending> {
  prev: Pending | null = null
  next: Pending | null = null
  aborted = false
  reason: Error | undefined = undefined
  private listener: (() => void) | undefined = undefined

  constructor (readonly deadline: number, public callback: Callback | null) {}

  on (_event: 'abort', listener: () => void): this {
    this.listener = listener
    return this
  }

  once (event: 'abort', listener: () => void): this {
    return this.on(event, listener)
  }

  removeListener (): this {
    this.listener = undefined
    return this
  }

  abort (reason: Error): void {
    this.aborted = true
    this.reason = reason
    this.listener?.()
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
  pool?: Pick<Pool, 'request' | 'destroy'>
}

/**
 * An undici Pool behind a deadline per request. The pending requests are kept in a list in the
 * order they came, which is also the order of their deadlines (one timeout per pool), so a single
 * timer per pool, set for the oldest, is enough: no timer per request.
 * @see https://www.rfc-editor.org/rfc/rfc9110#section-15.6.5 (504 Gateway Timeout: what an expired request becomes)
 */
export class UpstreamPool {
  private readonly pool: Pick<Pool, 'request' | 'destroy'>
  private readonly timeoutMs: number
  private readonly timers: DeadlineTimers
  private readonly pending: DeadlineList<Pending>

  constructor ({ origin, timeoutMs, maxConnections }: UpstreamPoolOptions, parts: UpstreamPoolParts = {}) {
    this.timeoutMs = timeoutMs
    this.timers = parts.timers ?? nodeTimers
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
   * Sends a request; `callback` gets the upstream's answer, or at the latest when the route's
   * timeout is up, a response whose body is an {@link UpstreamFailure}. It is called once.
   */
  request (options: Dispatcher.RequestOptions<Pending>, callback: Callback): void {
    const pending = new Pending(this.timers.now() + this.timeoutMs, callback)
    this.pending.append(pending)
    // The options object is reply-from's own, made for this one request. undici reads a signal's
    // on/once/removeListener, aborted and reason only: Pending has them without an EventEmitter
    // (a subclass of one cost 1.02-1.04x CPU per proxied request, `npm run bench -- --against`,
    // 2026-11-29).
    options.opaque = pending
    options.signal = pending as unknown as EventEmitter
    this.pool.request(options, this.answer)
  }

  /** Lets the pool go: pending requests fail, open connections are closed. */
  async destroy (): Promise<void> {
    this.pending.close()
    await this.pool.destroy()
  }

  private readonly answer = (error: Error | null, data: ResponseData): void => {
    const pending = data.opaque
    const callback = pending.callback
    if (callback === null) {
      // Answered already, at its deadline: the late response is not wanted.
      if (error === null) data.body.destroy()
      return
    }
    pending.callback = null
    this.pending.remove(pending)
    callback(null, error === null ? data : failure(error, pending))
  }

  /**
   * A request whose deadline has come, out of the list: it is answered 504, then aborted. In that
   * order: the answer is on its way before undici lets go of the request's body.
   */
  private expire (pending: Pending): void {
    const callback = pending.callback!
    pending.callback = null
    const error = new errors.HeadersTimeoutError(`No answer within ${this.timeoutMs} ms`)
    callback(null, failure(error, pending))
    pending.abort(error)
  }
}

/** A response in place of the one that did not come; src/proxy/upstream-response.ts turns it into 502 or 504. */
function failure (error: Error, pending: Pending): ResponseData {
  // Only statusCode, headers and body are read, and the status is replaced by the gateway's own;
  // not 503, which reply-from would retry for a GET.
  return { statusCode: 502, statusText: '', headers: {}, body: new UpstreamFailure(error) as unknown as ResponseData['body'], trailers: {}, opaque: pending, context: {} }
}
