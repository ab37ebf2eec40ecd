// The 403 of a route's rules and "Use another account", against real authorization servers that
// keep their own sign-in: the JSON and the page say what the gateway saw (user, e-mail, groups) and
// which rule refused, never the rule's values, with hostile identity values rendered inert (checked
// in Chromium); forward-auth's 403 carries the same fields. "Use another account" is a POST that
// signs out here (and at a provider with end_session_endpoint) and then starts a sign-in with
// prompt=select_account, or prompt=login where discovery does not list it; a link or another site
// only gets a confirmation page, the login endpoint never passes a prompt on, and `switch` and
// `next` take no hostile value. GitHub (no discovery) gets select_account, which it documents.
import pino from 'pino'
import type { Browser as Chromium } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { parseConfig } from '../../src/config/config.js'
import { refusal, refusedBy } from '../../src/access/refusal.js'
import { GatewayError } from '../../src/errors.js'
import { errorPage } from '../../src/http/pages.js'
import { accountPrompt } from '../../src/oauth/client.js'
import { Providers } from '../../src/oauth/providers.js'
import { switchAccountUrl } from '../../src/oauth/urls.js'
import type { Identity } from '../../src/session/record.js'
import { Browser } from '../helpers/browser.js'
import { sharedChromium } from '../helpers/chromium.js'
import { TEST_SECRET, oidcClient, reserveBaseUrl, sessionStatus, startGateway, type TestGateway } from '../helpers/gateway.js'
import { gatewayClient, startOidcProvider, walk, type TestProvider } from '../helpers/oidc.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

let upstream: Upstream
/** Remembers its sign-in, lists select_account, offers no sign-out (as Google does to most apps). */
let choose: TestProvider
/** Remembers its sign-in, does not list select_account, offers no sign-out. */
let plain: TestProvider
/** Remembers its sign-in and offers RP-initiated logout (end_session_endpoint). */
let sso: TestProvider
let gateway: TestGateway

const ALICE_ONLY = { emails: ['alice@example.test'] }

beforeAll(async () => {
  upstream = await startUpstream()
  const { port, baseUrl } = await reserveBaseUrl()
  choose = await startOidcProvider([gatewayClient(baseUrl, 'choose', 'c1')], { keepSignIn: true, selectAccount: true })
  plain = await startOidcProvider([gatewayClient(baseUrl, 'plain', 'c2')], { keepSignIn: true })
  sso = await startOidcProvider([gatewayClient(baseUrl, 'sso', 'c3')], { logout: true })
  gateway = await startGateway({
    server: { port, baseUrl },
    store: { type: 'memory' },
    providers: {
      choose: oidcClient(choose.issuer, 'c1', 's', 'openid email groups'),
      plain: oidcClient(plain.issuer, 'c2', 's', 'openid email groups'),
      sso: oidcClient(sso.issuer, 'c3', 's', 'openid email groups'),
    },
    routes: [
      { path: '/choose/', upstream: upstream.url, provider: 'choose', allow: ALICE_ONLY },
      { path: '/plain/', upstream: upstream.url, provider: 'plain', allow: ALICE_ONLY },
      { path: '/sso/', upstream: upstream.url, provider: 'sso', allow: ALICE_ONLY },
      // Open to everyone signed in, but for its admin pages and DELETE.
      { path: '/parts/', upstream: upstream.url, provider: 'choose', deny: [{ paths: ['/parts/admin/*'] }, { methods: ['DELETE'] }] },
    ],
  })
})

afterAll(async () => {
  await gateway?.close()
  await Promise.all([choose?.close(), plain?.close(), sso?.close(), upstream?.close()])
})

/** A browser signed in as `login` through `provider`'s route; the last answer is the route's (a 403 for mallory). */
async function signedIn (provider: 'choose' | 'plain' | 'sso', login: string): Promise<{ browser: Browser, status: number, cookie: string }> {
  const browser = new Browser()
  const response = await browser.navigate(`${gateway.url}/${provider}/x`, { login })
  await response.arrayBuffer()
  return { browser, status: response.status, cookie: browser.cookies.get('gw_session')!.value }
}

/** POSTs "Use another account" as the 403 page's form does (same origin), query as given. */
async function switchAccount (browser: Browser, query: string, headers: Record<string, string> = {}): Promise<Response> {
  return await browser.fetch(`${gateway.url}/oauth/logout/?${query}`, {
    method: 'POST', body: '', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: gateway.url, 'sec-fetch-site': 'same-origin', ...headers },
  })
}

/**
 * Signs in as `login` at the provider page `url` and follows on to the gateway. A provider that
 * still holds another account's sign-in ends it first with its own self-submitting form (as
 * oidc-provider does): answered here as a browser's script would.
 */
async function signInThereAs (browser: Browser, url: string, login: string): Promise<Response> {
  const response = await browser.navigate(url, { login })
  const body = await response.clone().text()
  const form = /<form method="post" action="([^"]+\/session\/end\/confirm)">\s*<input type="hidden" name="xsrf" value="([^"]+)"/.exec(body)
  if (!form) return response
  const end = await walk(browser, new URL(form[1]!, url).href, {
    method: 'POST', body: new URLSearchParams({ xsrf: form[2]!, logout: 'yes' }), headers: { 'content-type': 'application/x-www-form-urlencoded' },
  })
  return await browser.navigate(end.url, { login })
}

/** Every parameter the gateway puts on an authorize request; anything else would be an injection. */
const AUTHORIZE_PARAMETERS = ['client_id', 'code_challenge', 'code_challenge_method', 'nonce', 'redirect_uri', 'response_type', 'scope', 'state']

describe('the 403 of a route\'s rules', () => {
  it('answers JSON with what was seen, "no allow rule matched" and the switch address, never the rule\'s values', async () => {
    const { status, cookie } = await signedIn('choose', 'mallory')
    expect(status).toBe(403)
    const response = await fetch(`${gateway.url}/choose/report?month=5`, { headers: { accept: 'application/json', cookie: `gw_session=${cookie}` } })
    expect(response.status).toBe(403)
    const text = await response.text()
    expect(JSON.parse(text)).toEqual({
      error: 'forbidden',
      message: 'mallory@evil.test may not use this application: no allow rule matched.',
      login_url: `${gateway.url}/oauth/login/choose/?next=${encodeURIComponent('/choose/report?month=5')}`,
      seen: { user: 'mallory', email: 'mallory@evil.test', email_verified: true, groups: [] },
      rule: null,
      switch_account_url: `${gateway.url}/oauth/logout/?next=${encodeURIComponent('/choose/report?month=5')}&switch=choose`,
    })
    expect(text).not.toContain('alice@example.test')
  })

  it('shows the page: user, e-mail, groups, "no allow rule matched", and "Use another account" as a form POST', async () => {
    const { cookie } = await signedIn('choose', 'mallory')
    const response = await fetch(`${gateway.url}/choose/x`, { headers: { accept: 'text/html', cookie: `gw_session=${cookie}` } })
    expect(response.status).toBe(403)
    const html = await response.text()
    expect(html).toContain('<dt>User</dt><dd>mallory</dd><dt>E-mail</dt><dd>mallory@evil.test</dd><dt>Groups</dt><dd>none</dd>')
    expect(html).toContain('<dt>Refused by</dt><dd class="rule">no allow rule matched</dd>')
    expect(html).toContain(`<form method="post" action="${gateway.url}/oauth/logout/?next=%2Fchoose%2Fx&#38;switch=choose"><button type="submit" class="button">Use another account</button></form>`)
    expect(html).not.toContain('alice@example.test')
  })

  it.each([
    ['GET', '/parts/admin/users?page=2', 'deny[0]', '/parts/admin/users'],
    ['DELETE', '/parts/orders/7', 'deny[1]', '/parts/orders/7'],
  ])('refused only %s %s: says which request, and offers no other account (this one may use the rest)', async (method, target, rule, path) => {
    const { cookie } = await signedIn('choose', 'mallory')
    expect((await fetch(`${gateway.url}/parts/orders/7`, { headers: { cookie: `gw_session=${cookie}` } })).status).toBe(200)
    const json = await fetch(`${gateway.url}${target}`, { method, headers: { accept: 'application/json', cookie: `gw_session=${cookie}` } })
    expect(json.status).toBe(403)
    const body = await json.json() as Record<string, unknown>
    expect(body).toMatchObject({
      error: 'forbidden',
      message: `mallory@evil.test may not ${method} ${path}: the rule ${rule} refused; other requests to this application stay open to this account.`,
      rule,
      refused_for: { method, path },
    })
    expect(body.switch_account_url).toBeUndefined()
    const page = await fetch(`${gateway.url}${target}`, { method, headers: { accept: 'text/html', cookie: `gw_session=${cookie}` } })
    const html = await page.text()
    expect(html).toContain(`<dt>Refused</dt><dd class="request"><code>${method} ${path}</code> only</dd>`)
    expect(html).toContain('may use this application, but not this page or action')
    expect(html).not.toContain('Use another account')
    // No Referer: its one link is "Start over", so the text promises no "Go back" (a newcomer's reading).
    expect(html).toContain('>Start over</a>')
    expect(html).not.toMatch(/go back/i)
  })

  it('names at most 200 characters of the refused path (a link cannot put a long text on the page)', async () => {
    const { cookie } = await signedIn('choose', 'mallory')
    const path = `/parts/admin/${'Your-account-is-locked-'.repeat(20)}`
    const body = await (await fetch(`${gateway.url}${path}`, { headers: { accept: 'application/json', cookie: `gw_session=${cookie}` } })).json() as { refused_for: { path: string }, message: string }
    expect(body.refused_for.path).toBe(`${path.slice(0, 200)}…`)
    expect(body.message).toContain(`${path.slice(0, 200)}…:`)
  })

  it('refused everything on the route (no allow rule admits the account anywhere): "Use another account" stays', async () => {
    const { cookie } = await signedIn('choose', 'mallory')
    const response = await fetch(`${gateway.url}/choose/admin/x`, { method: 'DELETE', headers: { accept: 'application/json', cookie: `gw_session=${cookie}` } })
    const body = await response.json() as Record<string, unknown>
    expect(body).toMatchObject({ message: 'mallory@evil.test may not use this application: no allow rule matched.' })
    expect(body.refused_for).toBeUndefined()
    expect(body.switch_account_url).toBeDefined()
  })

  it('forward-auth\'s 403 carries the same fields', async () => {
    const { cookie } = await signedIn('choose', 'mallory')
    const response = await fetch(`${gateway.url}/oauth/auth/choose/?emails=alice@example.test`, { headers: { accept: 'application/json', cookie: `gw_session=${cookie}` } })
    expect(response.status).toBe(403)
    expect(await response.json()).toMatchObject({
      error: 'forbidden',
      seen: { user: 'mallory', email: 'mallory@evil.test', email_verified: true, groups: [] },
      rule: null,
      switch_account_url: `${gateway.url}/oauth/logout/?next=%2Foauth%2F&switch=choose`,
    })
  })

  it('names a refusing rule by its name only: "deny[0]"', () => {
    const error = refusal({ kind: 'forbidden', identity: { sub: 'bob', email: 'bob@contractor.example', groups: ['staff'] }, loginUrl: '/login', rule: 'deny[0]' }, { subject: 'this route' }) as GatewayError
    expect(error.message).toBe('bob@contractor.example may not use this application: the rule deny[0] refused.')
    expect(errorPage(error, '/oauth/')).toContain('<dt>Refused by</dt><dd class="rule">the rule <code>deny[0]</code></dd>')
  })
})

describe('hostile identity values on the 403 page render inert (Chromium)', () => {
  let chromium: Chromium
  beforeAll(async () => { chromium = await sharedChromium() })

  const hostile: Array<[string, Identity, string]> = [
    ['a group that is a script', { sub: 'mallory', email: 'm@evil.test', groups: ['<script>alert(1)</script>', 'staff'] }, '/app/'],
    ['an e-mail address that closes the attribute and the tag', { sub: 'mallory', email: '"><img src=x onerror=alert(1)>@evil.test', groups: [] }, '/app/'],
    ['an e-mail address with quotes', { sub: 'mallory', email: '"mal\'lory"@evil.test', groups: [] }, '/app/'],
    ['a user name with an event handler', { sub: '\' onmouseover=\'alert(1)', groups: [] }, '/app/'],
    ['a user name that closes the list and opens a form', { sub: '</dd></dl><form action="https://evil.example/"><button>', groups: [] }, '/app/'],
    ['text that is already escaped', { sub: '&lt;b&gt;', email: 'a&amp;b@evil.test', groups: ['&#60;i&#62;'] }, '/app/'],
    ['an unverified address', { sub: 'eve', email: '<b>eve</b>@evil.test', emailVerified: false, groups: [] }, '/app/'],
    ['a `next` that breaks out of the form\'s action', { sub: 'mallory', groups: [] }, '/app/"><script>alert(1)</script>'],
  ]

  it.each(hostile)('%s', async (_what, identity, next) => {
    const url = switchAccountUrl(gateway.config, 'choose', next)
    const error = refusal({ kind: 'forbidden', identity, loginUrl: '/login', rule: undefined }, { subject: 'this route', switchAccountUrl: url }) as GatewayError
    const context = await chromium.newContext({ javaScriptEnabled: true })
    const page = await context.newPage()
    let dialogs = 0
    page.on('dialog', (dialog) => { dialogs++; void dialog.dismiss() })
    await page.setContent(errorPage(error, '/oauth/'))
    await page.hover('body')
    type Element = { getAttribute (name: string): string | null, getAttributeNames (): string[] }
    const found = {
      scripts: await page.locator('script, img, iframe').count(),
      forms: await page.locator('form').evaluateAll((forms) => forms.map((form) => (form as unknown as Element).getAttribute('action'))),
      handlers: await page.locator('*').evaluateAll((all) => all.flatMap((element) => (element as unknown as Element).getAttributeNames()).filter((name) => name.startsWith('on'))),
      values: await page.locator('dl.seen dd').allTextContents(),
      groups: await page.locator('dl.seen dd:nth-of-type(3) code').allTextContents(),
    }
    await context.close()
    expect(dialogs).toBe(0)
    expect(found.scripts).toBe(0)
    expect(found.handlers).toEqual([])
    expect(found.forms).toEqual([url])
    const seen = refusedBy(identity, undefined).seen!
    expect(found.values[0]).toBe(seen.user)
    if (seen.email !== undefined) expect(found.values[1]).toBe(seen.emailVerified ? seen.email : `${seen.email} (not verified by the provider)`)
    if (seen.groups.length > 0) expect(found.groups).toEqual(seen.groups)
  })
})

describe('"Use another account"', () => {
  it('signs out here, then signs in where discovery lists select_account with prompt=select_account, back to `next`', async () => {
    const { browser, cookie } = await signedIn('choose', 'mallory')
    const response = await switchAccount(browser, 'next=%2Fchoose%2Freport&switch=choose')
    expect(response.status).toBe(302)
    expect(response.headers.getSetCookie().some((line) => /^gw_session=;/.test(line))).toBe(true)
    expect(await sessionStatus(gateway, cookie, '/choose/x')).toBe(401)
    const authorize = new URL(response.headers.get('location')!)
    expect(authorize.origin + authorize.pathname).toBe(`${choose.issuer}/auth`)
    expect(authorize.searchParams.get('prompt')).toBe('select_account')
    expect([...authorize.searchParams.keys()].sort()).toEqual([...AUTHORIZE_PARAMETERS, 'prompt'].sort())
    // The provider still knows mallory, and asks which account instead of signing her in again.
    const chooser = await walk(browser, authorize.href)
    expect(chooser.response.status).toBe(200)
    expect(chooser.body).toContain('Continue as mallory')
    expect(chooser.visited.some((url) => url.startsWith(`${gateway.url}/oauth/authorized/`))).toBe(false)
  })

  it('asks for prompt=login where discovery does not list select_account', async () => {
    const { browser } = await signedIn('plain', 'mallory')
    const response = await switchAccount(browser, 'next=%2Fplain%2F&switch=plain')
    const authorize = new URL(response.headers.get('location')!)
    expect(authorize.origin).toBe(new URL(plain.issuer).origin)
    expect(authorize.searchParams.get('prompt')).toBe('login')
    const end = await walk(browser, authorize.href)
    expect(end.body).toContain('name="login"')
    expect(end.visited.some((url) => url.startsWith(`${gateway.url}/oauth/authorized/`))).toBe(false)

    // Signed in as alice there, the person reaches the page they asked for.
    const reached = await signInThereAs(browser, end.url, 'alice')
    expect(reached.status).toBe(200)
    expect(await reached.json()).toMatchObject({ url: '/plain/' })
  })

  it('signs out at a provider with end_session_endpoint first, then signs in there with a prompt', async () => {
    const { browser } = await signedIn('sso', 'mallory')
    const response = await switchAccount(browser, 'next=%2Fsso%2Fx&switch=sso')
    expect(new URL(response.headers.get('location')!).pathname).toBe('/session/end')
    const end = await walk(browser, response.headers.get('location')!)
    const back = end.visited.findIndex((url) => url.startsWith(`${gateway.url}/oauth/logout/sso/`))
    expect(back).toBeGreaterThan(-1)
    const authorize = new URL(end.visited[back + 1]!)
    expect(authorize.origin).toBe(new URL(sso.issuer).origin)
    expect(authorize.searchParams.get('prompt')).toBe('login')
    expect(end.body).toContain('name="login"')
    const reached = await signInThereAs(browser, end.url, 'alice')
    expect(reached.status).toBe(200)
    expect(await reached.json()).toMatchObject({ url: '/sso/x' })
  })

  it.each([
    ['a link from another site (GET, Sec-Fetch-Site cross-site)', 'GET', { 'sec-fetch-site': 'cross-site' }],
    ['a form on another site (POST, foreign Origin)', 'POST', { origin: 'https://evil.example', 'content-type': 'application/x-www-form-urlencoded' }],
    ['a sibling site (Sec-Fetch-Site same-site)', 'POST', { 'sec-fetch-site': 'same-site', 'content-type': 'application/x-www-form-urlencoded' }],
    ['a link of the gateway\'s own origin (GET)', 'GET', { 'sec-fetch-site': 'same-origin' }],
    ['a link with neither header (GET)', 'GET', {}],
  ])('%s only gets a confirmation page; the session stays', async (_what, method, headers) => {
    const { browser, cookie } = await signedIn('choose', 'mallory')
    const response = await browser.fetch(`${gateway.url}/oauth/logout/?next=%2Fchoose%2Fx&switch=choose`, { method, headers, ...(method === 'POST' ? { body: '' } : {}) })
    expect(response.status).toBe(200)
    const html = await response.text()
    expect(html).toContain('<h1>Use another account?</h1>')
    expect(html).toContain('<input type="hidden" name="next" value="/choose/x"><input type="hidden" name="switch" value="choose">')
    expect(response.headers.get('location')).toBeNull()
    expect((await fetch(`${gateway.url}/choose/x`, { headers: { accept: 'application/json', cookie: `gw_session=${cookie}` } })).status).toBe(403)
  })

  it.each([
    ['prompt=none', 'prompt=none'],
    ['prompt=select_account', 'prompt=select_account'],
    ['prompt=login', 'prompt=login'],
    ['two prompts', 'prompt=login&prompt=consent'],
    ['max_age and login_hint', 'max_age=0&login_hint=alice'],
    ['a prompt hidden in next', 'next=%2Fchoose%2F%26prompt%3Dnone'],
    ['a redirect_uri of its own', 'redirect_uri=https%3A%2F%2Fevil.example%2F'],
  ])('the login endpoint passes no authorize parameter on: %s', async (_what, query) => {
    const response = await new Browser().fetch(`${gateway.url}/oauth/login/choose/?${query}`)
    expect(response.status).toBe(302)
    const authorize = new URL(response.headers.get('location')!)
    expect([...authorize.searchParams.keys()].sort()).toEqual(AUTHORIZE_PARAMETERS)
    expect(authorize.searchParams.get('redirect_uri')).toBe(`${gateway.url}/oauth/authorized/choose/`)
  })

  it.each([
    ['a provider nobody configured', 'switch=nope'],
    ['an empty name', 'switch='],
    ['a name with parameters after it', 'switch=choose%26prompt%3Dnone'],
    ['a name of Object.prototype', 'switch=__proto__'],
    ['another case', 'switch=CHOOSE'],
    ['two names', 'switch=choose&switch=plain'],
  ])('`switch` must name a configured provider, else 404 and nothing ends: %s', async (_what, query) => {
    const { browser, cookie } = await signedIn('choose', 'mallory')
    const response = await switchAccount(browser, `next=%2Fchoose%2F&${query}`, { accept: 'application/json' })
    expect(response.status).toBe(404)
    expect((await response.json() as { error: string }).error).toBe('unknown_provider')
    expect((await fetch(`${gateway.url}/choose/x`, { headers: { accept: 'application/json', cookie: `gw_session=${cookie}` } })).status).toBe(403)
  })

  it.each([
    ['another site', 'https://evil.example/'],
    ['a protocol-relative address', '//evil.example/'],
    ['a backslash', '/\\evil.example/'],
    ['a script address', 'javascript:alert(1)'],
  ])('a hostile `next` ends the switch at the home page: %s', async (_what, next) => {
    const { browser } = await signedIn('plain', 'mallory')
    const response = await switchAccount(browser, `next=${encodeURIComponent(next)}&switch=plain`)
    const end = await signInThereAs(browser, response.headers.get('location')!, 'alice')
    await end.arrayBuffer()
    const callback = browser.hops.findLast((hop) => hop.url.startsWith(`${gateway.url}/oauth/authorized/plain/`))!
    expect(callback.status).toBe(302)
    expect(callback.location).toBe('/oauth/')
  })
})

describe('the prompt of "Use another account" at a provider without discovery', () => {
  it('is select_account for GitHub (documented, no discovery to list it) and login for any other', async () => {
    const config = parseConfig(stringify({
      session: { secret: TEST_SECRET },
      providers: {
        github: { preset: 'github', clientId: 'gh', clientSecret: 's' },
        other: { clientId: 'o', clientSecret: 's', authorizeUrl: 'https://oauth.example/authorize', tokenUrl: 'https://oauth.example/token', scope: 'read' },
      },
      routes: [{ path: '/', upstream: 'http://127.0.0.1:1', provider: 'github' }],
    }), {}, 'test.yaml')
    const providers = new Providers(config.providers, pino({ level: 'silent' }))
    expect(accountPrompt(await providers.get('github'))).toBe('select_account')
    expect(accountPrompt(await providers.get('other'))).toBe('login')
  })
})
