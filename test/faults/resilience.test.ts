// The session store going away and coming back: requests that need it fail with 503
// session_store_unavailable within the store's connect timeout (never hang, never crash), /readyz
// says 503, /healthz and public routes keep working; once Redis is back the gateway reconnects by
// itself and signed-in requests succeed again within a reconnection. The test owns its redis-server, so it can stop and restart it.
// Time: the session cache is off (its own tests cover it) and the outage lines' hysteresis is 100 ms
// (tested with fake timers in test/store/outage-log.test.ts), so nothing here waits a second for them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MAX_RECONNECT_DELAY_MS } from '../../src/store/redis-connection.js'
import { ONE_ANSWER_MS } from '../helpers/bounds.js'
import { Browser } from '../helpers/browser.js'
import { metricValue } from '../helpers/metrics.js'
import { startGatewayWithProvider, type TestGateway } from '../helpers/gateway.js'
import { waitFor } from '../helpers/net.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

describe('session store outage', () => {
  let redis: TestRedis
  let stack: Awaited<ReturnType<typeof startGatewayWithProvider>>
  let upstream: Upstream
  let gateway: TestGateway
  const json = { accept: 'application/json' }

  beforeAll(async () => {
    redis = await startRedis('spawn', { persistent: true })
    upstream = await startUpstream()
    stack = await startGatewayWithProvider({
      store: { type: 'redis', url: redis.url },
      session: { cacheTtl: '0s' },
      routes: [
        { path: '/app/', upstream: upstream.url, provider: 'demo' },
        { path: '/public/', upstream: upstream.url, auth: 'none' },
      ],
    }, { deps: { storeHysteresis: { downAfterMs: 100, upAfterMs: 100 } } })
    gateway = stack.gateway
  })

  /** store.timeout (the default): one command; connecting may take twice as long (src/store/redis.ts). */
  const storeTimeoutMs = () => gateway.config.store.timeoutMs
  /**
   * With Redis down a request fails at once (no offline queue): it never waits for a connection,
   * which the connect timeout, twice store.timeout, bounds.
   */
  const failedWithinMs = () => 2 * storeTimeoutMs()
  /** Redis back: the next reconnection attempt, its connect (2 x store.timeout) and ready check, and one answer. */
  const reconnectedWithinMs = () => MAX_RECONNECT_DELAY_MS + 3 * storeTimeoutMs() + ONE_ANSWER_MS

  /**
   * Log lines whose message starts with `msg`: the outage lines themselves, not a line that quotes
   * them (the failed /readyz request's debug line says the "session store unreachable" line names why).
   */
  const logged = (msg: string) => gateway.logs.map((line) => JSON.parse(line) as { msg: string }).filter((line) => line.msg.startsWith(msg))
  /** A failed count's message: every line about the store, whole (which outage, which cause, in what order). */
  const storeLines = () => gateway.logs.filter((line) => line.includes('"store"')).join('\n')

  afterAll(async () => {
    await stack?.close()
    await upstream?.close()
    await redis?.release()
  })

  it('fails fast with 503 while Redis is down, keeps serving, and recovers by itself when it is back', async () => {
    const browser = new Browser()
    expect((await browser.navigate(`${gateway.url}/app/`)).status).toBe(200)
    expect((await fetch(`${gateway.url}/readyz`)).status).toBe(200)

    const before = metricValue(await (await fetch(`${gateway.url}/metrics`)).text(), 'gateway_store_unavailable_requests_total')!
    await redis.stop()
    const attempts = [
      ...Array.from({ length: 10 }, () => ['/app/x', 'application/json']),
      ['/app/x', 'text/html'],
    ] as const
    const results = await Promise.all(attempts.map(async ([path, accept]) => {
      const started = Date.now()
      const response = await browser.fetch(`${gateway.url}${path}`, { headers: { accept } })
      return { ms: Date.now() - started, status: response.status, body: await response.text() }
    }))
    for (const result of results) {
      expect(result.status).toBe(503)
      expect(result.ms).toBeLessThan(failedWithinMs())
      expect(result.body).toContain('session_store_unavailable')
      expect(result.body).not.toMatch(/ECONNREFUSED|Connection is closed|Stream isn't writeable/)
    }
    // Starting a sign-in needs no store (the flow lives in the state and the flow cookie), nor does its rate limit.
    expect((await browser.fetch(`${gateway.url}/oauth/login/demo/`, { headers: json })).status).toBe(302)
    const ready = await fetch(`${gateway.url}/readyz`)
    expect(ready.status).toBe(503)
    expect(await ready.json()).toMatchObject({ error: 'session_store_unavailable' })
    expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200)
    expect((await fetch(`${gateway.url}/public/x`)).status).toBe(200)
    await waitFor(async () => logged('session store unreachable').length > 0, 3000, 'the "unreachable" line')
    expect(logged('session store unreachable'), storeLines()).toHaveLength(1)
    // The requests answered 503 for the store, each once (not the readiness probe's), and apart from
    // them the store commands that failed (a request may fail several, or none).
    const metrics = await (await fetch(`${gateway.url}/metrics`)).text()
    expect(metricValue(metrics, 'gateway_store_unavailable_requests_total')).toBe(before + attempts.length)
    expect(metricValue(metrics, 'gateway_store_errors_total')).toBeGreaterThan(0)

    await redis.restart!()
    const restarted = Date.now()
    let status = 0
    while (Date.now() - restarted < reconnectedWithinMs()) {
      status = (await browser.fetch(`${gateway.url}/app/x`, { headers: json })).status
      if (status === 200) break
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    expect(status).toBe(200)
    expect((await fetch(`${gateway.url}/readyz`)).status).toBe(200)
    // Logged once the store has answered steadily for a moment (hysteresis: src/store/outage-log.ts).
    await waitFor(async () => logged('session store reachable again').length > 0, 3000, 'the "reachable again" line')
    // One outage, one pair of lines, from its start to its end.
    expect(logged('session store unreachable'), storeLines()).toHaveLength(1)
    expect(logged('session store reachable again'), storeLines()).toHaveLength(1)
  })
})
