// The device flow (RFC 8628) for CLIs without a browser, over real sockets (the gateway, its Redis,
// the worker's oidc-provider as the route's provider): a CLI registers without a redirect URI, asks
// for a code, polls; the person enters the code at /oauth/agents/device, confirms it, signs in at the
// route's provider and allows the client; the CLI's next poll gets tokens for that route only. And
// what the RFC asks of the polling (authorization_pending, slow_down, expired_token, access_denied),
// codes that must not work, and pages that must not be framed or reached from another site.
import { Redis } from 'ioredis'
import { afterAll, describe, expect, vi } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { ARTIFACTS, sharedChromium } from '../helpers/chromium.js'
import type { TestGateway } from '../helpers/gateway.js'
import { metricValue } from '../helpers/metrics.js'
import { PER_CREDENTIAL } from '../../src/http/agent-limits.js'
import { test as it } from '../helpers/stack.js'

const DEVICE_CODE = 'urn:ietf:params:oauth:grant-type:device_code'
/** RFC 8628 §6.1's base-20 letters, as XXXX-XXXX. */
const USER_CODE = /^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/
/** The authorization server's session cookie (the shared stack's cookie name, gw_session). */
const AS_COOKIE = 'gw_session_as'

let gateway: TestGateway
/** The gateway's store, read directly: what a device code keeps there. */
let store: Redis
/** The gateway's clock: the wall clock plus an offset a test moves (no waiting out a poll interval). */
const clock = { offset: 0, now: () => Date.now() + clock.offset }
/** agents.registrationsPerHour here. */
const REGISTRATIONS = 30
/** Polls POLL_S apart: the interval the gateway gives. */
const POLL_S = 5
/** agents.tokenRequestsPerMinute here: from one address, every client together. */
const TOKEN_REQUESTS = 45

it.beforeAll(async ({ startStack, upstream, redis }) => {
  store = new Redis(redis.url)
  gateway = await startStack({
    server: { trustProxy: ['127.0.0.1'] },
    // Registrations from every address together: this file's tests register fewer; the last one registers up to it.
    agents: { deviceFlow: true, registrationsPerHour: REGISTRATIONS, tokenRequestsPerMinute: TOKEN_REQUESTS },
    routes: [
      { path: '/mcp', upstream: upstream.url, provider: 'demo', agents: true },
      { path: '/other/', upstream: upstream.url, provider: 'demo', agents: true },
    ],
  }, { deps: { clock } })
})

afterAll(async () => {
  store?.disconnect()
  await gateway?.close()
})

interface DeviceAuthorization { device_code: string, user_code: string, verification_uri: string, verification_uri_complete: string, expires_in: number, interval: number }
type TokenAnswer = Record<string, unknown> & { error?: string, access_token?: string, refresh_token?: string }

let addresses = 0
/** An address of its own for each CLI and each person (what the gateway counts is per address). */
const address = () => `10.9.0.${++addresses}`
/** Each CLI's address. */
const from = new Map<string, string>()

/** A CLI registered for the device flow only. */
async function cli (metadata: Record<string, unknown> = {}): Promise<string> {
  const at = address()
  const response = await fetch(`${gateway.url}/oauth/agents/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-forwarded-for': at },
    body: JSON.stringify({ client_name: 'Device test CLI', grant_types: [DEVICE_CODE, 'refresh_token'], token_endpoint_auth_method: 'none', ...metadata }),
  })
  const body = await response.json() as Record<string, unknown>
  expect(response.status, JSON.stringify(body)).toBe(201)
  from.set(String(body.client_id), at)
  return String(body.client_id)
}

async function deviceAuthorization (clientId: string, extra: Record<string, string> = { resource: '' }): Promise<Response> {
  const params = { client_id: clientId, resource: `${gateway.url}/mcp`, ...extra }
  if (params.resource === '') params.resource = `${gateway.url}/mcp`
  return await fetch(`${gateway.url}/oauth/agents/device/auth`, { method: 'POST', headers: { 'x-forwarded-for': from.get(clientId) ?? address() }, body: new URLSearchParams(params) })
}

async function started (clientId: string): Promise<DeviceAuthorization> {
  const response = await deviceAuthorization(clientId)
  const body = await response.json() as DeviceAuthorization
  expect(response.status, JSON.stringify(body)).toBe(200)
  return body
}

/** One poll from the CLI's address, POLL_S after the last one on the gateway's clock. */
async function poll (clientId: string, deviceCode: string, { wait = true, at = from.get(clientId), resource = '' } = {}): Promise<{ status: number, body: TokenAnswer }> {
  if (wait) clock.offset += POLL_S * 1000
  const form = new URLSearchParams({ grant_type: DEVICE_CODE, device_code: deviceCode, client_id: clientId })
  if (resource !== '') form.set('resource', resource)
  const response = await fetch(`${gateway.url}/oauth/agents/token`, { method: 'POST', headers: { 'x-forwarded-for': at ?? address() }, body: form })
  return { status: response.status, body: await response.json() as TokenAnswer }
}

const xsrfOf = (html: string) => /name="xsrf" value="([^"]+)"/.exec(html)?.[1] ?? ''

/** A person's browser, at an address of its own. */
const person = () => new Browser()
const addressOf = new WeakMap<Browser, string>()
const at = (browser: Browser) => addressOf.get(browser) ?? addressOf.set(browser, address()).get(browser)!

/** POSTs a form on the device page as the page's own form would. */
async function submit (browser: Browser, form: Record<string, string>, origin = gateway.url): Promise<Response> {
  return await browser.fetch(`${gateway.url}/oauth/agents/device`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin, 'x-forwarded-for': at(browser) }, body: new URLSearchParams(form) })
}

/** The person enters `userCode` on the device page: the page that follows (the confirmation, or the entry again with a problem). */
async function enter (browser: Browser, userCode: string): Promise<{ status: number, html: string }> {
  const entry = await browser.fetch(`${gateway.url}/oauth/agents/device`)
  const response = await submit(browser, { xsrf: xsrfOf(await entry.text()), user_code: userCode })
  return { status: response.status, html: await response.text() }
}

/** Confirms the code on the confirmation page, signs in as `login`, and answers the consent page: the last page. */
async function confirmAndDecide (browser: Browser, confirmation: string, login: string, decision: 'allow' | 'deny'): Promise<{ consent: string, last: Response, lastUrl: string }> {
  const userCode = /name="user_code" value="([^"]+)"/.exec(confirmation)![1]!
  const confirmed = await submit(browser, { xsrf: xsrfOf(confirmation), user_code: userCode, confirm: 'yes' })
  expect(confirmed.status).toBe(303)
  const consentPage = await browser.navigate(new URL(confirmed.headers.get('location')!, gateway.url).href, { login })
  const consent = await consentPage.text()
  expect(consentPage.status, consent).toBe(200)
  const csrf = /name="csrf" value="([^"]+)"/.exec(consent)![1]!
  const action = new URL(/<form method="post" action="([^"]+)"/.exec(consent)![1]!, gateway.url).href
  let lastUrl = action
  let last = await browser.fetch(action, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: gateway.url }, body: new URLSearchParams({ csrf, decision }) })
  while (last.status === 302 || last.status === 303) {
    lastUrl = new URL(last.headers.get('location')!, lastUrl).href
    last = await browser.fetch(lastUrl)
  }
  return { consent, last, lastUrl }
}

describe('what anyone\'s device code keeps in the store', () => {
  /** The bytes of the device codes' records in the store. */
  async function deviceCodeBytes (): Promise<number> {
    const keys = await store.keys('*agents:DeviceCode:*')
    const sizes = await Promise.all(keys.map(async (key) => Number(await store.memory('USAGE', key) ?? 0)))
    return sizes.reduce((sum, size) => sum + size, 0)
  }

  it('a request over 1 KiB (oidc-provider would keep its free-text parameters for 10 minutes) is refused 413 and keeps nothing; one within it keeps about a kilobyte', async () => {
    const clientId = await cli()
    const before = await deviceCodeBytes()
    const filler = 'x'.repeat(4000)
    const large = await deviceAuthorization(clientId, { resource: '', scope: 'openid', login_hint: filler, acr_values: filler })
    expect(large.status).toBe(413)
    expect(await large.json()).toMatchObject({ error: 'payload_too_large', message: 'A device authorization request is at most 1024 bytes, with a Content-Length.' })
    expect(await deviceCodeBytes()).toBe(before)

    // As much free text as fits: what one request can make the store keep for the code's 10 minutes.
    const fits = 'x'.repeat(1024 - new URLSearchParams({ client_id: clientId, resource: `${gateway.url}/mcp`, scope: 'openid', login_hint: '' }).toString().length)
    const kept = await deviceAuthorization(clientId, { resource: '', scope: 'openid', login_hint: fits })
    expect(kept.status).toBe(200)
    expect(await deviceCodeBytes() - before).toBeLessThan(4096)
  })

  it('a request without a Content-Length is refused before any of it is read', async () => {
    const clientId = await cli()
    const body = new ReadableStream<Uint8Array>({ start (controller) { controller.enqueue(new TextEncoder().encode(`client_id=${clientId}`)); controller.close() } })
    const answer = await fetch(`${gateway.url}/oauth/agents/device/auth`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-forwarded-for': from.get(clientId)! }, body, duplex: 'half' } as RequestInit)
    expect(answer.status).toBe(413)
  })
})

describe('the device flow', () => {
  it('metadata names the device authorization endpoint and grant; a CLI registers with no redirect URI', async () => {
    const metadata = await (await fetch(`${gateway.url}/.well-known/oauth-authorization-server`)).json() as Record<string, unknown>
    expect(metadata.device_authorization_endpoint).toBe(`${gateway.url}/oauth/agents/device/auth`)
    expect(metadata.grant_types_supported).toContain(DEVICE_CODE)
    const id = await cli()
    expect(id).toBeTruthy()
    // A client of the code flow still needs its redirect URIs.
    const refused = await fetch(`${gateway.url}/oauth/agents/register`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-forwarded-for': '10.9.1.1' }, body: JSON.stringify({ client_name: 'No redirect', token_endpoint_auth_method: 'none' }) })
    expect(refused.status).toBe(400)
    expect(await refused.json()).toMatchObject({ error: 'invalid_redirect_uri' })
  })

  it('signs a CLI in: code, pending, the person confirms and allows, tokens for the route, then the code is spent', async () => {
    const id = await cli()
    const device = await started(id)
    expect(device.user_code).toMatch(USER_CODE)
    expect(device).toMatchObject({ verification_uri: `${gateway.url}/oauth/agents/device`, expires_in: 600, interval: POLL_S })
    expect(device.verification_uri_complete).toBe(`${gateway.url}/oauth/agents/device?user_code=${device.user_code}`)
    expect(await poll(id, device.device_code)).toEqual({ status: 400, body: expect.objectContaining({ error: 'authorization_pending' }) })

    const browser = person()
    const confirmation = await enter(browser, device.user_code.toLowerCase().replace('-', ' '))
    expect(confirmation.status).toBe(200)
    expect(confirmation.html).toContain('Device test CLI')
    expect(confirmation.html).toContain(device.user_code)
    const { consent, last, lastUrl } = await confirmAndDecide(browser, confirmation.html, 'dave', 'allow')
    expect(consent).toContain('with the code you entered')
    expect(consent).toContain('<code>/mcp</code>')
    const done = await last.text()
    expect(last.status, done).toBe(200)
    expect(done, /<p[^>]*>.*<\/p>/.exec(done)?.[0]).toContain('Your CLI is signed in')
    // Reloaded, the last page says so again (it showed the code entry: "That did not work"); the
    // same address in another browser shows nothing of it.
    const reloaded = await browser.fetch(lastUrl)
    expect(reloaded.status).toBe(200)
    expect(await reloaded.text()).toContain('<strong><bdi>Device test CLI</bdi></strong> can now use what you allowed')
    const elsewhere = await person().fetch(lastUrl)
    expect(elsewhere.status).toBe(400)
    expect(await elsewhere.text()).not.toContain('Device test CLI')

    const tokens = await poll(id, device.device_code)
    expect(tokens.status, JSON.stringify(tokens.body)).toBe(200)
    expect(tokens.body).toMatchObject({ token_type: 'Bearer', scope: 'access' })
    const call = await fetch(`${gateway.url}/mcp`, { headers: { authorization: `Bearer ${tokens.body.access_token!}` } })
    expect(call.status).toBe(200)
    const seen = await call.json() as { headers: Record<string, string> }
    expect(seen.headers.authorization).not.toContain(tokens.body.access_token!)
    expect(seen.headers['x-forwarded-user']).toBe('dave')
    expect((await fetch(`${gateway.url}/other/`, { headers: { authorization: `Bearer ${tokens.body.access_token!}` } })).status).toBe(401)
    const refresh = async (token: string) => await fetch(`${gateway.url}/oauth/agents/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: token, client_id: id }) })
    const refreshed = await refresh(tokens.body.refresh_token!)
    expect(refreshed.status).toBe(200)
    // The code is spent: used again, it is refused, and what it issued ends (as a code used twice does).
    expect(await poll(id, device.device_code)).toMatchObject({ status: 400, body: { error: 'invalid_grant' } })
    expect((await refresh((await refreshed.json() as TokenAnswer).refresh_token!)).status).toBe(400)
    expect((await fetch(`${gateway.url}/mcp`, { headers: { authorization: `Bearer ${tokens.body.access_token!}` } })).status).toBe(401)
    const metrics = await (await fetch(`${gateway.url}/metrics`)).text()
    expect(metricValue(metrics, 'gateway_agents_total{event="device",result="code_issued"}')).toBeGreaterThanOrEqual(1)
    expect(metricValue(metrics, 'gateway_agents_total{event="token",result="device_code"}')).toBeGreaterThanOrEqual(1)
  })

  it('a CLI that names its route on every poll: pending until the person allows, then tokens; naming another route is refused and spends nothing', async () => {
    const id = await cli()
    const device = await started(id)
    // Outside testers' findings: the pending code (its route only in its request until then) was
    // refused invalid_target, which ends a CLI's polling; the code spent by a poll naming another route.
    expect(await poll(id, device.device_code, { resource: `${gateway.url}/mcp` })).toMatchObject({ status: 400, body: { error: 'authorization_pending' } })
    const browser = person()
    await confirmAndDecide(browser, (await enter(browser, device.user_code)).html, 'dave', 'allow')
    expect(await poll(id, device.device_code, { resource: `${gateway.url}/other/` })).toMatchObject({ status: 400, body: { error: 'invalid_target' } })
    const tokens = await poll(id, device.device_code, { resource: `${gateway.url}/mcp` })
    expect(tokens.status, JSON.stringify(tokens.body)).toBe(200)
    expect((await fetch(`${gateway.url}/mcp`, { headers: { authorization: `Bearer ${tokens.body.access_token!}` } })).status).toBe(200)
  })

  it('in Chromium: the link with the code, its confirmation, the sign-in, the consent and the last page', async () => {
    const id = await cli({ client_name: 'deploy-cli' })
    const device = await started(id)
    const context = await (await sharedChromium()).newContext({ extraHTTPHeaders: { 'x-forwarded-for': address() } })
    try {
      const page = await context.newPage()
      // The link a CLI prints or shows as a QR code: the code comes filled in, and the page asks to confirm it.
      await page.goto(device.verification_uri_complete)
      await page.waitForSelector('h1:has-text("Is this your code?")')
      expect(await page.textContent('.user-code')).toBe(device.user_code)
      expect(await page.textContent('body')).toContain('deploy-cli')
      // An outside tester's finding: the page a phished person lands on named the client only; it names the route too.
      expect(await page.textContent('.seen dd')).toBe('/mcp')
      await page.screenshot({ path: `${ARTIFACTS}/agents-device-confirm.png`, fullPage: true })
      await page.click('button:has-text("Continue")')
      await page.fill('input[name="login"]', 'erin')
      await page.click('button:has-text("Sign in")')
      await page.click('button:has-text("Allow")')
      await page.waitForSelector('h1:has-text("Allow an agent?")')
      await page.click('button:has-text("Allow")')
      await page.waitForSelector('h1:has-text("Your CLI is signed in")')
      expect(await poll(id, device.device_code)).toMatchObject({ status: 200, body: { token_type: 'Bearer' } })
    } finally {
      await context.close()
    }
  })

  it('the code\'s first page names the route a code for another route would reach', async () => {
    const id = await cli({ client_name: 'deploy-cli' })
    const response = await deviceAuthorization(id, { resource: `${gateway.url}/other` })
    const device = await response.json() as DeviceAuthorization
    expect(response.status).toBe(200)
    const { html } = await enter(new Browser(), device.user_code)
    expect(html).toContain('Is this your code?')
    expect(html).toContain('asks to sign in to <code>/other</code> with the code')
    expect(html).toContain('<dt>Application</dt><dd><code>/other</code></dd>')
  })

  it('slow_down to a CLI that polls sooner than its interval, which then grows by 5 seconds', async () => {
    const id = await cli()
    const device = await started(id)
    expect((await poll(id, device.device_code)).body.error).toBe('authorization_pending')
    const early = await poll(id, device.device_code, { wait: false })
    expect(early).toMatchObject({ status: 400, body: { error: 'slow_down' } })
    // Now 10 s: 5 s later is too soon again (and makes it 15 s), 15 s later is not.
    expect((await poll(id, device.device_code)).body.error).toBe('slow_down')
    clock.offset += 3 * POLL_S * 1000
    expect((await poll(id, device.device_code, { wait: false })).body.error).toBe('authorization_pending')
  })

  it('slow_down whatever the CLI accepts, and of polls at the same moment only one is not too soon', async () => {
    const id = await cli()
    const device = await started(id)
    expect((await poll(id, device.device_code)).body.error).toBe('authorization_pending')
    const html = await fetch(`${gateway.url}/oauth/agents/token`, { method: 'POST', headers: { accept: 'text/html' }, body: new URLSearchParams({ grant_type: DEVICE_CODE, device_code: device.device_code, client_id: id }) })
    expect(html.headers.get('content-type')).toContain('application/json')
    expect(await html.json()).toMatchObject({ error: 'slow_down' })
    clock.offset += 60_000
    const answers = await Promise.all(Array.from({ length: 5 }, async () => (await poll(id, device.device_code, { wait: false })).body.error))
    expect(answers.filter((error) => error === 'authorization_pending')).toHaveLength(1)
    expect(answers.filter((error) => error === 'slow_down')).toHaveLength(4)
  })

  it('a code two people confirm at the same moment goes on for one of them only', async () => {
    const id = await cli()
    const device = await started(id)
    const people = [person(), person()]
    const confirmations = await Promise.all(people.map(async (browser) => (await enter(browser, device.user_code)).html))
    const answers = await Promise.all(people.map(async (browser, i) => {
      const response = await submit(browser, { xsrf: xsrfOf(confirmations[i]!), user_code: device.user_code, confirm: 'yes' })
      return response.status
    }))
    expect(answers.filter((status) => status === 303)).toHaveLength(1)
  })

  it('counts each budget apart: a CLI polling from the person\'s address leaves the code\'s page usable, and too many codes typed get 429', async () => {
    const id = await cli()
    const device = await started(id)
    const browser = person()
    // The CLI polls from the person's own address, more often than the page's budget.
    for (let i = 0; i < 25; i++) {
      const response = await fetch(`${gateway.url}/oauth/agents/token`, { method: 'POST', headers: { 'x-forwarded-for': at(browser) }, body: new URLSearchParams({ grant_type: DEVICE_CODE, device_code: device.device_code, client_id: id }) })
      expect(response.status).toBe(400)
    }
    const entry = await browser.fetch(`${gateway.url}/oauth/agents/device`, { headers: { 'x-forwarded-for': at(browser) } })
    expect(entry.status).toBe(200)
    let xsrf = xsrfOf(await entry.text())
    const statuses: number[] = []
    let last = ''
    for (let i = 0; i < 21; i++) {
      const response = await submit(browser, { xsrf, user_code: 'BCDF-GHJK' })
      last = await response.text()
      statuses.push(response.status)
      xsrf = xsrfOf(last) || xsrf
    }
    expect(statuses.slice(0, 20).every((status) => status === 200)).toBe(true)
    expect(statuses[20]).toBe(429)
    expect(last).toContain('Too many codes entered from your address')
  })

  it('counts each device code\'s polls apart: a CLI polling too fast at an office\'s one address gets 429, its neighbours\' polls go on', async () => {
    const office = address()
    const [runaway, neighbour] = [await cli(), await cli()]
    const [mine, theirs] = [await started(runaway), await started(neighbour)]
    // Ignoring slow_down, as fast as it can: its code's 30 a minute, then 429 naming the code.
    const answers: TokenAnswer[] = []
    for (let i = 0; i <= PER_CREDENTIAL; i++) answers.push((await poll(runaway, mine.device_code, { wait: false, at: office })).body)
    expect(answers.slice(0, PER_CREDENTIAL).every((answer) => answer.error === 'slow_down' || answer.error === 'authorization_pending')).toBe(true)
    expect(answers.at(-1)).toMatchObject({ error: 'rate_limited', message: expect.stringContaining('Too many requests with this code or token') })
    // Its refused polls did not spend the address's budget: the neighbour polls there at its pace, up to what is left of it.
    for (let i = 0; i < TOKEN_REQUESTS - PER_CREDENTIAL; i++) expect((await poll(neighbour, theirs.device_code, { at: office })).body.error).toBe('authorization_pending')
    // Then the address's own budget: everyone there waits, with Retry-After; another address does not.
    const over = await fetch(`${gateway.url}/oauth/agents/token`, { method: 'POST', headers: { 'x-forwarded-for': office }, body: new URLSearchParams({ grant_type: DEVICE_CODE, device_code: theirs.device_code, client_id: neighbour }) })
    expect(over.status).toBe(429)
    expect(over.headers.get('retry-after')).toMatch(/^\d+$/)
    expect((await over.json() as TokenAnswer).message).toContain('Too many token requests from your address')
    expect((await poll(neighbour, theirs.device_code, { at: address() })).body.error).toBe('authorization_pending')
  })

  it('bounds made-up codes by the address: each has a budget of its own, all of them together the address\'s', async () => {
    const at = address()
    const id = await cli()
    const statuses: number[] = []
    for (let i = 0; i <= TOKEN_REQUESTS; i++) statuses.push((await poll(id, `made-up-${i}`, { wait: false, at })).status)
    expect(statuses.slice(0, TOKEN_REQUESTS).every((status) => status === 400)).toBe(true)
    expect(statuses.at(-1)).toBe(429)
    // No code becomes a store key: the budgets' keys hold its hash.
    const keys = await store.keys('*made-up*')
    expect(keys).toEqual([])
  })

  it('keeps no budget for a made-up code the address\'s budget refused (an outside tester\'s finding: one key each)', async () => {
    const at = address()
    const before = (await store.keys('*agents-credential*')).length
    const statuses: number[] = []
    for (let i = 0; i < TOKEN_REQUESTS * 3; i++) {
      const response = await fetch(`${gateway.url}/oauth/agents/token`, { method: 'POST', headers: { 'x-forwarded-for': at }, body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: `junk-${i}`, client_id: 'x' }) })
      statuses.push(response.status)
      await response.arrayBuffer()
    }
    expect(statuses.filter((status) => status === 429)).toHaveLength(TOKEN_REQUESTS * 2)
    expect((await store.keys('*agents-credential*')).length - before).toBe(TOKEN_REQUESTS)
  })

  it.each([
    ['a second device_code past the 1,000th parameter (oidc-provider reads the first 1,000)', (form: string) => `${form}&${Array.from({ length: 1000 }, (_, i) => `p${i}=`).join('&')}&device_code=other`, 'application/x-www-form-urlencoded'],
  ] as const)('budgets the device code oidc-provider reads, however the form is spelt: %s', async (_what, spell, contentType) => {
    const at = address()
    const id = await cli()
    const { device_code: code } = await started(id)
    const form = new URLSearchParams({ grant_type: DEVICE_CODE, device_code: code, client_id: id }).toString()
    const answers: string[] = []
    for (let i = 0; i <= PER_CREDENTIAL; i++) {
      const response = await fetch(`${gateway.url}/oauth/agents/token`, { method: 'POST', headers: { 'content-type': contentType, 'x-forwarded-for': at }, body: spell(form) })
      answers.push(String((await response.json() as TokenAnswer).error))
    }
    expect(answers[0]).toMatch(/^(authorization_pending|slow_down)$/)
    expect(answers.at(-1)).toBe('rate_limited')
  })

  it('reads the token endpoint\'s form once and hands oidc-provider the same bytes: hostile bodies', async () => {
    const id = await cli()
    const { device_code: code } = await started(id)
    const form = (fields: [string, string][]) => new URLSearchParams(fields).toString()
    const valid = form([['grant_type', DEVICE_CODE], ['device_code', code], ['client_id', id]])
    const rows: Array<[string, Record<string, string>, NonNullable<RequestInit['body']>, number, string]> = [
      ['the form as a CLI sends it', {}, valid, 400, 'authorization_pending'],
      ['with a charset', { 'content-type': 'application/x-www-form-urlencoded; charset=utf-8' }, valid, 400, 'authorization_pending'],
      ['in chunks, without a Content-Length', {}, new Blob([valid]).stream(), 400, 'authorization_pending'],
      ['over 8 KiB', {}, `${valid}&pad=${'x'.repeat(8192)}`, 413, 'payload_too_large'],
      ['as JSON (not read: oidc-provider refuses it)', { 'content-type': 'application/json' }, JSON.stringify({ grant_type: DEVICE_CODE, device_code: code, client_id: id }), 400, 'invalid_request'],
      ['the device code twice', {}, `${valid}&device_code=${code}`, 400, 'invalid_request'],
      ['the grant type twice', {}, `${valid}&grant_type=refresh_token`, 400, 'invalid_request'],
      ['a broken escape', {}, `${valid}&x=%E0%A4%A`, 400, 'authorization_pending'],
    ]
    for (const [what, headers, body, status, error] of rows) {
      clock.offset += POLL_S * 1000
      const response = await fetch(`${gateway.url}/oauth/agents/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-forwarded-for': address(), ...headers }, body, ...(body instanceof ReadableStream ? { duplex: 'half' } : {}) })
      expect({ what, status: response.status, error: (await response.json() as TokenAnswer).error }).toEqual({ what, status, error })
    }
  })

  it('access_denied when the person stops on the confirmation page, or denies on the consent page', async () => {
    const id = await cli()
    const stopped = await started(id)
    const browser = person()
    const confirmation = await enter(browser, stopped.user_code)
    const stop = await submit(browser, { xsrf: xsrfOf(confirmation.html), user_code: stopped.user_code, confirm: 'yes', abort: 'yes' })
    expect(stop.status).toBe(200)
    expect(await stop.text()).toContain('You stopped that sign-in')
    expect(await poll(id, stopped.device_code)).toMatchObject({ status: 400, body: { error: 'access_denied' } })

    const denied = await started(id)
    const { last } = await confirmAndDecide(browser, (await enter(browser, denied.user_code)).html, 'dave', 'deny')
    expect(last.status).toBe(200)
    expect(await poll(id, denied.device_code)).toMatchObject({ status: 400, body: { error: 'access_denied' } })
  })

  it('expired_token once the code has lived its 10 minutes, and the page refuses it', async () => {
    const id = await cli()
    const device = await started(id)
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + (device.expires_in + 1) * 1000 })
    try {
      expect(await poll(id, device.device_code, { wait: false })).toMatchObject({ status: 400, body: { error: 'expired_token' } })
      const page = await enter(person(), device.user_code)
      expect(page.status).toBe(200)
      expect(page.html).toContain('That code is not one this gateway gave, or it has expired')
    } finally {
      vi.useRealTimers()
    }
  })

  it('refuses what must not work: codes no one was given, a code used once, another site\'s form, framing', async () => {
    const id = await cli()
    const browser = person()
    const entry = await browser.fetch(`${gateway.url}/oauth/agents/device`)
    // Every page of the flow, oidc-provider's own form that posts a code from its link too.
    for (const page of [entry, await person().fetch(`${gateway.url}/oauth/agents/device?user_code=BCDF-GHJK`)]) {
      expect(page.headers.get('content-security-policy')).toContain("frame-ancestors 'none'")
      expect(page.headers.get('x-frame-options')).toBe('DENY')
      expect(page.headers.get('cache-control')).toBe('no-store')
      // The page's address may hold the code (user_code): no other site is told it.
      expect(page.headers.get('referrer-policy')).toBe('same-origin')
    }
    let xsrf = xsrfOf(await entry.text())
    // Each is shown the entry again (with the form's next CSRF field), saying why.
    for (const [code, status] of [['BCDF-GHJK', 200], ['', 200], ['A'.repeat(5000), 200], ['<script>alert(1)</script>', 200], ['BCDF-GHJK\r\nX: y', 200]] as const) {
      const page = await submit(browser, { xsrf, user_code: code })
      const html = await page.text()
      xsrf = xsrfOf(html)
      expect(page.status, code.slice(0, 20)).toBe(status)
      expect(html).toContain('That code is not one this gateway gave')
      expect(html).not.toContain('<script>alert')
    }
    // A form posted from another site: refused before oidc-provider sees it.
    const device = await started(id)
    expect((await submit(browser, { xsrf, user_code: device.user_code }, 'https://evil.example')).status).toBe(403)
    // Without a live session of the server's, whose form it is (another browser, cookies off, a
    // script, a forged cookie, a session that ended while the page was open): the entry again,
    // saying to open the page again, with a link in place of a form that could not be sent. Never
    // a 500 of Koa's own (attackers' findings: oidc-provider persisted the session the request
    // began on its error path), and no such session is kept.
    const sessions = async () => await store.keys('*agents:Session:*')
    const ended = person()
    const before = new Set(await sessions())
    await ended.fetch(`${gateway.url}/oauth/agents/device`)
    await store.del(...(await sessions()).filter((key) => !before.has(key)))
    const kept = (await sessions()).length
    let renewed = 0
    const cookies = { none: undefined, forged: `${AS_COOKIE}=${'a'.repeat(43)}; ${AS_COOKIE}.sig=${'b'.repeat(27)}`, ended: ended.cookieHeader(`${gateway.url}/oauth/agents/device`) }
    for (const [whose, cookie] of Object.entries(cookies)) {
      const headers = { accept: 'text/html', 'x-forwarded-for': '10.9.3.3', ...(cookie === undefined ? {} : { cookie }) }
      const answers = [
        ...([{ user_code: device.user_code }, { xsrf, user_code: device.user_code }, {}] as Array<Record<string, string>>).map(async (form) => await fetch(`${gateway.url}/oauth/agents/device`, { method: 'POST', headers: { ...headers, origin: gateway.url, 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(form) })),
        // The page after the sign-in and consent, at an address of oidc-provider's.
        ...['xyz', 'auth', 'A'.repeat(21)].map(async (uid) => await fetch(`${gateway.url}/oauth/agents/device/${uid}`, { headers })),
      ]
      for (const answer of await Promise.all(answers)) {
        expect(answer.status, `${whose} ${answer.url}`).toBe(400)
        const page = await answer.text()
        // oidc-provider may begin a new session for a signed cookie whose session ended, and keep it:
        // the browser is then given its cookie, and the form can be sent.
        if (answer.headers.get('set-cookie')?.includes(`${AS_COOKIE}=`) === true) {
          expect(whose).toBe('ended')
          expect(page).toContain('<form')
          renewed++
          continue
        }
        expect(page, `${whose} ${answer.url}`).toContain('open the device page again')
        expect(page).toContain('<a class="button" href="/oauth/agents/device">Open the device page again</a>')
        expect(page).not.toContain('<form')
      }
    }
    expect((await sessions()).length).toBe(kept + renewed)
    expect(gateway.logs.join('\n')).not.toContain('authorization server error')
    // Confirmed once, the code cannot be confirmed again (by this person or anyone else).
    const confirmation = await enter(browser, device.user_code)
    await confirmAndDecide(browser, confirmation.html, 'dave', 'allow')
    expect((await enter(person(), device.user_code)).html).toContain('That code is not one this gateway gave')
  })

  it('a code entered on a page another tab made stale says so, and entered again goes on (an attacker\'s finding: it said to start again from the CLI)', async () => {
    const device = await started(await cli())
    const browser = person()
    const first = xsrfOf(await (await browser.fetch(`${gateway.url}/oauth/agents/device`)).text())
    await browser.fetch(`${gateway.url}/oauth/agents/device`)
    const stale = await submit(browser, { xsrf: first, user_code: device.user_code })
    expect(stale.status).toBe(400)
    const html = await stale.text()
    expect(html).toContain('This page was opened again in another tab, or was open too long: enter the code again.')
    const again = await submit(browser, { xsrf: xsrfOf(html), user_code: device.user_code })
    expect(again.status).toBe(200)
    expect(await again.text()).toContain('Is this your code?')
  })

  it('refuses a device authorization that names no route (there are two), a route agents may not reach, or from a client not registered for the device flow', async () => {
    const id = await cli()
    const unnamed = await fetch(`${gateway.url}/oauth/agents/device/auth`, { method: 'POST', headers: { 'x-forwarded-for': from.get(id)! }, body: new URLSearchParams({ client_id: id }) })
    // Two routes here: a device code names its route.
    expect(unnamed.status).toBe(400)
    expect(await unnamed.json()).toMatchObject({ error: 'invalid_target' })
    const elsewhere = await deviceAuthorization(id, { resource: `${gateway.url}/app/` })
    expect(elsewhere.status).toBe(400)
    expect(await elsewhere.json()).toMatchObject({ error: 'invalid_target' })
    // Two routes in one code: refused here, not only at the person's consent page.
    const both = await fetch(`${gateway.url}/oauth/agents/device/auth`, { method: 'POST', headers: { 'x-forwarded-for': from.get(id)! }, body: new URLSearchParams([['client_id', id], ['resource', `${gateway.url}/mcp`], ['resource', `${gateway.url}/other`]]) })
    expect(both.status).toBe(400)
    expect(await both.json()).toMatchObject({ error: 'invalid_target', error_description: 'name one resource: a grant is for one route agents may reach' })
    const codeClient = await fetch(`${gateway.url}/oauth/agents/register`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-forwarded-for': '10.9.1.2' }, body: JSON.stringify({ client_name: 'Code only', redirect_uris: ['http://127.0.0.1:9/cb'], token_endpoint_auth_method: 'none' }) })
    const codeId = String((await codeClient.json() as Record<string, unknown>).client_id)
    const refused = await deviceAuthorization(codeId)
    expect(refused.status).toBe(400)
    // oidc-provider's answer (RFC 6749 would say unauthorized_client): refused all the same.
    expect(await refused.json()).toMatchObject({ error: 'invalid_request', error_description: `${DEVICE_CODE} is not allowed for this client` })
    expect((await deviceAuthorization('no-such-client')).status).toBe(401)
  })

  // Last: it spends the file's registrations.
  it('refuses registrations beyond agents.registrationsPerHour from every address together (a CORS preflight is none)', async () => {
    const register = async (method = 'POST') => await fetch(`${gateway.url}/oauth/agents/register`, {
      method,
      headers: { 'content-type': 'application/json', 'x-forwarded-for': address(), origin: 'https://agent.example', 'access-control-request-method': 'POST' },
      ...(method === 'POST' ? { body: JSON.stringify({ client_name: 'Flood', grant_types: [DEVICE_CODE], token_endpoint_auth_method: 'none' }) } : {}),
    })
    let refused: Response | undefined
    for (let i = 0; i <= REGISTRATIONS && refused === undefined; i++) {
      const response = await register()
      if (response.status !== 201) refused = response
    }
    expect(refused?.status).toBe(429)
    expect(refused?.headers.get('retry-after')).toMatch(/^\d+$/)
    expect(await refused!.text()).toContain('from every address together')
    // Another address is refused too; a preflight is not refused for it (oidc-provider answers it as it does).
    expect((await register()).status).toBe(429)
    expect((await register('OPTIONS')).status).not.toBe(429)
  })
})
