// The outage log's hysteresis, with time injected (fake timers): failures mixed with answers (a
// flapping connection, a partial cluster outage) are no outage, told at most once a minute; failures that persist log one
// "unreachable" line, and only steady answers log the one "reachable again" line.
import type { FastifyBaseLogger } from 'fastify'
import pino from 'pino'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { causeOf, OutageLog } from '../../src/store/outage-log.js'
import { logCollector } from '../helpers/gateway.js'

let lines: string[]
let outage: OutageLog

beforeEach(() => {
  vi.useFakeTimers()
  const collector = logCollector()
  lines = collector.lines
  const log = pino({ level: 'debug' }, collector.stream) as unknown as FastifyBaseLogger
  outage = new OutageLog(log, { node: '127.0.0.1:7001' }, { downAfterMs: 1000, upAfterMs: 1000 })
})
afterEach(() => {
  outage.close()
  vi.useRealTimers()
})

const messages = () => lines.map((line) => (JSON.parse(line) as { msg: string }).msg)
/** The line about failures shorter than an outage. */
const BRIEF = 'session store node failed for less than 1000 ms; requests that needed it then got 503 session_store_unavailable (said at most once a minute: times counts since the last such line)'

/** Calls `event` every 50 ms for `ms`. */
function every50 (ms: number, event: (i: number) => void): void {
  for (let i = 0; i < ms / 50; i++) {
    event(i)
    vi.advanceTimersByTime(50)
  }
}

describe('OutageLog', () => {
  it('logs failures mixed with answers as no outage, and at most one line a minute about them, however long they go on', () => {
    every50(120_000, (i) => i % 3 === 0 ? outage.succeeded() : outage.failed('Connection is closed.'))
    expect(messages()).toEqual([BRIEF, BRIEF])
    // The second line counts the runs of failures since the first: 800 in a minute of this.
    expect(lines.map((line) => (JSON.parse(line) as { times: number }).times)).toEqual([1, 400])
    expect(outage.isDown).toBe(false)
  })

  it('logs a blip shorter than downAfterMs as no outage, once, with its cause (a 503 it caused has its reason in the log)', () => {
    every50(900, () => outage.failed('Command timed out'))
    outage.succeeded()
    vi.advanceTimersByTime(5000)
    expect(messages()).toEqual([BRIEF])
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: 40, node: '127.0.0.1:7001', reason: 'Command timed out', times: 1 })
  })

  it('logs one line when failures persist and one when answers have been steady, not on a single answer', () => {
    every50(5000, () => outage.failed('connect ECONNREFUSED'))
    expect(messages()).toHaveLength(1)
    expect(messages()[0]).toMatch(/^session store node unreachable/)
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: 40, node: '127.0.0.1:7001', reason: 'connect ECONNREFUSED' })

    // Coming back unsteadily (an answer, then failures again) is still the same outage.
    every50(5000, (i) => i % 4 === 0 ? outage.succeeded() : outage.failed('connect ECONNREFUSED'))
    expect(messages()).toHaveLength(1)

    every50(2000, () => outage.succeeded())
    expect(messages()).toEqual([expect.stringMatching(/^session store node unreachable/), 'session store node reachable again'])
    expect(JSON.parse(lines[1]!)).toMatchObject({ level: 30, node: '127.0.0.1:7001', failedWhileDown: expect.any(Number) })
    expect(outage.isDown).toBe(false)
  })

  it('names the last real cause at the start and at the end, not the failures that only follow from it', () => {
    every50(2000, (i) => i % 2 === 0 ? outage.failed('connect ECONNREFUSED 127.0.0.1:7001') : outage.failed())
    every50(1000, () => outage.succeeded())
    expect(lines.map((line) => JSON.parse(line) as { reason?: string, lastReason?: string })).toEqual([
      expect.objectContaining({ reason: 'connect ECONNREFUSED 127.0.0.1:7001' }),
      expect.objectContaining({ reason: 'connect ECONNREFUSED 127.0.0.1:7001' }),
    ])
    expect(JSON.parse(lines[1]!)).not.toHaveProperty('lastReason')
  })

  it('says "connection closed" only when nothing said why, and names a cause that changed during the outage', () => {
    every50(2000, () => outage.connectionClosed())
    every50(1000, () => outage.failed('NOAUTH Authentication required.'))
    every50(1000, () => outage.succeeded())
    expect(lines.map((line) => JSON.parse(line) as { reason?: string, lastReason?: string })).toEqual([
      expect.objectContaining({ reason: 'connection closed' }),
      expect.objectContaining({ reason: 'connection closed', lastReason: 'NOAUTH Authentication required.' }),
    ])
  })

  describe('waiting for the cause (causeWaitMs: the connection attempt that says why)', () => {
    beforeEach(() => {
      outage.close()
      const collector = logCollector()
      lines = collector.lines
      outage = new OutageLog(pino({ level: 'debug' }, collector.stream) as unknown as FastifyBaseLogger, { node: '127.0.0.1:7001' }, { downAfterMs: 1000, upAfterMs: 1000, causeWaitMs: 1000 })
    })

    it('names the cause that comes after downAfterMs, at once, and counts the outage from its first failure', () => {
      every50(1500, () => outage.failed())
      expect(messages()).toEqual([])
      outage.failed('self-signed certificate')
      expect(lines.map((line) => JSON.parse(line) as { reason?: string })).toEqual([expect.objectContaining({ reason: 'self-signed certificate' })])
      every50(1000, () => outage.succeeded())
      expect(JSON.parse(lines[1]!)).toMatchObject({ reason: 'self-signed certificate', downForMs: 2500 })
    })

    it('says "connection closed" when nothing said why within the wait', () => {
      every50(1950, () => outage.connectionClosed())
      expect(messages()).toEqual([])
      every50(100, () => outage.failed())
      expect(lines.map((line) => JSON.parse(line) as { reason?: string })).toEqual([expect.objectContaining({ reason: 'connection closed' })])
    })

    it('logs an outage that ends during the wait, with no cause, as one line each way', () => {
      outage.succeeded()
      every50(1200, () => outage.failed())
      every50(1500, () => outage.succeeded())
      expect(lines.map((line) => JSON.parse(line) as { msg: string, reason?: string })).toEqual([
        expect.objectContaining({ msg: expect.stringMatching(/^session store node unreachable/) as string, reason: 'connection closed' }),
        expect.objectContaining({ msg: 'session store node reachable again', reason: 'connection closed' }),
      ])
    })

    it('says "no connection yet", not "connection closed", for a first connection slow to open (nothing had closed)', () => {
      // Requests that came before the store's first connection opened (the gateway serves after
      // waiting 2 s for it) fail with no cause; the connection then opens with no error.
      every50(1200, () => outage.failed())
      outage.succeeded()
      every50(1500, () => outage.succeeded())
      expect(lines.map((line) => JSON.parse(line) as { reason?: string })).toEqual([
        expect.objectContaining({ reason: 'no connection yet' }),
        expect.objectContaining({ reason: 'no connection yet' }),
      ])
      // Once a connection has been open, the same failures follow its closing.
      every50(2500, () => outage.failed())
      expect(JSON.parse(lines[2]!)).toMatchObject({ reason: 'connection closed' })
    })

    it('does not wait when the cause is known by downAfterMs', () => {
      outage.failed('connect ECONNREFUSED 127.0.0.1:7001')
      every50(1050, () => outage.failed())
      expect(lines.map((line) => JSON.parse(line) as { reason?: string })).toEqual([expect.objectContaining({ reason: 'connect ECONNREFUSED 127.0.0.1:7001' })])
    })

    it('logs nothing once closed during the wait', () => {
      every50(1200, () => outage.failed())
      outage.close()
      outage.failed('too late')
      vi.advanceTimersByTime(5000)
      expect(messages()).toEqual([])
    })
  })

  it('logs nothing after close', () => {
    outage.close()
    every50(5000, () => outage.failed('Connection is closed.'))
    expect(messages()).toEqual([])
  })
})

describe('the cause an outage line names', () => {
  /** The error a real connect gives when every address of a name refuses (a closed port on both). */
  async function refusedOnBothFamilies (): Promise<unknown> {
    const { connect } = await import('node:net')
    return await new Promise((resolve) => {
      const socket = connect({
        host: 'redis.test',
        port: 1,
        autoSelectFamily: true,
        // `localhost` as many hosts resolve it: 127.0.0.1 and ::1.
        lookup: (_host, _options, callback) => {
          (callback as (error: null, addresses: Array<{ address: string, family: number }>) => void)(null, [{ address: '127.0.0.1', family: 4 }, { address: '::1', family: 6 }])
        },
      })
      socket.on('error', resolve)
    })
  }

  it('names every address that refused when Node reports them as one AggregateError with no message', async () => {
    vi.useRealTimers()
    const error = await refusedOnBothFamilies()
    expect(error).toBeInstanceOf(AggregateError)
    expect((error as Error).message).toBe('')
    expect(causeOf(error)).toBe('connect ECONNREFUSED 127.0.0.1:1; connect ECONNREFUSED ::1:1')
  })

  it('is the message of any other error, its code or name when the message is empty, and the text of a non-error', () => {
    expect(causeOf(new Error('WRONGPASS invalid username-password pair or user is disabled.'))).toBe('WRONGPASS invalid username-password pair or user is disabled.')
    expect(causeOf(Object.assign(new Error(''), { code: 'ETIMEDOUT' }))).toBe('ETIMEDOUT')
    expect(causeOf(new TypeError(''))).toBe('TypeError')
    expect(causeOf('refused')).toBe('refused')
  })
})
