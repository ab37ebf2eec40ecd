// The upstream pool's deadline per request (src/proxy/upstream-pool.ts) without a socket: the undici
// Pool is a stand-in that keeps each request's handler until the test plays undici's part with it,
// and the clock and timer are moved by the test. Also the bodies the pool hands on
// (src/proxy/upstream-body.ts): read whole, or streamed with the upstream paused while the reader is full.
import type { IncomingHttpHeaders } from 'node:http'
import type { Dispatcher, Pool } from 'undici'
import { errors } from 'undici'
import { describe, expect, it } from 'vitest'
import { StreamedBody, WholeBody } from '../../src/proxy/upstream-body.js'
import { UpstreamFailure, UpstreamPool, type UpstreamAnswer } from '../../src/proxy/upstream-pool.js'
import { ManualTimers } from '../helpers/manual-timers.js'

const TIMEOUT_MS = 1000

/** undici's hold on one request, as the handler sees it: what the pool did with it is recorded. */
class Controller implements Dispatcher.DispatchController {
  aborted = false
  paused = false
  reason: Error | null = null
  abort (reason: Error): void {
    this.aborted = true
    this.reason = reason
  }

  pause (): void { this.paused = true }
  resume (): void { this.paused = false }
}

/** A request the stand-in pool was given, and what the pool's caller got back for it. */
interface Sent {
  handler: Dispatcher.DispatchHandler
  controller: Controller
  /** Every call the caller's callback got. */
  got: Array<{ data: UpstreamAnswer }>
  /** undici puts the request on a connection. */
  start (): void
  /** The upstream's answer's headers come. */
  answer (headers?: IncomingHttpHeaders, status?: number): void
  /** The request fails in undici (before or after the headers). */
  fail (error: Error): void
  /** The client has gone (src/proxy/forward.ts). */
  cancel (): void
}

function setUp (timers = new ManualTimers()) {
  let destroyed = false
  let dispatched: Dispatcher.DispatchHandler | undefined
  const standIn = {
    dispatch (_options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
      dispatched = handler
      return true
    },
    async destroy (): Promise<void> { destroyed = true },
  }
  const pool = new UpstreamPool({ origin: 'http://upstream.invalid', timeoutMs: TIMEOUT_MS, maxConnections: 1 }, { timers, pool: standIn as unknown as Pick<Pool, 'dispatch' | 'destroy'> })
  const send = (method = 'GET', started = true): Sent => {
    const controller = new Controller()
    const got: Sent['got'] = []
    const sent = pool.request({ path: '/', method }, (data) => { got.push({ data }) })
    const handler = dispatched!
    const entry: Sent = {
      handler,
      controller,
      got,
      start: () => handler.onRequestStart!(controller, {}),
      answer: (headers = { 'content-type': 'text/plain', 'content-length': '5' }, status = 200) => handler.onResponseStart!(controller, status, headers, 'OK'),
      fail: (error) => handler.onResponseError!(controller, error),
      cancel: () => { sent.cancel() },
    }
    if (started) entry.start()
    return entry
  }
  return { timers, pool, send, destroyed: () => destroyed }
}

// An attacker's finding: a request whose client left before the answer held the upstream and a
// connection of the route's pool until the route's timeout.
describe('UpstreamPool: a request whose client has gone', () => {
  it('is aborted on its connection at once, keeps no deadline, and its caller is not called', () => {
    const { timers, send } = setUp()
    const request = send()
    request.cancel()
    expect(request.controller.reason).toBeInstanceOf(errors.RequestAbortedError)
    timers.advance(10 * TIMEOUT_MS)
    request.fail(request.controller.reason!)
    expect(request.got).toEqual([])
  })

  it('still waiting for a connection: aborted as soon as it gets one, never sent', () => {
    const { send } = setUp()
    const request = send('GET', false)
    request.cancel()
    expect(request.controller.aborted).toBe(false)
    request.start()
    expect(request.controller.reason).toBeInstanceOf(errors.RequestAbortedError)
    expect(request.got).toEqual([])
  })

  it('after its answer came (the reply closing as it ends): nothing happens to the answer', () => {
    const { send } = setUp()
    const request = send()
    request.answer()
    request.cancel()
    expect(request.controller.aborted).toBe(false)
    expect(request.got).toHaveLength(1)
  })

  it('an answer that comes after it is let go, and not handed on', () => {
    const { send } = setUp()
    const request = send()
    request.cancel()
    request.controller.aborted = false
    request.answer()
    expect(request.controller.aborted).toBe(true)
    expect(request.got).toEqual([])
  })
})

describe('UpstreamPool deadlines', () => {
  it('answers a request the upstream has not answered with a timeout failure at its deadline, and aborts it', () => {
    const { timers, send } = setUp()
    const request = send()
    // Timers fire on whole milliseconds: the deadline counts as come 1 ms before it, not sooner.
    timers.advance(TIMEOUT_MS - 1.5)
    expect(request.got).toEqual([])
    timers.advance(TIMEOUT_MS)
    expect(request.got).toHaveLength(1)
    const { data } = request.got[0]!
    expect(data.body).toBeInstanceOf(UpstreamFailure)
    const reason = (data.body as unknown as UpstreamFailure).reason
    expect(reason).toBeInstanceOf(errors.HeadersTimeoutError)
    expect(reason.message).toBe(`No answer within ${TIMEOUT_MS} ms`)
    expect(request.controller.reason).toBe(reason)
  })

  it('aborts a request whose deadline came while it waited for a connection as soon as it gets one', () => {
    const { timers, send } = setUp()
    const request = send('GET', false)
    timers.advance(TIMEOUT_MS)
    expect(request.got).toHaveLength(1)
    expect(request.controller.aborted).toBe(false)
    request.start()
    // It never reached a connection: the upstream never had it, and the reason says so (a tester's finding).
    expect(request.controller.reason).toBeInstanceOf(errors.ConnectTimeoutError)
    expect(request.controller.reason?.message).toMatch(/^No connection to the upstream within 1000 ms: its name did not resolve/)
  })

  it('answers a request at the timer set for its deadline, which fires up to 1 ms before it, not at the next one', () => {
    const { timers, send } = setUp(new ManualTimers({ wholeMs: true }))
    timers.advance(0.6)
    const request = send()
    // Set at 0.6 for 1000 ms, the timer fires at 1000, 0.6 ms before the deadline.
    expect(timers.live()).toEqual([TIMEOUT_MS])
    timers.advance(TIMEOUT_MS)
    expect(request.got).toHaveLength(1)
    expect(request.controller.aborted).toBe(true)
  })

  it('times each request from the moment it was handed to the pool, in the order they came', () => {
    const { timers, send } = setUp()
    const first = send()
    timers.advance(300)
    const second = send()
    timers.advance(TIMEOUT_MS)
    expect([first.got.length, second.got.length]).toEqual([1, 0])
    timers.advance(300 + TIMEOUT_MS)
    expect([first.got.length, second.got.length]).toEqual([1, 1])
    expect(timers.live()).toEqual([])
  })

  it('hands on an answer that came in time, once, and keeps no deadline for it', () => {
    const { timers, send } = setUp()
    const request = send()
    timers.advance(TIMEOUT_MS / 2)
    request.answer()
    timers.advance(10 * TIMEOUT_MS)
    expect(request.got).toHaveLength(1)
    expect(request.got[0]).toMatchObject({ data: { statusCode: 200, headers: { 'content-length': '5' } } })
    expect(request.controller.aborted).toBe(false)
  })

  it('turns an error from the upstream into a failure carrying it', () => {
    const { send } = setUp()
    const request = send()
    const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })
    request.fail(refused)
    expect(request.got).toHaveLength(1)
    expect((request.got[0]!.data.body as unknown as UpstreamFailure).reason).toBe(refused)
  })

  it('drops an answer that comes after the deadline: the request is aborted and the caller is not called again', () => {
    const { timers, send } = setUp()
    const request = send()
    timers.advance(TIMEOUT_MS)
    request.controller.aborted = false
    request.answer()
    expect(request.got).toHaveLength(1)
    expect(request.controller.aborted).toBe(true)
    request.fail(new errors.RequestAbortedError())
    expect(request.got).toHaveLength(1)
  })

  it('keeps no timer once destroyed, and destroys the undici pool', async () => {
    const { timers, pool, send, destroyed } = setUp()
    const request = send()
    await pool.destroy()
    expect(timers.live()).toEqual([])
    expect(destroyed()).toBe(true)
    timers.advance(10 * TIMEOUT_MS)
    expect(request.got).toEqual([])
  })
})

describe('the bodies the pool hands on', () => {
  const bodyOf = (request: Sent) => request.got[0]!.data.body

  it('gathers a small body of declared length whole, in the chunks it came in', () => {
    const { send } = setUp()
    const request = send()
    request.answer()
    const body = bodyOf(request)
    expect(body).toBeInstanceOf(WholeBody)
    request.handler.onResponseData!(request.controller, Buffer.from('hel'))
    const read: Array<[Error | null, string | undefined]> = []
    ;(body as WholeBody).read((error, whole) => read.push([error, whole?.toString()]))
    request.handler.onResponseData!(request.controller, Buffer.from('lo'))
    expect(read).toEqual([])
    request.handler.onResponseEnd!(request.controller, {})
    expect(read).toEqual([[null, 'hello']])
  })

  it('fails the whole read with the error that ended it, and aborts the request when destroyed', () => {
    const { send } = setUp()
    const request = send()
    request.answer()
    const body = bodyOf(request) as WholeBody
    const timeout = new errors.BodyTimeoutError('late')
    body.destroy(timeout)
    expect(request.controller.reason).toBe(timeout)
    request.fail(timeout)
    const read: Array<Error | null> = []
    body.read((error) => read.push(error))
    expect(read).toEqual([timeout])
  })

  it.each([
    ['no declared length', 'GET', 200, { 'content-type': 'text/plain' }],
    ['more than 64 KiB', 'GET', 200, { 'content-type': 'text/plain', 'content-length': String(64 * 1024 + 1) }],
    ['no declared type', 'GET', 200, { 'content-length': '5' }],
    ['an answer to HEAD', 'HEAD', 200, { 'content-type': 'text/plain', 'content-length': '5' }],
    ['204', 'GET', 204, { 'content-type': 'text/plain', 'content-length': '0' }],
    ['304', 'GET', 304, { 'content-type': 'text/plain', 'content-length': '5' }],
  ])('streams a body with %s', (_what, method, status, headers) => {
    const { send } = setUp()
    const request = send(method)
    request.answer(headers, status)
    expect(bodyOf(request)).toBeInstanceOf(StreamedBody)
  })

  it('pauses the upstream while the reader has no room, resumes it when read, and aborts it when the reader goes', () => {
    const { send } = setUp()
    const request = send()
    request.answer({ 'content-type': 'text/plain' })
    const body = bodyOf(request) as StreamedBody
    request.handler.onResponseData!(request.controller, Buffer.alloc(64 * 1024))
    expect(request.controller.paused).toBe(true)
    body.read()
    expect(request.controller.paused).toBe(false)
    body.destroy()
    expect(request.controller.reason).toBeInstanceOf(errors.RequestAbortedError)
  })

  it('ends the stream with the upstream\'s end, and does not abort a request that has ended', () => {
    const { send } = setUp()
    const request = send()
    request.answer({ 'content-type': 'text/plain' })
    const body = bodyOf(request) as StreamedBody
    request.handler.onResponseData!(request.controller, Buffer.from('hi'))
    request.handler.onResponseEnd!(request.controller, {})
    expect(body.read()?.toString()).toBe('hi')
    body.destroy()
    expect(request.controller.aborted).toBe(false)
  })
})
