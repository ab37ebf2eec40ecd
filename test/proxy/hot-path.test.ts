// The pieces the proxied request's hot path is made of, tested on their own: reading the session
// cookie straight from the Cookie header, the in-process session cache, the batched log
// destination in front of sonic-boom, and the per-route metric tallies that prom-client reads at
// scrape time.
import { pbkdf2 } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { mkdtemp, readFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pino from 'pino'
import fc from 'fast-check'
import type { IncomingHttpHeaders } from 'node:http'
import { describe, expect, it, vi } from 'vitest'
import { ClientHeaderFilter } from '../../src/proxy/headers.js'
import { BatchedDestination, bytesTo } from '../../src/ops/log-destination.js'
import { Metrics } from '../../src/ops/metrics.js'
import { Sealer } from '../../src/session/seal.js'
import { cookieValue } from '../../src/session/cookie.js'
import { Sessions } from '../../src/session/session.js'
import { MemoryStore } from '../../src/store/memory.js'
import { growth } from '../helpers/cost.js'
import { metricValue } from '../helpers/metrics.js'
import { waitFor } from '../helpers/net.js'

describe('cookieValue', () => {
  it('finds the named cookie wherever it is in the header', () => {
    expect(cookieValue('gw_session=abc', 'gw_session')).toBe('abc')
    expect(cookieValue('theme=dark; gw_session=abc; lang=en', 'gw_session')).toBe('abc')
    expect(cookieValue('theme=dark;gw_session=abc', 'gw_session')).toBe('abc')
    expect(cookieValue('  gw_session = abc ; x=1', 'gw_session')).toBe('abc')
  })

  // An outside tester's finding: under a shared cookieDomain a sibling host planted one with a
  // longer Path, which browsers send first, and the person's requests there went on as the planter.
  it('takes neither of two cookies with the name and different values (which is the person\'s cannot be told); one value twice is that value', () => {
    expect(cookieValue('gw_session=planted; gw_session=mine', 'gw_session')).toBeUndefined()
    expect(cookieValue('gw_session=mine; theme=dark; gw_session=planted', 'gw_session')).toBeUndefined()
    expect(cookieValue('gw_session=same; gw_session=same', 'gw_session')).toBe('same')
    expect(cookieValue('gw_session=same;gw_session= same ', 'gw_session')).toBe('same')
  })

  it('does not mistake a cookie whose name merely contains the name', () => {
    expect(cookieValue('xgw_session=evil; gw_session_flow=flow', 'gw_session')).toBeUndefined()
    expect(cookieValue('gw_session_flow=flow; gw_session=abc', 'gw_session')).toBe('abc')
    expect(cookieValue('other=gw_session=abc', 'gw_session')).toBeUndefined()
  })

  it('answers undefined for no header, no such cookie, or a name without a value', () => {
    expect(cookieValue(undefined, 'gw_session')).toBeUndefined()
    expect(cookieValue('', 'gw_session')).toBeUndefined()
    expect(cookieValue('gw_session', 'gw_session')).toBeUndefined()
    expect(cookieValue('a=1; b=2', 'gw_session')).toBeUndefined()
  })

  it('reads as a split at every `;` does, on generated headers (pieces with and without `=`, the name among them)', () => {
    const reference = (header: string, name: string): string | undefined => {
      const values = header.split(';').filter((piece) => piece.includes('=') && piece.slice(0, piece.indexOf('=')).trim() === name).map((piece) => piece.slice(piece.indexOf('=') + 1).trim())
      return values.every((value) => value === values[0]) ? values[0] : undefined
    }
    const piece = fc.oneof(fc.constantFrom('gw_session=a', 'gw_session=b', ' gw_session = a ', 'gw_session', 'a', '=', 'x=gw_session=a', ''), fc.string({ maxLength: 6 }))
    fc.assert(fc.property(fc.array(piece, { maxLength: 12 }), (pieces) => {
      const header = pieces.join(';')
      expect(cookieValue(header, 'gw_session')).toBe(reference(header, 'gw_session'))
    }))
  })

  // An outside tester's finding: each piece without `=` scanned the rest of the header for one.
  it('costs in proportion to the header, whatever its pieces', () => {
    const pieces = (n: number) => `${'a;'.repeat(n)}x=1`
    expect(growth((header) => cookieValue(header, 'gw_session'), pieces(2000), pieces(8000))).toBeLessThan(8)
  })
})

describe('the client headers a route passes on', () => {
  // An outside tester's finding: every header name was looked for in the Connection header's list,
  // both counts the client's (1,500 of each cost 7 ms of CPU a request on any route, public ones too).
  it('costs in proportion to the header block, however many names Connection lists', () => {
    const filter = new ClientHeaderFilter([], false)
    const block = (n: number): IncomingHttpHeaders => {
      const headers: IncomingHttpHeaders = { host: 'gw', connection: Array.from({ length: n }, (_, i) => `c${i.toString(36)}`).join(',') }
      for (let i = 0; i < n; i++) headers[`h${i.toString(36)}`] = ''
      return headers
    }
    const blocks = new Map([[250, block(250)], [1000, block(1000)]])
    // growth measures functions of a string: its length picks the block.
    expect(growth((size) => filter.copy(blocks.get(size.length)!), 'x'.repeat(250), 'x'.repeat(1000))).toBeLessThan(8)
  })

  it('drops what Connection lists, in a short list and a long one', () => {
    const filter = new ClientHeaderFilter([], false)
    for (const count of [1, 20]) {
      const listed = Array.from({ length: count }, (_, i) => `x-hop-${i}`)
      const headers: IncomingHttpHeaders = { host: 'gw', connection: listed.map((name) => name.toUpperCase()).join(' , '), 'x-kept': '1' }
      for (const name of listed) headers[name] = 'v'
      const passed = Object.keys(filter.copy(headers))
      expect(passed, String(count)).toContain('x-kept')
      expect(passed.filter((name) => name.startsWith('x-hop-')), String(count)).toEqual([])
    }
  })
})

/** A store whose reads take their value at once but answer only when released (see holdReads); it counts them. */
class HeldReads extends MemoryStore {
  private hold: Promise<void> | undefined
  reads = 0

  /** Holds every read from now on; the returned function lets them answer. */
  holdReads (): () => void {
    let answer!: () => void
    this.hold = new Promise((resolve) => { answer = resolve })
    return answer
  }

  override async getAndTouchBytes (key: string, ttlMs: number): Promise<Buffer | null> {
    this.reads++
    const value = await super.getAndTouchBytes(key, ttlMs)
    await this.hold
    return value
  }
}

describe('the session cache', () => {
  const secret = 's'.repeat(32)

  /** Another instance on the same store, for each instance under test: sessions start there, so this one's cache is empty. */
  const elsewhere = new Map<Sessions, Sessions>()

  async function started (): Promise<{ store: HeldReads, sessions: Sessions }> {
    const store = new HeldReads()
    const config = { cookieName: 'gw_session', secret, ttlMs: 60_000, cookieSecure: false, cacheTtlMs: 1000, maxAgeMs: 7 * 86_400_000, previousSecrets: [] }
    const sessions = new Sessions(store, new Sealer(secret), config)
    await sessions.listen()
    elsewhere.set(sessions, new Sessions(store, new Sealer(secret), config))
    return { store, sessions }
  }

  /** Each signed-in Cookie header's session id: a sign-out ends the session it loaded, by its id. */
  const ids = new Map<string, string>()
  const signOut = async (sessions: Sessions, cookieHeader: string) => await sessions.endById(ids.get(cookieHeader)!)

  /** A new session's Cookie header, as the browser sends it back. */
  async function signedIn (sessions: Sessions): Promise<string> {
    const { id, cookie } = await elsewhere.get(sessions)!.start(undefined, { createdAt: Date.now(), tokens: {} })
    ids.set(`gw_session=${cookie}`, id)
    return `gw_session=${cookie}`
  }

  it('keeps a session it read, but not one whose read was under way when it was signed out', async () => {
    const { store, sessions } = await started()

    const undisturbed = await signedIn(sessions)
    expect(await sessions.load(undisturbed)).not.toBeNull()
    expect(sessions.cached(undisturbed)).toBeDefined()

    // The read takes the record before the sign-out deletes it, and answers after the sign-out.
    const racing = await signedIn(sessions)
    const answer = store.holdReads()
    const loading = sessions.load(racing)
    await signOut(sessions, racing)
    answer()
    expect(await loading).not.toBeNull()
    expect(sessions.cached(racing)).toBeUndefined()
    expect(await sessions.load(racing)).toBeNull()
    await store.close()
  })

  it('reads a session once for concurrent requests, but not for one that came after a sign-out', async () => {
    const { store, sessions } = await started()

    const busy = await signedIn(sessions)
    const answerAll = store.holdReads()
    const loads = Array.from({ length: 5 }, async () => await sessions.load(busy))
    answerAll()
    const loaded = await Promise.all(loads)
    expect(store.reads).toBe(1)
    expect(loaded.every((session) => session !== null && session === loaded[0])).toBe(true)

    // A request that arrives after the sign-out must not share the read that began before it.
    const racing = await signedIn(sessions)
    store.reads = 0
    const answer = store.holdReads()
    const before = sessions.load(racing)
    await signOut(sessions, racing)
    const after = sessions.load(racing)
    answer()
    expect(await before).not.toBeNull()
    expect(await after).toBeNull()
    expect(store.reads).toBe(2)
    await store.close()
  })
})

describe('BatchedDestination', () => {
  it('hands the lines of one window to its target in one write, in order', async () => {
    // The window's timer runs on a fake clock: a busy machine's pause cannot close it early.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
    try {
      const writes: string[] = []
      const destination = new BatchedDestination({ write: (chunk) => writes.push(chunk.toString()), flushSync: () => {}, writeSync: (chunk) => writes.push(chunk.toString()) }, 30)
      destination.write('one\n')
      destination.write('two\n')
      await new Promise((resolve) => setImmediate(resolve))
      vi.advanceTimersByTime(29)
      destination.write('three\n') // a later turn of the event loop, the same window
      expect(writes).toEqual([])
      vi.advanceTimersByTime(1)
      expect(writes).toEqual(['one\ntwo\nthree\n'])
      destination.write('four\n')
      vi.advanceTimersByTime(29)
      expect(writes).toHaveLength(1)
      vi.advanceTimersByTime(1)
      expect(writes).toEqual(['one\ntwo\nthree\n', 'four\n'])
    } finally {
      vi.useRealTimers()
    }
  })

  it('writes a full batch at once, without waiting for the window, and a line longer than a batch on its own', () => {
    const writes: string[] = []
    // A line is taken while three bytes for each of its UTF-16 units fit in the batch's 12: 'c\n'
    // (2 + 3 + 2 bytes written, 6 asked for) starts the next batch.
    const destination = new BatchedDestination({ write: (chunk) => writes.push(chunk.toString()), flushSync: () => {}, writeSync: (chunk) => writes.push(chunk.toString()) }, 60_000, 12)
    for (const line of ['a\n', 'é\n', 'b\n', 'c\n']) destination.write(line)
    expect(writes).toEqual(['a\né\nb\n'])
    destination.write('a line of 16 B\n\n')
    expect(writes).toEqual(['a\né\nb\n', 'c\n', 'a line of 16 B\n\n'])
    destination.flushSync()
    expect(writes).toHaveLength(3)
  })

  it('keeps what is pending as bytes, not as the lines pino handed it (they die young: see the file)', () => {
    const writes: Buffer[] = []
    const destination = new BatchedDestination({ write: (chunk) => writes.push(chunk), flushSync: () => {}, writeSync: (chunk) => writes.push(chunk) }, 60_000)
    destination.write('{"msg":"ünïcödé ✓ 𝄞"}\n')
    destination.write('{"msg":"two"}\n')
    destination.flushSync()
    expect(writes).toHaveLength(1)
    expect(Buffer.isBuffer(writes[0])).toBe(true)
    expect(writes[0]!.toString('utf8')).toBe('{"msg":"ünïcödé ✓ 𝄞"}\n{"msg":"two"}\n')
    // The batch is reused: what was handed on is a copy, which the next lines do not overwrite.
    destination.write('{"msg":"three"}\n')
    destination.flush()
    expect(writes.map((chunk) => chunk.toString('utf8'))).toEqual(['{"msg":"ünïcödé ✓ 𝄞"}\n{"msg":"two"}\n', '{"msg":"three"}\n'])
  })

  it('loses nothing on flushSync: every line reaches the file through a real pino destination', async () => {
    const { file, destination, log } = await fileLog()
    for (let i = 0; i < 1000; i++) log.info({ i }, 'line')
    destination.flush() // the first batch: sonic-boom writes it asynchronously
    for (let i = 1000; i < 1500; i++) log.info({ i }, 'line') // the second is still pending here
    destination.flushSync()
    // sonic-boom's flushSync does not wait for a write already under way, so that one may land after.
    const read = async () => (await readFile(file, 'utf8')).trim().split('\n').map((line) => (JSON.parse(line) as { i: number }).i)
    await waitFor(async () => (await read()).length === 1500, 5000, 'all 1500 lines in the file')
    const lines = await read()
    expect([...lines].sort((a, b) => a - b)).toEqual([...Array(1500).keys()])
    expect(lines.filter((i) => i >= 1000)).toEqual([...Array(500).keys()].map((i) => i + 1000))
  })
})

/** A pino logger writing through a BatchedDestination to a real file (a sonic-boom destination), once that file is open. */
async function fileLog () {
  const file = join(await mkdtemp(join(tmpdir(), 'gw-log-')), 'out.log')
  const target = bytesTo(file)
  await new Promise<void>((resolve) => target.once('ready', resolve))
  const destination = new BatchedDestination(target)
  return { file, destination, log: pino({ base: undefined, timestamp: false }, destination) }
}

describe('BatchedDestination at exit', () => {
  it('has written what was pending when flushSync returns, with the thread pool busy (a process exits right after)', async () => {
    const { file, destination, log } = await fileLog()
    log.info('shutting down')
    log.info('shut down')
    // Every thread of libuv's pool busy, as on a loaded machine: an asynchronous write would wait.
    const busy = Array.from({ length: Number(process.env.UV_THREADPOOL_SIZE ?? 4) }, async () => await new Promise((resolve) => pbkdf2('x', 'y', 200_000, 32, 'sha256', resolve)))
    destination.flushSync()
    expect(readFileSync(file, 'utf8').split('\n').filter(Boolean).map((line) => (JSON.parse(line) as { msg: string }).msg)).toEqual(['shutting down', 'shut down'])
    await Promise.all(busy)
  })
})

describe('RouteMetrics', () => {
  it('tallies status classes and upstream latency, and /metrics shows them in the Prometheus format', async () => {
    const metrics = new Metrics()
    const app = metrics.forRoute('/app/')
    const api = metrics.forRoute('/api/')
    const now = 10_000 // the clock is passed in: no test timing can move a value across a bucket bound
    app.record(200, now - 3, now) // 3 ms upstream: the 0.005 bucket
    app.record(204, now - 2000, now) // 2 s: the 2.5 bucket
    app.record(302, undefined, now) // answered by the gate: counted, no upstream time
    app.record(401, undefined, now)
    api.record(502, now - 40, now)
    const text = await metrics.registry.metrics()
    const value = (series: string) => metricValue(text, series)
    expect(value('gateway_proxied_requests_total{route="/app/",status_class="2xx"}')).toBe(2)
    expect(value('gateway_proxied_requests_total{route="/app/",status_class="3xx"}')).toBe(1)
    expect(value('gateway_proxied_requests_total{route="/app/",status_class="4xx"}')).toBe(1)
    expect(value('gateway_proxied_requests_total{route="/app/",status_class="5xx"}')).toBeUndefined()
    expect(value('gateway_proxied_requests_total{route="/api/",status_class="5xx"}')).toBe(1)
    expect(value('gateway_upstream_duration_seconds_bucket{route="/app/",le="0.0025"}')).toBe(0)
    expect(value('gateway_upstream_duration_seconds_bucket{route="/app/",le="0.005"}')).toBe(1)
    expect(value('gateway_upstream_duration_seconds_bucket{route="/app/",le="1"}')).toBe(1)
    expect(value('gateway_upstream_duration_seconds_bucket{route="/app/",le="2.5"}')).toBe(2)
    expect(value('gateway_upstream_duration_seconds_bucket{route="/app/",le="+Inf"}')).toBe(2)
    expect(value('gateway_upstream_duration_seconds_count{route="/app/"}')).toBe(2)
    expect(value('gateway_upstream_duration_seconds_sum{route="/app/"}')).toBeCloseTo(2.003, 9)
    expect(value('gateway_upstream_duration_seconds_bucket{route="/api/",le="0.05"}')).toBe(1)
    expect(text).toContain('# TYPE gateway_upstream_duration_seconds histogram')
    // A second scrape counts what happened since, on top (counters never reset).
    app.record(200, undefined)
    expect((await metrics.registry.metrics())).toContain('gateway_proxied_requests_total{route="/app/",status_class="2xx"} 3')
    // The JSON form (what a cluster aggregator reads) has the same series.
    const json = (await metrics.registry.getMetricsAsJSON()).find((metric) => metric.name === 'gateway_upstream_duration_seconds')!
    expect(json.values.filter((v) => v.labels.route === '/app/')).toHaveLength(17)
  })
})
