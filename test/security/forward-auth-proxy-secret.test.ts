// forwardAuth.proxySecret (docs/forward-auth.md, "The proxy's secret"): set, /oauth/auth/ answers
// only requests that carry it in X-Forward-Auth-Secret. It closes what the relay rule leaves to the
// operator: through any relay of the gateway's host, a page's script could name an original request
// itself (its own X-Forwarded-Uri) and read the person's token from the 200, which the gateway
// could not tell from the proxy's auth request (the limit test/security/forward-auth-browser.test.ts
// documents). The shipped nginx and Caddy files with the one line forward-auth.md gives, a real
// sign-in through each; the same nginx without it; and the header never reaching an upstream.
// Behind the same files, the page a refused person sees, with "Use another account".
import { randomBytes } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { request } from 'node:http'
import { describe, expect } from 'vitest'
import { parse, stringify } from 'yaml'
import { Browser } from '../helpers/browser.js'
import { ARTIFACTS, sharedChromium } from '../helpers/chromium.js'
import { configProblems } from '../helpers/config.js'
import { metricValue } from '../helpers/metrics.js'
import { frontBinary, holdFrontPort, startFrontProxy, type FrontKind, type FrontProxy, type HeldPort } from '../helpers/front-proxy.js'
import { TEST_SECRET, type TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'
import type { SeenRequest } from '../helpers/upstream.js'

const SECRET = randomBytes(32).toString('base64')
// The value the proxies sent before SECRET (forwardAuth.previousProxySecrets), during a change.
const PREVIOUS = randomBytes(32).toString('base64')
let gateway: TestGateway
let cookie: string
const fronts: Partial<Record<'nginx' | 'caddy' | 'nginxWithout', FrontProxy>> = {}

/** The proxy's line as forward-auth.md gives it (an inline code span of "The proxy's secret"). */
async function documentedLine (start: string): Promise<string> {
  const docs = await readFile('docs/forward-auth.md', 'utf8')
  const line = new RegExp(`\`(${start}[^\`]*)\``).exec(docs)?.[1]
  if (line === undefined) throw new Error(`docs/forward-auth.md no longer shows "${start}..."`)
  return line
}

/** The shipped file with the documented line where forward-auth.md says it goes. */
async function withSecretLine (kind: FrontKind): Promise<(config: string) => string> {
  if (kind === 'nginx') {
    const line = (await documentedLine('proxy_set_header X-Forward-Auth-Secret')).replace('<the secret>', SECRET)
    return (config) => config.replace('location = /_gateway_auth {\n        internal;\n', `location = /_gateway_auth {\n        internal;\n        ${line}\n`)
  }
  const line = await documentedLine('header_up X-Forward-Auth-Secret')
  return (config) => config.replace('uri /oauth/auth/demo/?\n', `uri /oauth/auth/demo/?\n\t\t\t${line}\n`)
}

it.beforeAll(async ({ startStack, upstream }) => {
  const kinds = (['nginx', 'caddy'] as const).filter((kind) => frontBinary(kind) !== undefined)
  const ports = new Map<FrontKind, HeldPort>()
  for (const kind of kinds) ports.set(kind, await holdFrontPort())
  gateway = await startStack({
    server: { trustProxy: ['127.0.0.1'] },
    assertion: {},
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }],
    // Mallory is refused: the page a person refused behind each file sees.
    forwardAuth: { proxySecret: SECRET, previousProxySecrets: [PREVIOUS], allowedRedirectHosts: [...ports.values()].map(({ port }) => `127.0.0.1:${port}`), hosts: { '127.0.0.1': { deny: { users: ['mallory'] } } } },
  })
  const browser = new Browser()
  expect((await browser.navigate(`${gateway.url}/app/`, { login: 'alice' })).status).toBe(200)
  cookie = `gw_session=${browser.cookies.get('gw_session')!.value}`
  const where = { gateway: `127.0.0.1:${gateway.config.server.port}`, upstream: new URL(upstream.url).host }
  // Caddy reads the secret from its environment, as the documented line says.
  process.env.GATEWAY_FORWARD_AUTH_SECRET = SECRET
  for (const kind of kinds) fronts[kind] = await startFrontProxy(kind, { ...where, port: ports.get(kind)! }, await withSecretLine(kind))
  if (kinds.includes('nginx')) fronts.nginxWithout = await startFrontProxy('nginx', where)
})

it.afterAll(async () => {
  delete process.env.GATEWAY_FORWARD_AUTH_SECRET
  await Promise.all(Object.values(fronts).map(async (front) => { await front.stop() }))
})

/** Forward-auth asked from 127.0.0.1 (a trusted proxy's address) with `headers`: its status, error and token. */
async function ask (headers: Record<string, string | string[]>, withCookie = true) {
  return await new Promise<{ status: number, error: string | undefined, token: string | undefined }>((resolve, reject) => {
    const asked = request(`${gateway.url}/oauth/auth/demo/`, { headers: { accept: 'application/json', ...(withCookie ? { cookie } : {}), ...headers } }, (response) => {
      let body = ''
      response.setEncoding('utf8').on('data', (chunk: string) => { body += chunk }).on('end', () => {
        resolve({ status: response.statusCode!, error: response.statusCode === 200 ? undefined : (JSON.parse(body) as { error: string }).error, token: response.headers.authorization })
      })
    })
    asked.on('error', reject).end()
  })
}

/** What the relay of a page's fetch sends when the page's script names an original request of its own. */
const SCRIPT_THROUGH_RELAY = { 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'cors', 'x-forwarded-uri': '/app/x', 'x-forwarded-host': '127.0.0.1' }
const PREVIOUS_COUNTER = 'gateway_forward_auth_previous_proxy_secret_total'
const PROXY = { 'x-forwarded-uri': '/app/x', 'x-forwarded-host': '127.0.0.1', 'x-forwarded-method': 'GET' }

describe('forward-auth with forwardAuth.proxySecret', () => {
  it.each([
    ['a page\'s script through a relay, naming an original request itself (answered 200 without the secret setting)', SCRIPT_THROUGH_RELAY],
    ['the proxy\'s headers without the secret', PROXY],
    ['another value', { ...PROXY, 'x-forward-auth-secret': randomBytes(32).toString('base64') }],
    ['the secret with a character more', { ...PROXY, 'x-forward-auth-secret': `${SECRET}x` }],
    ['the secret sent twice (a proxy that appends: one of them could be the client\'s)', { ...PROXY, 'x-forward-auth-secret': [SECRET, SECRET] }],
    ['the secret in another header\'s name', { ...PROXY, 'x-forward-auth-secret-': SECRET }],
    ['an empty value', { ...PROXY, 'x-forward-auth-secret': '' }],
  ])('%s: 403 forbidden, no token', async (_case, headers) => {
    const logged = gateway.logs.length
    expect(await ask(headers)).toEqual({ status: 403, error: 'forbidden', token: undefined })
    // Its line says the refusal, though no one was judged (an attacker's finding: no decision at all).
    const line = gateway.logs.slice(logged).map((text) => JSON.parse(text) as Record<string, unknown>).find((entry) => entry.statusCode === 403)
    expect(line).toMatchObject({ decision: 'forbidden', reason: 'not_from_proxy', user: null, rule: 'none', credential: null })
  })

  it('takes the previous value during a change of the secret, and counts each request that carried it', async () => {
    const counted = async () => metricValue(await (await fetch(`${gateway.url}/metrics`)).text(), PREVIOUS_COUNTER)
    const before = await counted()
    expect(before).toBeDefined()
    const answer = await ask({ ...PROXY, 'x-forward-auth-secret': PREVIOUS })
    expect(answer.status).toBe(200)
    expect(answer.token).toMatch(/^Bearer \S{20,}$/)
    expect(await counted()).toBe(before! + 1)
    // The current value, refusals and the two values together are not counted.
    await ask({ ...PROXY, 'x-forward-auth-secret': SECRET })
    expect(await ask({ ...PROXY, 'x-forward-auth-secret': [PREVIOUS, SECRET] })).toMatchObject({ status: 403 })
    expect(await ask({ ...PROXY, 'x-forward-auth-secret': `${PREVIOUS}x` })).toMatchObject({ status: 403 })
    expect(await counted()).toBe(before! + 1)
  })

  it('refuses before the session is read: no sign-in address for a caller without it', async () => {
    expect(await ask(PROXY, false)).toEqual({ status: 403, error: 'forbidden', token: undefined })
  })

  it('answers the proxy that sends it: 200 with the token, and 401 with the sign-in address for nobody', async () => {
    const answer = await ask({ ...PROXY, 'x-forward-auth-secret': SECRET })
    expect(answer.status).toBe(200)
    expect(answer.token).toMatch(/^Bearer \S{20,}$/)
    expect(await ask({ ...PROXY, 'x-forward-auth-secret': SECRET }, false)).toMatchObject({ status: 401, error: 'unauthenticated' })
  })

  it('never sends the header to a route\'s upstream', async ({ upstream }) => {
    const response = await fetch(`${gateway.url}/app/seen`, { headers: { cookie, 'x-forward-auth-secret': SECRET, x_forward_auth_secret: SECRET } })
    const seen = await response.json() as SeenRequest
    expect(response.status).toBe(200)
    expect(JSON.stringify(seen.headers)).not.toContain(SECRET)
    expect(upstream.seen.at(-1)?.url).toBe('/app/seen')
  })
})

describe.each(['nginx', 'caddy'] as const)('the shipped %s file with forward-auth.md\'s line', (kind) => {
  it('signs a browser in through it, and its application gets the token but never the secret', async () => {
    const front = fronts[kind]
    if (front === undefined) return expect(frontBinary(kind)).toBeUndefined()
    const response = await new Browser().navigate(`${front.url}/app/page`, { login: 'bob' })
    expect(response.status).toBe(200)
    const seen = await response.json() as SeenRequest
    expect(seen.headers.authorization).toMatch(/^Bearer \S+$/)
    expect(seen.headers['x-forwarded-user']).toBe('bob')
    expect(JSON.stringify(seen.headers)).not.toContain(SECRET)
  })
})

// A newcomer's finding: behind nginx a refused person saw nginx's bare 403 page, with no way on (the
// gateway's page, with "Use another account", is the auth request's body, which nginx drops).
describe.each(['nginx', 'caddy'] as const)('a person refused behind the shipped %s file', (kind) => {
  it('sees that this account may not open the page, and "Use another account" leads to the gateway, which asks first', async () => {
    const front = fronts[kind]
    if (front === undefined) return expect(frontBinary(kind)).toBeUndefined()
    const browser = new Browser()
    const refused = await browser.navigate(`${front.url}/app/page?x=1`, { login: 'mallory' })
    expect(refused.status).toBe(403)
    const page = await refused.text()
    expect(page).toContain('You are signed in, but this application is not open to your account.')
    // nginx's page links to it; the gateway's own (which Caddy passes on) has a form of another site.
    const offer = kind === 'nginx' ? /<a href="([^"]+)">Use another account<\/a>/.exec(page)?.[1] : /<form method="post" action="([^"]+)"><button[^>]*>Use another account</.exec(page)?.[1].replaceAll('&#38;', '&')
    const to = new URL(offer!)
    expect([to.origin, to.pathname, to.searchParams.get('switch'), to.searchParams.get('next')]).toEqual([gateway.url, '/oauth/logout/', 'demo', `${front.url}/app/page?x=1`])
    // Followed as a link (or a form of another site): the gateway asks before it signs anyone out.
    const asked = await browser.fetch(offer!)
    expect(asked.status).toBe(200)
    expect(await asked.text()).toContain('Use another account?')
  })
})

// The same page clicked through in a real browser (Debian's Chromium): nginx's page, its link, the
// gateway's question, the provider's sign-in, and the page itself for the other account.
describe('a person refused behind the shipped nginx file, in Chromium', () => {
  it('reads nginx\'s page, follows "Use another account", confirms, signs in as bob and reaches the page', async () => {
    const front = fronts.nginx
    if (front === undefined) return expect(frontBinary('nginx')).toBeUndefined()
    const context = await (await sharedChromium()).newContext()
    try {
      const page = await context.newPage()
      const target = `${front.url}/app/page?x=1`
      await page.goto(target)
      await page.fill('input[name="login"]', 'mallory')
      await page.click('button:has-text("Sign in")')
      await page.click('button:has-text("Allow")')
      await page.waitForURL(target)
      expect(await page.textContent('h1')).toBe('Not allowed')
      await page.screenshot({ path: `${ARTIFACTS}/nginx-forbidden.png`, fullPage: true })
      await page.click('a:has-text("Use another account")')
      await page.waitForSelector('h1:has-text("Use another account?")')
      expect(new URL(page.url()).origin).toBe(gateway.url)
      await page.click('button:has-text("Use another account")')
      await page.fill('input[name="login"]', 'bob')
      await page.click('button:has-text("Sign in")')
      await page.click('button:has-text("Allow")')
      await page.waitForURL(target)
      const seen = JSON.parse(await page.textContent('body') ?? '') as SeenRequest
      expect([seen.url, seen.headers['x-forwarded-user']]).toEqual(['/app/page?x=1', 'bob'])
    } finally {
      await context.close()
    }
  })
})

// A re-reading's finding: the address in the answer's headers is the original URL percent-encoded,
// past nginx's default buffer for them at a long address (nginx's 500, no page and no sign-in).
describe('the longest address behind the shipped nginx file', () => {
  const LONG = `/app/page?q=${'/'.repeat(1950)}`

  it('a refused person still gets the page with "Use another account"', async () => {
    const front = fronts.nginx
    if (front === undefined) return expect(frontBinary('nginx')).toBeUndefined()
    const browser = new Browser()
    expect((await browser.navigate(`${front.url}/app/`, { login: 'mallory' })).status).toBe(403)
    expect(`${front.url}${LONG}`.length).toBeLessThan(2048)
    const response = await browser.fetch(`${front.url}${LONG}`)
    expect(response.status).toBe(403)
    expect(await response.text()).toContain('Use another account')
  })

  it('a browser without a session is still sent to sign in, back to that address', async () => {
    const front = fronts.nginx
    if (front === undefined) return expect(frontBinary('nginx')).toBeUndefined()
    const response = await new Browser().fetch(`${front.url}${LONG}`)
    expect(response.status).toBe(302)
    expect(new URL(response.headers.get('location')!).searchParams.get('next')).toBe(`${front.url}${LONG}`)
  })
})

describe('a client refused behind the shipped nginx file', () => {
  it('gets nginx\'s own 403 when it is no browser: no page, no address', async () => {
    const front = fronts.nginx
    if (front === undefined) return expect(frontBinary('nginx')).toBeUndefined()
    const browser = new Browser()
    expect((await browser.navigate(`${front.url}/app/page`, { login: 'mallory' })).status).toBe(403)
    const response = await fetch(`${front.url}/app/page`, { headers: { accept: 'application/json', cookie: browser.cookieHeader(`${gateway.url}/`)! } })
    const body = await response.text()
    expect(response.status).toBe(403)
    expect(body).toContain('403 Forbidden')
    expect(body).not.toContain('/oauth/logout/')
  })
})

describe('the shipped nginx file without the line', () => {
  it('is refused: the gateway\'s 403 becomes nginx\'s own, and the application is never asked', async ({ upstream }) => {
    const front = fronts.nginxWithout
    if (front === undefined) return expect(frontBinary('nginx')).toBeUndefined()
    const before = upstream.seen.length
    const response = await fetch(`${front.url}/app/page`, { headers: { cookie } })
    await response.arrayBuffer()
    expect(response.status).toBe(403)
    expect(upstream.seen.length).toBe(before)
  })
})

describe('forwardAuth.proxySecret in gateway.yaml', () => {
  const OTHER = randomBytes(32).toString('base64')
  const file = (proxySecret: string | undefined, session: Record<string, unknown> = { secret: TEST_SECRET }, clientSecret = 's', previousProxySecrets?: string[]) => stringify({
    server: { baseUrl: 'https://auth.example.com', trustProxy: ['10.0.0.5'] },
    session,
    providers: { demo: { clientId: 'c', clientSecret, issuer: 'https://op.example.com', scope: 'openid' } },
    routes: [],
    forwardAuth: { proxySecret, previousProxySecrets },
  })

  it.each([
    ['short', 'x'.repeat(8), 'must be at least 32 characters, got 8'],
    ['a pattern repeated', 'abcd'.repeat(10), 'is a 4-character pattern repeated'],
    ['with a space', `${SECRET} x`, 'must be a secret of letters, digits and + / = . _ ~ -'],
    ['with a quote nginx would end the value at', `${SECRET}"`, 'must be a secret of letters, digits and + / = . _ ~ -'],
    ['with a `$` nginx would read as a variable', `${SECRET}$host`, 'must be a secret of letters, digits and + / = . _ ~ -'],
  ])('%s: refused at forwardAuth.proxySecret', (_case, value, message) => {
    expect(configProblems(file(value))).toEqual([expect.stringMatching(new RegExp(`^forwardAuth\\.proxySecret: ${message.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`))])
  })

  it('takes one made with openssl rand -base64 32', () => {
    expect(configProblems(file(SECRET))).toEqual([])
  })

  it('takes previous values beside it, held to the same rules', () => {
    expect(configProblems(file(SECRET, undefined, undefined, [PREVIOUS]))).toEqual([])
  })

  it.each([
    ['without a proxySecret', file(undefined, undefined, undefined, [PREVIOUS]), /^forwardAuth\.previousProxySecrets: needs forwardAuth\.proxySecret: previous values are only taken while/],
    ['the same as proxySecret', file(SECRET, undefined, undefined, [SECRET]), /^forwardAuth\.previousProxySecrets\[0\]: is the same as forwardAuth\.proxySecret: a previous secret must be the one it replaced/],
    ['repeated', file(SECRET, undefined, undefined, [PREVIOUS, PREVIOUS]), /^forwardAuth\.previousProxySecrets\[1\]: repeats an earlier entry/],
    ['short', file(SECRET, undefined, undefined, ['x'.repeat(8)]), /^forwardAuth\.previousProxySecrets\[0\]: must be at least 32 characters, got 8/],
    ['with a quote nginx would end the value at', file(SECRET, undefined, undefined, [`${PREVIOUS}"`]), /^forwardAuth\.previousProxySecrets\[0\]: must be a secret of letters, digits and \+ \/ = \. _ ~ -/],
    ['session.secret', file(SECRET, undefined, undefined, [TEST_SECRET]), /^forwardAuth\.previousProxySecrets\[0\]: is another secret of this file .*make one of its own/],
    ['five of them', file(SECRET, undefined, undefined, Array.from({ length: 5 }, () => randomBytes(32).toString('base64'))), /^forwardAuth\.previousProxySecrets: must be a list of at most 4 secrets/],
  ])('a previous value %s: refused', (_case, text, message) => {
    expect(configProblems(text)).toEqual([expect.stringMatching(message)])
  })

  // An outside tester's finding: a store password, which opens the session store itself, was taken.
  it.each([
    ['store.url\'s password', { type: 'redis', url: `redis://:${encodeURIComponent(SECRET)}@redis.internal:6379/0` }, [SECRET], 'forwardAuth.proxySecret'],
    // A re-reading's finding: ioredis also reads `?password=` from the URL.
    ['store.url\'s ?password=', { type: 'redis', url: `redis://redis.internal:6379/0?password=${encodeURIComponent(SECRET)}` }, [SECRET], 'forwardAuth.proxySecret'],
    ['a store.cluster node\'s password', { type: 'redis', cluster: [`redis://:${encodeURIComponent(SECRET)}@10.0.0.1:6379`] }, [SECRET], 'forwardAuth.proxySecret'],
    ['store.sentinel.password', { type: 'redis', sentinel: { name: 'm', nodes: ['10.0.0.1:26379'], password: SECRET } }, [SECRET], 'forwardAuth.proxySecret'],
    ['store.sentinel.sentinelPassword', { type: 'redis', sentinel: { name: 'm', nodes: ['10.0.0.1:26379'], sentinelPassword: SECRET } }, [SECRET], 'forwardAuth.proxySecret'],
    ['store.sentinel.password, as a previous value', { type: 'redis', sentinel: { name: 'm', nodes: ['10.0.0.1:26379'], password: SECRET } }, [OTHER, SECRET], 'forwardAuth.previousProxySecrets[0]'],
  ])('the same value as %s: refused', (_case, store, [proxySecret, previous], at) => {
    const text = stringify({ ...parse(file(proxySecret!, undefined, undefined, previous === undefined ? undefined : [previous])), store })
    expect(configProblems(text)).toEqual([expect.stringMatching(new RegExp(`^${at!.replace(/[.[\]]/g, '\\$&')}: is another secret of this file .*store password`))])
  })

  // An outside tester's finding: a proxy with the secret but outside server.trustProxy was answered
  // as a stranger, and forwardAuth.hosts' rules were skipped (200 with a token the host's rules refuse).
  it('refuses proxySecret and forwardAuth.hosts while server.trustProxy admits no proxy', () => {
    const untrusting = (forwardAuth: Record<string, unknown>, trustProxy?: unknown) => stringify({
      server: { baseUrl: 'https://auth.example.com', ...(trustProxy === undefined ? {} : { trustProxy }) },
      session: { secret: TEST_SECRET },
      providers: { demo: { clientId: 'c', clientSecret: 's', issuer: 'https://op.example.com', scope: 'openid' } },
      forwardAuth,
    })
    const hosts = { 'payroll.example.com': { deny: { users: ['alice'] } } }
    expect(configProblems(untrusting({ proxySecret: SECRET, hosts }))).toEqual([
      expect.stringMatching(/^forwardAuth\.proxySecret: needs server\.trustProxy to admit the proxy in front that sends it/),
      expect.stringMatching(/^forwardAuth\.hosts: needs server\.trustProxy to admit the proxy in front: only a trusted proxy's X-Forwarded-Host names the host/),
    ])
    expect(configProblems(untrusting({ hosts }, false))).toHaveLength(1)
    expect(configProblems(untrusting({ proxySecret: SECRET, hosts }, ['10.0.0.5']))).toEqual([])
    expect(configProblems(untrusting({ allowedRedirectHosts: ['app.example.com'] }))).toEqual([])
  })

  // An outside tester's finding: the proxy's configuration holds it (nginx's file, a ConfigMap), and
  // session.secret keys the stored sessions.
  it.each([
    ['session.secret', file(TEST_SECRET)],
    ['one of session.previousSecrets', file(SECRET, { secret: OTHER, previousSecrets: [SECRET] })],
    ['a provider\'s clientSecret', file(SECRET, { secret: TEST_SECRET }, SECRET)],
  ])('the same value as %s: refused', (_case, text) => {
    expect(configProblems(text)).toEqual([expect.stringMatching(/^forwardAuth\.proxySecret: is another secret of this file .*make one of its own/)])
  })
})
