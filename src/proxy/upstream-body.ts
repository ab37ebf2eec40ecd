// The body of an upstream's answer as the route's pool hands it on (upstream-pool.ts), fed by
// undici's dispatch handler as the bytes come: a small body of declared length is gathered whole
// (WholeBody), to go out with the headers in one write; any other streams as a Readable that pauses
// the upstream's connection while the client is slow (StreamedBody). undici's own request API
// wraps every body in a Readable and reads a small one back through a promise: that cost a sixth
// of a proxied request's CPU (docs/performance.md).
import type { IncomingHttpHeaders } from 'node:http'
import { Readable } from 'node:stream'
import { errors, type Dispatcher } from 'undici'

/** Upstream bodies of declared length up to this size are read whole and sent in one write. */
export const WHOLE_BODY_MAX = 64 * 1024

/**
 * Whether an answer's body is read whole before anything goes to the client: a declared length of
 * at most {@link WHOLE_BODY_MAX} and a declared type (Fastify would give a buffer one the upstream
 * never sent). Everything else streams as it arrives: no declared length (chunked, server-sent
 * events), larger bodies, HEAD and bodiless statuses.
 */
export function readsWhole (method: string, status: number, headers: IncomingHttpHeaders): boolean {
  return Number(headers['content-length']) <= WHOLE_BODY_MAX && headers['content-type'] !== undefined &&
    method !== 'HEAD' && status >= 200 && !bodiless(status)
}

/** A final answer that has no body whatever length it declares (RFC 9110 6.4.1: 204, 304). */
export function bodiless (status: number): boolean {
  return status === 204 || status === 304
}

/** What the pool feeds a body with, from undici's handler. */
export interface UpstreamBody {
  add (chunk: Buffer): void
  end (): void
  fail (error: Error): void
}

/** A small body gathered whole; {@link read} hands it over once all of it has come. */
export class WholeBody implements UpstreamBody {
  private readonly chunks: Buffer[] = []
  private outcome: Buffer | Error | undefined = undefined
  private waiting: ((error: Error | null, body?: Buffer) => void) | undefined = undefined

  constructor (private readonly controller: Dispatcher.DispatchController) {}

  add (chunk: Buffer): void {
    this.chunks.push(chunk)
  }

  end (): void {
    this.settle(this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks))
  }

  fail (error: Error): void {
    this.settle(error)
  }

  /** Calls `callback` once: with the whole body, or with why it did not all come. */
  read (callback: (error: Error | null, body?: Buffer) => void): void {
    if (this.outcome === undefined) this.waiting = callback
    else this.deliver(callback, this.outcome)
  }

  /** Stops the read (the route's deadline for it, or a client that has gone): the upstream's connection is closed, and the read fails with `error`. */
  destroy (error: Error = new errors.RequestAbortedError()): void {
    this.controller.abort(error)
  }

  private settle (outcome: Buffer | Error): void {
    if (this.outcome !== undefined) return
    this.outcome = outcome
    this.chunks.length = 0
    const waiting = this.waiting
    this.waiting = undefined
    if (waiting !== undefined) this.deliver(waiting, outcome)
  }

  private deliver (callback: (error: Error | null, body?: Buffer) => void, outcome: Buffer | Error): void {
    if (outcome instanceof Error) callback(outcome)
    else callback(null, outcome)
  }
}

/**
 * Any other body, as a Readable: a chunk the client's side has no room for pauses the upstream's
 * connection until it is read; destroying the stream (a client that has gone) aborts the upstream
 * request. 64 KiB of buffer, as undici's own body streams have.
 */
export class StreamedBody extends Readable implements UpstreamBody {
  private ended = false

  constructor (private readonly controller: Dispatcher.DispatchController) {
    super({ highWaterMark: 64 * 1024 })
  }

  override _read (): void {
    this.controller.resume()
  }

  override _destroy (error: Error | null, callback: (error?: Error | null) => void): void {
    if (!this.ended) this.controller.abort(error ?? new errors.RequestAbortedError())
    callback(error)
  }

  add (chunk: Buffer): void {
    if (!this.push(chunk)) this.controller.pause()
  }

  end (): void {
    this.ended = true
    this.push(null)
  }

  /**
   * Ends the stream here, cleanly (a chunked answer's last chunk), and lets the upstream's answer
   * go: a shutdown ends an event stream so, and its reader (an EventSource) reconnects elsewhere.
   */
  finish (): void {
    if (this.ended) return
    this.ended = true
    this.push(null)
    this.controller.abort(new errors.RequestAbortedError())
  }

  fail (error: Error): void {
    // The upstream let go by finish(): its abort is no failure of the stream.
    if (this.ended) return
    this.ended = true
    // Whoever reads the stream hears of the error; with no reader yet (or any more), it must not
    // become an uncaught exception (undici's own body streams do the same).
    this.on('error', ignore)
    this.destroy(error)
  }
}

function ignore (): void {}
