// Two tabs of one browser, the same person, signing in at once during a rolling secret rotation
// (session.previousSecrets): tab A begins at an instance on the old secret, tab B at one on the new.
// Each state is signed under its instance's secret; the second callback builds on the first's
// session only if both read the browser's flow binding alike. A tag keyed by the state's secret
// read them apart, and tab B got 400 invalid_state (an outside tester's finding on a169bf4).
import { afterAll, expect } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { reachCallback } from '../helpers/callback.js'
import { oidcClient, startGateway, TEST_SECRET, type TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'

const S1 = TEST_SECRET
const S2 = 'rotated-session-secret-9876543210-ZYXWVUTSRQponm'
let step1: TestGateway
let step2: TestGateway
it.beforeAll(async ({ startStack, op, upstream, redis }) => {
  const routes = [{ path: '/app/', upstream: upstream.url, provider: 'demo' }]
  step1 = await startStack({ session: { secret: S1, previousSecrets: [S2] }, routes })
  step2 = await startGateway({ server: { baseUrl: step1.url }, store: { type: 'redis', url: redis.url }, session: { secret: S2, previousSecrets: [S1] }, providers: { demo: oidcClient(op.issuer, 'c', 's') }, routes })
})
afterAll(async () => { await step2?.close() })
const direct = (g: TestGateway) => `http://127.0.0.1:${(g.app.server.address() as { port: number }).port}`

it('two tabs, the same person, during a rolling secret rotation: tab A begins at the old secret\'s instance, tab B at the new one\'s; both complete', async () => {
  const browser = new Browser()
  const a = await reachCallback(browser, `${step1.url}/oauth/login/demo/?next=/app/`, { login: 'rot-gil' })
  // Tab B's begin reaches the other instance (the same public address; the helper keeps cookies by name).
  const b = await reachCallback(browser, `${direct(step2)}/oauth/login/demo/?next=/app/`, { login: 'rot-gil', callbackOrigin: step1.url })
  const ra = await browser.fetch(a.href)
  const rb = await browser.fetch(b.href)
  expect(ra.status).toBe(302)
  expect(rb.status).toBe(302)
})
