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
  // tab B's begin reaches the other instance (same public address; the helper's cookies by name)
  const begun = await browser.fetch(`${direct(step2)}/oauth/login/demo/?next=/app/`)
  let url = new URL(begun.headers.get('location')!).href
  let b: URL | undefined
  for (let i = 0; i < 20 && !b; i++) {
    const r = await browser.fetch(url)
    const loc = r.headers.get('location')
    if (r.status >= 300 && r.status < 400 && loc) { const n = new URL(loc, url); await r.arrayBuffer(); if (n.pathname.startsWith('/oauth/authorized/')) b = n; else url = n.href; continue }
    const body = await r.text()
    const prompt = /name="prompt" value="(\w+)"/.exec(body)?.[1]
    const action = /<form[^>]*action="([^"]+)"/.exec(body)?.[1]
    if (!prompt || !action) throw new Error('stuck ' + url)
    const form = new URLSearchParams({ prompt }); if (prompt === 'login') form.set('login', 'rot-gil')
    const post = await browser.fetch(new URL(action, url).href, { method: 'POST', body: form, headers: { 'content-type': 'application/x-www-form-urlencoded' } })
    const l2 = post.headers.get('location')!; await post.arrayBuffer(); const n = new URL(l2, url)
    if (n.pathname.startsWith('/oauth/authorized/')) b = n; else url = n.href
  }
  if (!b) throw new Error('no callback')
  const ra = await browser.fetch(a.href)
  const rb = await browser.fetch(`${step1.url}${b.pathname}${b.search}`)
  expect(ra.status).toBe(302)
  expect(rb.status).toBe(302)
})
