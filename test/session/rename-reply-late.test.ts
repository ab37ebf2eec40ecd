// A sign-in that renames the browser's session (the same person signs in again: Sessions.start,
// Renames.rename) while Redis's reply to the DEL that ends the old record comes later than
// store.timeout (a slow link): Redis did take it. The gateway answered 503 and deleted the new
// session it had written, so the browser had neither (an outside tester's finding). A store fault is
// a 503 and never a sign-out: the sign-in now stands, and the old cookie opens nothing.
import { expect } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { reachCallback } from '../helpers/callback.js'
import type { TestGateway } from '../helpers/gateway.js'
import { startHoldProxy, type HoldProxy } from '../helpers/hold-proxy.js'
import { test as it } from '../helpers/stack.js'

/** store.timeout: the bound of one store command, which the held reply outlasts. */
const STORE_TIMEOUT_MS = 300

let gateway: TestGateway
let proxy: HoldProxy

it.beforeAll(async ({ startStack, upstream, redis }) => {
  proxy = await startHoldProxy(redis.url)
  gateway = await startStack({
    store: { type: 'redis', url: proxy.url, timeout: `${STORE_TIMEOUT_MS}ms` },
    // No in-process cache: what a request sees is what the store holds.
    session: { cacheTtl: 0 },
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }],
  })
})

it.afterAll(async () => {
  await gateway?.close()
  await proxy?.close()
})

async function userinfoStatus (browser: Browser, cookie?: string): Promise<number> {
  const headers: Record<string, string> = { accept: 'application/json', ...(cookie === undefined ? {} : { cookie: `gw_session=${cookie}` }) }
  const response = cookie === undefined ? await browser.fetch(`${gateway.url}/oauth/userinfo/`, { headers }) : await fetch(`${gateway.url}/oauth/userinfo/`, { headers })
  await response.arrayBuffer()
  return response.status
}

it('a reply to the rename\'s DEL later than store.timeout: the sign-in stands, and the old cookie opens nothing', async () => {
  const browser = new Browser()
  expect((await browser.navigate(`${gateway.url}/oauth/login/demo/?next=/oauth/`, { login: 'alice' })).status).toBe(200)
  const before = browser.cookies.get('gw_session')!.value
  expect(await userinfoStatus(browser)).toBe(200)
  // The same person signs in again: the session is renamed, and Redis's answer to ending the old record is late.
  const callback = await reachCallback(browser, `${gateway.url}/oauth/login/demo/?next=/oauth/`, { login: 'alice' })
  // The DEL as RESP sends it (a bare "del" could be part of a random key).
  const held = proxy.armReplies(['$3\r\ndel\r\n', 'session:'])
  const answer = await browser.fetch(callback.href)
  await answer.arrayBuffer()
  await held
  proxy.release()
  expect(answer.status).toBe(302)
  const after = browser.cookies.get('gw_session')!.value
  expect(after).not.toBe(before)
  expect(await userinfoStatus(browser)).toBe(200)
  expect(await userinfoStatus(browser, before)).toBe(401)
})
