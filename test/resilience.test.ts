// The session store going away: requests that need it fail with 503 session_store_unavailable
// within 1 s (never hang, never crash), /readyz says 503, /healthz and public routes keep working.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Browser } from './helpers/browser.js'
import { startGateway, type TestGateway } from './helpers/gateway.js'
import { startRedis, type TestRedis } from './helpers/redis.js'
import { startUpstream, type Upstream } from './helpers/upstream.js'

describe('session store unreachable', () => {
  let redis: TestRedis
  let upstream: Upstream
  let gateway: TestGateway

  beforeAll(async () => {
    redis = await startRedis(process.env.TEST_REDIS === 'url' ? 'spawn' : undefined)
    upstream = await startUpstream()
    gateway = await startGateway({
      store: { type: 'redis', url: redis.url },
      providers: { demo: { clientId: 'c', clientSecret: 's', authorizeUrl: 'http://127.0.0.1:1/auth', tokenUrl: 'http://127.0.0.1:1/token', scope: 'openid' } },
      routes: [
        { path: '/app/', upstream: upstream.url, provider: 'demo' },
        { path: '/public/', upstream: upstream.url, auth: 'none' },
      ],
    })
  })

  afterAll(async () => {
    await gateway?.close()
    await upstream?.close()
    await redis?.stop()
  })

  it('answers /readyz 200 while the store answers', async () => {
    expect((await fetch(`${gateway.url}/readyz`)).status).toBe(200)
  })

  it('fails fast with 503 while Redis is down, and the process keeps serving', async () => {
    // A session cookie, so the gate really has to ask the store.
    const browser = new Browser()
    browser.cookies.set('gw_session', { value: 'A'.repeat(43), path: '/' })
    await redis.stop()

    for (const [path, accept] of [['/app/x', 'application/json'], ['/app/x', 'text/html'], ['/oauth/login/demo/', 'application/json']] as const) {
      const started = Date.now()
      const response = await browser.fetch(`${gateway.url}${path}`, { headers: { accept } })
      expect(Date.now() - started).toBeLessThan(1000)
      expect(response.status).toBe(503)
      const body = await response.text()
      expect(body).toContain('session_store_unavailable')
      expect(body).not.toMatch(/ECONNREFUSED|Connection is closed|Stream isn't writeable/)
    }

    const ready = await fetch(`${gateway.url}/readyz`)
    expect(ready.status).toBe(503)
    expect(await ready.json()).toMatchObject({ error: 'session_store_unavailable' })
    expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200)
    expect((await fetch(`${gateway.url}/public/x`)).status).toBe(200)
    expect(gateway.logs.filter((line) => line.includes('session store unreachable'))).toHaveLength(1)
  })
})
