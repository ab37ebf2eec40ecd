// Flows whose one store reply comes later than store.timeout (Redis ran the command, the gateway
// heard nothing in time: 503), then the retry a real party makes: the person's reload of the sign-in
// callback (its used-state claim), a kept form's marker posted again (the take of the kept body), a
// session's next request (a refresh lock taken), the device flow's Continue (the in-flight claim
// and the record written in flight). Each retry completes, where each was stuck (a reliability
// tester's findings: "already used", "already delivered" with nothing delivered, a lock held by
// nobody for the provider's timeout plus 5 s, a code in flight with no sign-in behind it).
// (Sign-outs and back-channel logouts: ending-reply-late.test.ts; the agents' other steps:
// test/agents/reply-late.test.ts.) The shared stack, its store through test/helpers/hold-proxy.ts.
import { Redis } from 'ioredis'
import { expect } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { send, startFormUpstream, type Answer, type FormUpstream } from '../helpers/form-upstream.js'
import { oidcClient, type TestGateway } from '../helpers/gateway.js'
import { heldInstance, startHoldProxy, type HoldProxy } from '../helpers/hold-proxy.js'
import { waitFor } from '../helpers/net.js'
import { test as it } from '../helpers/stack.js'
import { startTokenStub, type TokenStub } from '../helpers/token-stub.js'

const DEVICE_CODE = 'urn:ietf:params:oauth:grant-type:device_code'
const MARKER = 'gateway-preserved-form=1'
const URLENCODED = 'application/x-www-form-urlencoded'
const FORM = 'gw_session_form'
/** The stub provider's timeout: a refresh lock is held for it plus 5 s. */
const STUB_TIMEOUT_MS = 1000

const clock = { offset: 0, now: () => Date.now() + clock.offset }
let gateway: TestGateway
let hold: HoldProxy
let upstream: FormUpstream
let stub: TokenStub
let reader: Redis

it.beforeAll(async ({ startStack, upstream: echo, redis }) => {
  hold = await startHoldProxy(redis.url)
  upstream = await startFormUpstream()
  stub = await startTokenStub()
  reader = new Redis(redis.url)
  gateway = await startStack({
    store: { type: 'redis', url: hold.url, timeout: '300ms' },
    session: { cacheTtl: 0 },
    agents: { deviceFlow: true },
    providers: { sa: { clientId: 'sa-client', clientSecret: 'sa-secret', authorizeUrl: `${stub.url}/authorize`, tokenUrl: `${stub.url}/token`, scope: 'read', timeout: `${STUB_TIMEOUT_MS}ms` } },
    routes: [
      { path: '/app/', upstream: upstream.url, provider: 'demo', preserveBody: '1KiB' },
      { path: '/sa/', upstream: echo.url, provider: 'sa' },
      { path: '/mcp', upstream: echo.url, provider: 'demo', agents: true },
    ],
  }, { deps: { clock } })
})

it.afterAll(async () => {
  await gateway?.close()
  await hold?.close()
  await upstream?.close()
  await stub?.close()
  reader?.disconnect()
})

/** A browser whose first visit of the callback has its store replies late from the command holding every string of `on`. */
class LateCallback extends Browser {
  callback: string | undefined
  constructor (private readonly on: string[]) { super() }
  override async fetch (url: string, init: RequestInit = {}): Promise<Response> {
    if (this.callback !== undefined || !url.includes('/oauth/authorized/')) return await super.fetch(url, init)
    this.callback = url
    void hold.armReplies(this.on)
    try {
      return await super.fetch(url, init)
    } finally {
      hold.disarm()
      hold.release()
    }
  }
}

it.each([['used-state:', 'nx']])('a reply late at %s: 503, and the reload of the callback completes the sign-in', async (...on) => {
  const browser = new LateCallback(on)
  const first = await browser.navigate(`${gateway.url}/app/`, { login: `late-${on[0]}` })
  expect(first.status).toBe(503)
  // The person reloads the page (the callback's address, with the provider's code and the state).
  const reload = await browser.navigate(browser.callback!)
  const text = reload.status === 200 ? '' : (await reload.text()).replace(/<style>[^<]*<\/style>/, '').replace(/<[^>]+>/g, ' ').replace(/\s+/g, ' ').slice(0, 300)
  expect({ status: reload.status, text }).toEqual({ status: 200, text: '' })
  expect(browser.hops.at(-1)!.url).toBe(`${gateway.url}/app/`)
})

/** The marker POST of the callback's page, from `browser`; the Set-Cookie lines it answers are taken into its jar, as a browser does. */
async function submitMarker (browser: Browser, path: string): Promise<Answer> {
  const answer = await send(`${gateway.url}${path}`, { body: MARKER, headers: { 'content-type': URLENCODED, 'sec-fetch-site': 'same-origin', origin: gateway.url, cookie: browser.cookieHeader(`${gateway.url}${path}`) ?? '' } })
  for (const line of answer.headers['set-cookie'] ?? []) {
    const [pair] = line.split(';', 1)
    const [name, value] = [pair!.slice(0, pair!.indexOf('=')), pair!.slice(pair!.indexOf('=') + 1)]
    if (/max-age=0/i.test(line) || value === '') browser.cookies.delete(name)
    else browser.cookies.set(name, { value, path: '/' })
  }
  return answer
}

it('the take of the kept body answered late: 503, and the reload (the marker again) delivers the form once', async () => {
  const browser = new Browser()
  const kept = await send(`${gateway.url}/app/form?draft=1`, { body: 'title=typed-for-an-hour', headers: { 'content-type': URLENCODED, 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'navigate', origin: gateway.url } })
  expect(kept.status).toBe(302)
  const setCookie = (kept.headers['set-cookie'] ?? []).find((line) => line.startsWith(`${FORM}=`))!
  browser.cookies.set(FORM, { value: setCookie.slice(FORM.length + 1).split(';', 1)[0]!, path: '/' })
  const page = await browser.navigate(new URL(kept.headers.location!, gateway.url).href, { login: 'late-form' })
  expect(page.status).toBe(200)
  expect(await page.text()).toContain('action="/app/form?draft=1"')
  const before = upstream.posts.length

  const held = hold.armReplies(['getdel', 'preserved-body:'])
  const first = await submitMarker(browser, '/app/form?draft=1')
  await held
  hold.release()
  expect(first.status, first.body.slice(0, 300)).toBe(503)
  expect(upstream.posts.length).toBe(before)

  // The person reloads (the browser posts the marker again).
  const retry = await submitMarker(browser, '/app/form?draft=1')
  expect({ status: retry.status, delivered: upstream.posts.slice(before).map((post) => post.body.toString()) }, retry.body.slice(0, 400))
    .toEqual({ status: 200, delivered: ['title=typed-for-an-hour'] })
})

// A re-reader's finding on the put-back: a double submit reached two instances; B took the form and
// delivered it while A's take was late, and A put the form back: the reload delivered it again. One
// take at a time: B is told the form is being sent, A's failed take puts it back, the reload sends it once.
it('a double submit, one take answered late on another instance: the form is delivered once', async ({ redis, op }) => {
  const raw = { providers: { demo: oidcClient(op.issuer, 'c', 's') }, session: { cacheTtl: 0 }, store: { timeout: '300ms' }, routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo', preserveBody: '1KiB' }] }
  const other = await heldInstance(redis.url, raw)
  try {
    const browser = new Browser()
    const kept = await send(`${gateway.url}/app/form?draft=1`, { body: 'title=pay-once', headers: { 'content-type': URLENCODED, 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'navigate', origin: gateway.url } })
    const setCookie = (kept.headers['set-cookie'] ?? []).find((line) => line.startsWith(`${FORM}=`))!
    browser.cookies.set(FORM, { value: setCookie.slice(FORM.length + 1).split(';', 1)[0]!, path: '/' })
    expect((await browser.navigate(new URL(kept.headers.location!, gateway.url).href, { login: 'double-submit' })).status).toBe(200)
    const cookie = browser.cookieHeader(`${gateway.url}/app/form`)!
    const marker = async (url: string) => await send(`${url}/app/form?draft=1`, { body: MARKER, headers: { 'content-type': URLENCODED, 'sec-fetch-site': 'same-origin', origin: url, cookie } })
    const before = upstream.posts.length
    // The first submit reaches the other instance: its take (GETDEL) waits in the link.
    const held = other.proxy.arm(['get', 'preserved-body:'], ['getdel', 'preserved-body:'])
    const first = marker(other.gateway.url)
    await held
    // The second reaches this one while the first's take is under way: told so, nothing sent.
    const second = await marker(gateway.url)
    expect(second.status).toBe(400)
    expect(second.body).toContain('being sent already')
    expect((await first).status).toBe(503)
    other.proxy.release()
    // The first's commands reach Redis: its take, then the form put back, then its hold let go.
    await waitFor(async () => (await reader.keys('*preserved-body:*')).length === 1, 5000, 'the form put back, alone')
    const reload = await marker(gateway.url)
    expect({ status: reload.status, delivered: upstream.posts.slice(before).map((post) => post.body.toString()) }).toEqual({ status: 200, delivered: ['title=pay-once'] })
  } finally {
    await other.close()
  }
})

it('the refresh lock\'s reply late: 503, and the reload refreshes at once (no lock left held by nobody)', async () => {
  const browser = new Browser()
  stub.mode = 'ok'
  stub.extra = { expires_in: 60, refresh_token: 'rt-1' }
  const login = await browser.fetch(`${gateway.url}/oauth/login/sa/?next=/sa/`)
  const state = new URL(login.headers.get('location')!).searchParams.get('state')!
  expect((await browser.fetch(`${gateway.url}/oauth/authorized/sa/?code=c&state=${encodeURIComponent(state)}`)).status).toBe(302)
  const cookie = browser.cookieHeader(`${gateway.url}/sa/`)!
  const get = async (signal?: AbortSignal) => await fetch(`${gateway.url}/sa/x`, { headers: { cookie, accept: 'application/json' }, signal })
  expect((await get()).status).toBe(200)

  clock.offset += 61_000 // the access token has expired: the next request refreshes it
  stub.extra = { expires_in: 3600, refresh_token: 'rt-2' }
  const first = await hold.lateFrom(['refresh:', 'nx'], async () => await get())
  expect(first.status).toBe(503)
  const locks = await reader.keys('*refresh:*')
  // The person reloads: answered before a lock left held would have expired (the provider's timeout plus 5 s).
  const retry = await get(AbortSignal.timeout(STUB_TIMEOUT_MS + 5000)).then((answer) => answer.status, (error: Error) => error.name)
  expect({ retry, locksLeftByThe503: locks.length }).toEqual({ retry: 200, locksLeftByThe503: 0 })
})

const xsrfOf = (html: string) => /name="xsrf" value="([^"]+)"/.exec(html)?.[1] ?? ''

async function submit (browser: Browser, form: Record<string, string>): Promise<Response> {
  return await browser.fetch(`${gateway.url}/oauth/agents/device`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: gateway.url }, body: new URLSearchParams(form) })
}

// The claim of the in-flight marker (SET ... NX); the code's record written in flight after it (a SET of 5 arguments: key, value, PX, ttl).
// The first row, a read before either (held: the retry goes on), shows the retry's path works.
const STEPS: Array<[string, string[]]> = [['the code\'s look-up', ['get', 'agents:DeviceCode-user-code:']], ['the in-flight claim', ['in-flight', 'nx']], ['the code saved in flight', ['*5\r\n$3\r\nset\r\n', 'agents:DeviceCode:']]]

it.each(STEPS)('Continue on "Is this your code?" with a reply late at %s: the retry of Continue goes on to the sign-in, and the CLI gets its tokens', async (_step, on) => {
  const registered = await fetch(`${gateway.url}/oauth/agents/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ client_name: 'Late CLI', grant_types: [DEVICE_CODE, 'refresh_token'], token_endpoint_auth_method: 'none' }) })
  expect(registered.status).toBe(201)
  const clientId = (await registered.json() as { client_id: string }).client_id
  const started = await fetch(`${gateway.url}/oauth/agents/device/auth`, { method: 'POST', body: new URLSearchParams({ client_id: clientId, resource: `${gateway.url}/mcp` }) })
  const device = await started.json() as { device_code: string, user_code: string }
  expect(started.status).toBe(200)

  const browser = new Browser()
  const entry = await browser.fetch(`${gateway.url}/oauth/agents/device`)
  const confirmation = await (await submit(browser, { xsrf: xsrfOf(await entry.text()), user_code: device.user_code })).text()
  expect(confirmation).toContain('name="confirm"')
  const form = { xsrf: xsrfOf(confirmation), user_code: /name="user_code" value="([^"]+)"/.exec(confirmation)![1]!, confirm: 'yes' }

  const first = await hold.lateFrom(on, async () => await submit(browser, form))
  expect(first.status).toBe(503)
  // The person opens the code's page again, enters the code the CLI still shows, and presses Continue.
  const entered = await browser.fetch(`${gateway.url}/oauth/agents/device`)
  const reentered = await submit(browser, { xsrf: xsrfOf(await entered.text()), user_code: device.user_code })
  const reconfirmation = await reentered.text()
  const confirmShown = reconfirmation.includes('name="confirm"')
  const again = confirmShown ? await submit(browser, { xsrf: xsrfOf(reconfirmation), user_code: device.user_code, confirm: 'yes' }) : reentered
  const refused = again.status === 303 ? '' : (confirmShown ? await again.text() : reconfirmation).replace(/<style>[^<]*<\/style>/, '').replace(/<[^>]+>/g, ' ').replace(/\s+/g, ' ').slice(0, 400)
  expect({ status: again.status, refused }).toEqual({ status: 303, refused: '' })
  // On to the sign-in and the consent: Allow, and the CLI's next poll has its tokens.
  const consentPage = await browser.navigate(new URL(again.headers.get('location')!, gateway.url).href, { login: 'device-late' })
  const consent = await consentPage.text()
  expect(consentPage.status, consent.slice(0, 300)).toBe(200)
  const csrf = /name="csrf" value="([^"]+)"/.exec(consent)![1]!
  const action = new URL(/<form method="post" action="([^"]+)"/.exec(consent)![1]!, gateway.url).href
  let last = await browser.fetch(action, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: gateway.url }, body: new URLSearchParams({ csrf, decision: 'allow' }) })
  while (last.status === 302 || last.status === 303) last = await browser.fetch(new URL(last.headers.get('location')!, action).href)
  expect(last.status).toBe(200)
  clock.offset += 6000
  const polled = await fetch(`${gateway.url}/oauth/agents/token`, { method: 'POST', body: new URLSearchParams({ grant_type: DEVICE_CODE, device_code: device.device_code, client_id: clientId }) })
  const tokens = await polled.json() as { access_token?: string, error?: string }
  expect({ status: polled.status, error: tokens.error }).toEqual({ status: 200, error: undefined })
})
