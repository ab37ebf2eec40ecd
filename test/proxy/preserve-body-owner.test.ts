// A kept form (routes[].preserveBody) goes upstream only as the person its flow signed in. An outside
// tester's finding: once the callback had offered it, nothing tied it to that person; she signed
// out (the form cookie and the offered body stayed), someone else signed in in the same browser,
// and a marker POST delivered her form to the upstream as him. The unit rows are in
// test/oauth/preserved-body-rotation.test.ts.
import { afterAll, describe, expect } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { send, startFormUpstream, type Answer, type FormUpstream } from '../helpers/form-upstream.js'
import type { TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'

const MARKER = 'gateway-preserved-form=1'
const URLENCODED = 'application/x-www-form-urlencoded'

let upstream: FormUpstream
let gateway: TestGateway

it.beforeAll(async ({ startStack, redis }) => {
  upstream = await startFormUpstream()
  gateway = await startStack({
    store: { type: 'redis', url: redis.url },
    session: { cacheTtl: 0 },
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo', preserveBody: '4KiB', identityHeaders: { user: 'X-Forwarded-User' } }],
  })
})

afterAll(async () => {
  await gateway?.close()
  await upstream?.close()
})

describe('a kept form offered to one person, who then signed out', () => {
  it('is not delivered to the upstream as the next person who signs in in that browser', async () => {
    const browser = new Browser()
    // 1. alice's session is gone; her form POST (one of the gateway's own pages) is kept.
    const kept = await send(`${gateway.url}/app/form`, { body: 'transfer=alice-to-charity', headers: { 'content-type': URLENCODED, 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'navigate' } })
    expect(kept.status).toBe(302)
    const formLine = (kept.headers['set-cookie'] ?? []).find((l) => l.startsWith('gw_session_form='))!
    browser.cookies.set('gw_session_form', { value: formLine.slice('gw_session_form='.length).split(';', 1)[0]!, path: '/' })
    // 2. alice signs in through the flow the form started: the callback answers with the replay page (offered).
    const page = await browser.navigate(new URL(kept.headers.location!, gateway.url).href, { login: 'alice' })
    expect(page.status).toBe(200)
    expect(await page.text()).toContain('gateway-preserved-form')
    // ...but the page's script never runs (she closes the tab, or the page is blocked) and she signs out.
    const out = await browser.fetch(`${gateway.url}/oauth/logout/`, { method: 'POST', body: new URLSearchParams({ next: '/oauth/' }), headers: { 'content-type': URLENCODED } })
    await out.arrayBuffer()
    expect(out.status).toBeLessThan(400)
    expect(browser.cookies.has('gw_session')).toBe(false)
    // 3. mallory signs in in the same browser (a shared computer). The provider's own cookies (this
    //    jar keeps every host's cookies by name) are dropped: alice has left the provider too.
    for (const name of [...browser.cookies.keys()]) if (name.startsWith('_')) browser.cookies.delete(name)
    const mallory = await browser.navigate(`${gateway.url}/oauth/login/demo/?next=/oauth/`, { login: 'mallory' })
    expect(mallory.status).toBe(200)
    // 4. A marker POST (a same-origin page, the history's replay page) now delivers alice's form as mallory.
    const before = upstream.posts.length
    const marker = await send(`${gateway.url}/app/form`, { body: MARKER, headers: { 'content-type': URLENCODED, 'sec-fetch-site': 'same-origin', cookie: browser.cookieHeader(`${gateway.url}/app/form`) ?? '' } })
    const delivered = upstream.posts.slice(before).map((p) => p.body.toString())
    // Alice's form is alice's: nothing of hers reaches the upstream as mallory.
    expect(delivered, `alice's kept form was delivered after her sign-out (status ${marker.status})`).not.toContain('transfer=alice-to-charity')
    expect(marker.status).toBe(400)
  })
})

/** A form kept for alice, offered to her first session, which then ends on another device before the marker. */
async function offeredThenEnded (): Promise<{ browser: Browser, marker: Answer }> {
  const browser = new Browser()
  const OWN = { 'content-type': URLENCODED, 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'navigate' }
  const kept = await send(`${gateway.url}/app/form`, { body: 'note=alice-typed-this', headers: OWN })
  const formLine = (kept.headers['set-cookie'] ?? []).find((l) => l.startsWith('gw_session_form='))!
  browser.cookies.set('gw_session_form', { value: formLine.slice('gw_session_form='.length).split(';', 1)[0]!, path: '/' })
  const page = await browser.navigate(new URL(kept.headers.location!, gateway.url).href, { login: 'alice' })
  expect(await page.text()).toContain('gateway-preserved-form')
  const phone = new Browser()
  await phone.navigate(`${gateway.url}/oauth/login/demo/?next=/oauth/`, { login: 'alice' })
  const out = await phone.fetch(`${gateway.url}/oauth/logout/?everywhere=1`, { method: 'POST', headers: { accept: 'application/json', 'content-type': URLENCODED }, body: '' })
  await out.arrayBuffer()
  // The marker (the page's noscript button, a reload) meets the ended session: sent to sign in, the form waits.
  const marker = await send(`${gateway.url}/app/form`, { body: MARKER, headers: { ...OWN, cookie: browser.cookieHeader(`${gateway.url}/app/form`) ?? '' } })
  expect(marker.status).toBe(302)
  expect(marker.headers.location).toContain('form=')
  for (const name of [...browser.cookies.keys()]) if (name.startsWith('_')) browser.cookies.delete(name)
  return { browser, marker }
}

// A re-reading's finding (a regression of the fix above): the person's own second sign-in could no
// longer take the form, whose first owner stayed.
describe('a kept form whose first session ended before the marker', () => {
  it('is delivered once the same person signs in again through the marker', async () => {
    const { browser, marker } = await offeredThenEnded()
    const again = await browser.navigate(new URL(marker.headers.location!, gateway.url).href, { login: 'alice' })
    expect(await again.text()).toContain('gateway-preserved-form')
    const before = upstream.posts.length
    const delivered = await send(`${gateway.url}/app/form`, { body: MARKER, headers: { 'content-type': URLENCODED, 'sec-fetch-site': 'same-origin', cookie: browser.cookieHeader(`${gateway.url}/app/form`) ?? '' } })
    expect(upstream.posts.slice(before).map((post) => post.body.toString()), `marker answered ${delivered.status}`).toEqual(['note=alice-typed-this'])
  })

  it('is not offered to another person who signs in through that marker, nor delivered to them', async () => {
    const { browser, marker } = await offeredThenEnded()
    const mallory = await browser.navigate(new URL(marker.headers.location!, gateway.url).href, { login: 'mallory' })
    expect(await mallory.text()).not.toContain('gateway-preserved-form')
    const before = upstream.posts.length
    const sent = await send(`${gateway.url}/app/form`, { body: MARKER, headers: { 'content-type': URLENCODED, 'sec-fetch-site': 'same-origin', cookie: browser.cookieHeader(`${gateway.url}/app/form`) ?? '' } })
    expect(sent.status).toBe(400)
    expect(upstream.posts.slice(before).map((post) => post.body.toString())).not.toContain('note=alice-typed-this')
  })
})
