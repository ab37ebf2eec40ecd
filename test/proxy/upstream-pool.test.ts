// The upstream pool's deadline per request (src/proxy/upstream-pool.ts) without a socket: the undici
// Pool is a stand-in that keeps each request until the test answers it, and the clock and timer
// are moved by the test.
import type { Dispatcher, Pool } from 'undici'
import { errors } from 'undici'
import { describe, expect, it } from 'vitest'
import { UpstreamFailure, UpstreamPool } from '../../src/proxy/upstream-pool.js'
import { ManualTimers } from '../helpers/manual-timers.js'

const TIMEOUT_MS = 1000

type Data = Dispatcher.ResponseData<unknown>
type Callback = (error: Error | null, data: Data) => void

/** A request the stand-in pool was given, and what the pool's caller got back for it. */
interface Sent {
  options: Dispatcher.RequestOptions<unknown>
  /** The pool's own callback: the test calls it as undici would, with an answer or an error. */
  answer: Callback
  /** Every call the caller's callback got. */
  got: Array<{ error: Error | null, data: Data }>
  /** Whether the request's signal fired its abort listener (undici's way to cancel it). */
  aborted: boolean
}

function setUp (timers = new ManualTimers()) {
  const sent: Sent[] = []
  let destroyed = false
  const standIn = {
    request (options: Dispatcher.RequestOptions<unknown>, answer: Callback): void {
      const entry = sent.at(-1)!
      entry.options = options
      entry.answer = answer
      const signal = options.signal as unknown as { on: (event: 'abort', listener: () => void) => void }
      signal.on('abort', () => { entry.aborted = true })
    },
    async destroy (): Promise<void> { destroyed = true },
  }
  const pool = new UpstreamPool({ origin: 'http://upstream.invalid', timeoutMs: TIMEOUT_MS, maxConnections: 1 }, { timers, pool: standIn as unknown as Pick<Pool, 'request' | 'destroy'> })
  const send = (): Sent => {
    const entry: Sent = { options: {} as Dispatcher.RequestOptions<unknown>, answer: () => {}, got: [], aborted: false }
    sent.push(entry)
    pool.request({ path: '/', method: 'GET' } as Dispatcher.RequestOptions<never>, (error, data) => { entry.got.push({ error, data }) })
    return entry
  }
  return { timers, pool, send, destroyed: () => destroyed }
}

/** A response as undici gives it, with a body that records being destroyed. */
function response (opaque: unknown) {
  const body = { destroyed: false, destroy () { this.destroyed = true } }
  return { body, data: { statusCode: 200, headers: {}, body, opaque, trailers: {}, context: {} } as unknown as Data }
}

describe('UpstreamPool deadlines', () => {
  it('answers a request the upstream has not answered with a timeout failure at its deadline, and aborts it', () => {
    const { timers, send } = setUp()
    const request = send()
    // Timers fire on whole milliseconds: the deadline counts as come 1 ms before it, not sooner.
    timers.advance(TIMEOUT_MS - 1.5)
    expect(request.got).toEqual([])
    timers.advance(TIMEOUT_MS)
    expect(request.got).toHaveLength(1)
    const { error, data } = request.got[0]!
    expect(error).toBeNull()
    expect(data.body).toBeInstanceOf(UpstreamFailure)
    const reason = (data.body as unknown as UpstreamFailure).reason
    expect(reason).toBeInstanceOf(errors.HeadersTimeoutError)
    expect(reason.message).toBe(`No answer within ${TIMEOUT_MS} ms`)
    expect(request.aborted).toBe(true)
  })

  it('answers a request at the timer set for its deadline, which fires up to 1 ms before it, not at the next one', () => {
    const { timers, send } = setUp(new ManualTimers({ wholeMs: true }))
    timers.advance(0.6)
    const request = send()
    // Set at 0.6 for 1000 ms, the timer fires at 1000, 0.6 ms before the deadline.
    expect(timers.live()).toEqual([TIMEOUT_MS])
    timers.advance(TIMEOUT_MS)
    expect(request.got).toHaveLength(1)
    expect(request.aborted).toBe(true)
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
    const { data } = response(request.options.opaque)
    request.answer(null, data)
    timers.advance(10 * TIMEOUT_MS)
    expect(request.got).toEqual([{ error: null, data }])
    expect(request.aborted).toBe(false)
  })

  it('turns an error from the upstream into a failure carrying it', () => {
    const { send } = setUp()
    const request = send()
    const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })
    request.answer(refused, { opaque: request.options.opaque } as Data)
    expect(request.got).toHaveLength(1)
    expect((request.got[0]!.data.body as unknown as UpstreamFailure).reason).toBe(refused)
  })

  it('drops an answer that comes after the deadline: its body is destroyed and the caller is not called again', () => {
    const { timers, send } = setUp()
    const request = send()
    timers.advance(TIMEOUT_MS)
    const late = response(request.options.opaque)
    request.answer(null, late.data)
    expect(request.got).toHaveLength(1)
    expect(late.body.destroyed).toBe(true)
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
