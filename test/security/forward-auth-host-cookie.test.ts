// The forward-auth snippets shipped in the docs (docs/forward-auth/nginx.conf and Caddyfile), run by
// the real nginx and the real Caddy in front of payroll.example.com, which forwardAuth.hosts alone
// guards (admins only). The host the gateway judges is the host the proxy serves: bob, no admin,
// never reaches payroll's application by writing another Host (issue: nginx served its only server
// for any Host and sent the client's Host as X-Forwarded-Host, whose absent rules let bob in). And
// the application never receives the gateway's session cookie: not a second one after the first
// (issue: only the first was taken out), not behind a long run of spaces (issue: nginx's map hit
// PCRE's match limit and passed the whole header), while its own cookies still arrive. Nor any other
// cookie the gateway sets (flow, sign-out, form, agent, the agents' server's and their .sig: the
// snippets took out the session cookie only), alone, several at once or with spaces; a header of
// gateway cookies only leaves no Cookie header (Caddy sent an empty one). Last, a property: what
// the proxy takes out agrees with what the gateway reads as its cookies.
import { createServer, type Server } from 'node:http'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { GatewayConfig } from '../../src/config/types.js'
import { allCookieNames } from '../../src/oauth/urls.js'
import { cookieValue } from '../../src/session/cookie.js'
import { frontBinary, startFrontProxy, type FrontKind, type FrontProxy } from '../helpers/front-proxy.js'
import { sessionCookie, startForwardAuthGateway, type TestGateway } from '../helpers/gateway.js'
import { close, listen } from '../helpers/net.js'
import type { TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { rawRequest } from '../helpers/raw-http.js'

const PAYROLL = 'payroll.example.com'
const FRONTS: FrontKind[] = ['nginx', 'caddy']
/** The cookies the gateway sets with the test's session.cookieName (gw_session); beforeAll checks the gateway agrees. */
const GATEWAY_COOKIES = allCookieNames({ session: { cookieName: 'gw_session' } } as Pick<GatewayConfig, 'session'>)
const missing = FRONTS.filter((kind) => !frontBinary(kind))
if (missing.length > 0) {
  console.warn(`!!! ${missing.join(' and ')} not installed: the snippet host and cookie tests behind ${missing.join(' and ')} are SKIPPED (.ci/run installs them) !!!`)
}

/** An application that answers the headers it received as JSON, and counts its requests. */
interface EchoUpstream { url: string, requests: number, close (): Promise<void> }

async function startEchoUpstream (): Promise<EchoUpstream> {
  const upstream = { url: '', requests: 0, close: async () => {} }
  const server: Server = createServer((req, res) => {
    upstream.requests++
    const body = JSON.stringify({ app: true, headers: req.headers })
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) })
    res.end(body)
  })
  upstream.url = await listen(server)
  upstream.close = async () => await close(server)
  return upstream
}

interface Answer { status: number, body: string }

/** `GET /pay` through `port` with exactly this Host line and these header lines (0: closed without an answer). */
async function request (port: number, host: string, lines: string[]): Promise<Answer> {
  return await rawRequest(port, '/pay', lines, { host })
}

/** The Cookie header the application received, from its JSON answer. */
function appCookie (answer: Answer): string | undefined {
  expect(answer.status, answer.body).toBe(200)
  return (JSON.parse(answer.body) as { headers: Record<string, string> }).headers.cookie
}

let redis: TestRedis
let op: TestProvider
let app: EchoUpstream
let gateway: TestGateway
/** Each user's gateway session cookie, `gw_session=...`. */
const sessions: Record<'alice' | 'bob', string> = { alice: '', bob: '' }
const fronts: Partial<Record<FrontKind, { front: FrontProxy, port: number }>> = {}

beforeAll(async () => {
  redis = await startRedis()
  app = await startEchoUpstream()
  ;({ gateway, op } = await startForwardAuthGateway(redis.url, {
    // Payroll is guarded by its host's rules only, as docs/forward-auth.md recommends.
    forwardAuth: { allowedRedirectHosts: [PAYROLL], hosts: { [PAYROLL]: { allow: { groups: ['admins'] } } } },
    assertion: {},
  }))
  for (const login of ['alice', 'bob'] as const) sessions[login] = await sessionCookie(gateway, login)
  // The table of the gateway's other cookies below is written before the gateway starts: its names must be the gateway's.
  expect(allCookieNames(gateway.config)).toEqual(GATEWAY_COOKIES)
  for (const kind of FRONTS.filter((name) => !missing.includes(name))) {
    const front = await startFrontProxy(kind, { gateway: `127.0.0.1:${gateway.config.server.port}`, upstream: new URL(app.url).host, host: PAYROLL })
    fronts[kind] = { port: front.port, front }
  }
})

afterAll(async () => {
  await Promise.all(Object.values(fronts).map(async ({ front }) => await front.stop()))
  await gateway?.close()
  await Promise.all([op?.close(), app?.close()])
  await redis?.release()
})

describe.each(FRONTS)('the docs\' %s snippet serving payroll.example.com (forwardAuth.hosts: admins only)', (kind) => {
  const through = async (host: string, lines: string[]) => await request(fronts[kind]!.port, host, lines)

  it.skipIf(missing.includes(kind))('lets alice (admins) in and refuses bob with payroll\'s Host', async () => {
    expect((await through(PAYROLL, [`Cookie: ${sessions.alice}`])).status).toBe(200)
    const before = app.requests
    expect((await through(PAYROLL, [`Cookie: ${sessions.bob}`])).status).toBe(403)
    expect(app.requests).toBe(before)
  })

  it.skipIf(missing.includes(kind)).each([
    // Hosts the proxy does not serve: nothing reaches the gateway's judgement or the application.
    'other.example.com',
    'x',
    `${PAYROLL}@x`,
    `x@${PAYROLL}`,
    `${PAYROLL}.evil.net`,
    `evil.net.${PAYROLL}x`,
    '127.0.0.1',
    'localhost',
    '[::1]',
    // Spellings of payroll the proxy serves as payroll: then the gateway judges payroll (403).
    'PAYROLL.example.COM',
    `${PAYROLL}.`,
    `${PAYROLL}:1`,
    `${PAYROLL}:80`,
  ])('never lets bob reach the application with Host %j', async (host) => {
    const before = app.requests
    const answer = await through(host, [`Cookie: ${sessions.bob}`])
    expect(app.requests).toBe(before)
    expect(answer.body).not.toContain('"app":true')
    // nginx closes a connection for a name it does not serve (444); Caddy answers an empty 200 from no site.
    if (answer.status === 200) expect([kind, answer.body]).toEqual(['caddy', ''])
  })
})

describe.each(FRONTS)('the docs\' %s snippet and the gateway\'s session cookie', (kind) => {
  const through = async (lines: string[]) => await request(fronts[kind]!.port, PAYROLL, lines)
  const spaces = ' '.repeat(4000)

  it.skipIf(missing.includes(kind)).each([
    ['before the application\'s cookies', (s: string) => `${s}; app=1; theme=dark`, 'app=1; theme=dark'],
    ['between them', (s: string) => `app=1; ${s}; theme=dark`, 'app=1; theme=dark'],
    ['after them', (s: string) => `app=1; theme=dark; ${s}`, 'app=1; theme=dark'],
  ])('takes it out %s, and the application\'s own cookies arrive', async (_where, header, expected) => {
    expect(appCookie(await through([`Cookie: ${header(sessions.alice)}`]))).toBe(expected)
  })

  it.skipIf(missing.includes(kind)).each([
    // Two values of the session cookie (a victim's, or one a sibling host planted under a shared
    // cookieDomain) open nothing: which is the person's cannot be told. The application gets nothing.
    ['a duplicate', (s: string) => `${s}; gw_session=VICTIM`],
    ['a duplicate without a space', (s: string) => `${s};gw_session=VICTIM`],
    ['a duplicate among other cookies', (s: string) => `app=1; ${s}; theme=dark; gw_session=VICTIM; last=2`],
    ['a duplicate with a space before its `=`', (s: string) => `${s}; gw_session =VICTIM`],
    ['a duplicate after a tab', (s: string) => `${s};\tgw_session=VICTIM`],
    ['a duplicate right after the first one\'s value', (s: string) => `${s};  gw_session=VICTIM;`],
    ['three of them', (s: string) => `${s}; gw_session=VICTIM; gw_session=VICTIM`],
    ['a long run of spaces and a duplicate', (s: string) => `${s}; pad=a${spaces}b; gw_session=VICTIM`],
  ])('refuses the session cookie with %s, and the application gets nothing', async (_name, header) => {
    const before = app.requests
    const answer = await through([`Cookie: ${header(sessions.alice)}`])
    expect(answer.status).toBe(401)
    expect(app.requests).toBe(before)
  })

  it.skipIf(missing.includes(kind)).each([
    // A long run of spaces: nginx's PCRE stopped at its match limit and passed the whole header.
    ['a long run of spaces before it', (s: string) => `pad=a${spaces}b; ${s}`],
    ['a long run of spaces after it', (s: string) => `${s}; pad=a${spaces}b`],
    ['a long run of spaces before its name', (s: string) => `pad=a;${spaces}${s}; app=1`],
  ])('never passes the session cookie with %s', async (_name, header) => {
    const value = sessions.alice.slice('gw_session='.length)
    const cookie = appCookie(await through([`Cookie: ${header(sessions.alice)}`])) ?? ''
    expect(cookie).not.toContain('gw_session')
    expect(cookie).not.toContain(value)
  })

  it.skipIf(missing.includes(kind))('refuses the session cookie in a second Cookie header line too (the proxy joins the lines)', async () => {
    const before = app.requests
    expect((await through([`Cookie: ${sessions.alice}`, 'Cookie: gw_session=VICTIM; app=1'])).status).toBe(401)
    expect(app.requests).toBe(before)
  })
})

const LONG = ' '.repeat(4000)

/** A Cookie header around alice's session cookie `s`, and what the application must get of it (undefined: no Cookie header). */
const OTHER_COOKIES: Array<[string, (s: string) => string, string | undefined]> = [
  ...GATEWAY_COOKIES.filter((name) => name !== 'gw_session').map((name): [string, (s: string) => string, string] =>
    [`${name} beside the application's cookies`, (s) => `app=1; ${name}=OURS; theme=dark; ${s}`, 'app=1; theme=dark']),
  ['the session cookie and three others at once', (s) => `${s}; gw_session_form=OURS; app=1; gw_session_flow=OURS; theme=dark; gw_session_agent=OURS`, 'app=1; theme=dark'],
  ['four with spaces around their names', (s) => `gw_session_signout =OURS;app=1;\tgw_session_as.sig\t=OURS ; ${s};  gw_session_as_resume  = OURS; theme=dark`, 'app=1; theme=dark'],
  ['gateway cookies only', (s) => `${s}; gw_session_form=OURS`, undefined],
  ['the session cookie only', (s) => s, undefined],
  // The namespace the snippets' comments give away: gw_session_ and any name characters.
  ['names the gateway does not set but its namespace holds', (s) => `gw_session_mine=OURS; app=1; ${s}; gw_session_=OURS`, 'app=1'],
  // Not the gateway's, and outside that namespace: they stay.
  ['names beside its namespace', (s) => `gw_sessionx=1; ${s}; xgw_session=2; gw_session_form=OURS; gw_session.sig=3; GW_SESSION_FORM=4`, 'gw_sessionx=1; xgw_session=2; gw_session.sig=3; GW_SESSION_FORM=4'],
  ['a long run of spaces before one\'s name', (s) => `app=1;${LONG}gw_session_form=OURS; theme=dark; ${s}`, 'app=1; theme=dark'],
  ['a long run of spaces before one\'s `=`', (s) => `gw_session_as_interaction.sig${LONG}=OURS; app=1; ${s}`, 'app=1'],
  ['a long name in the namespace', (s) => `${s}; gw_session_${'a'.repeat(4000)}=OURS; app=1`, 'app=1'],
  ['a long run of spaces and three more', (s) => `${s}; pad=a${LONG}b; gw_session_agent=OURS; gw_session_signout=OURS;gw_session_as.sig=OURS; app=1`, `pad=a${LONG}b; app=1`],
]

describe.each(FRONTS)('the docs\' %s snippet and the gateway\'s other cookies', (kind) => {
  const through = async (lines: string[]) => await request(fronts[kind]!.port, PAYROLL, lines)

  it.skipIf(missing.includes(kind)).each(OTHER_COOKIES)('takes out %s, and the application\'s own cookies arrive', async (_name, header, expected) => {
    const cookie = appCookie(await through([`Cookie: ${header(sessions.alice)}`]))
    expect(cookie).toBe(expected)
    expect(cookie ?? '').not.toContain(sessions.alice.slice('gw_session='.length))
  })

  it.skipIf(missing.includes(kind))('takes out five at once: nginx sends no Cookie header (it fails closed), Caddy the application\'s', async () => {
    const header = `${sessions.alice}; gw_session_form=OURS; app=1; gw_session_flow=OURS; gw_session_agent=OURS; gw_session_signout=OURS`
    expect(appCookie(await through([`Cookie: ${header}`]))).toBe(kind === 'nginx' ? undefined : 'app=1')
  })

  it.skipIf(missing.includes(kind))('takes them out of every Cookie header line', async () => {
    const cookie = appCookie(await through([`Cookie: ${sessions.alice}; gw_session_form=OURS`, 'Cookie: gw_session_agent=OURS; app=1'])) ?? ''
    expect(cookie).not.toContain('OURS')
    expect(cookie).not.toContain('gw_session')
    // nginx joins the lines; Caddy leaves the first one empty (it cannot drop a line of several), and Node joins them.
    expect(cookie).toBe(kind === 'nginx' ? 'app=1' : '; app=1')
  })
})

/** What the snippets take out, as their comments say: a cookie whose name, spaces around it trimmed, is gw_session or gw_session_ and any characters but spaces, `;` and `=`. */
const SNIPPET_NAMESPACE = /^gw_session(?:_[^\s;=]*)?$/
/** Cookie names the gateway does not read as its own: one in its namespace, the others not. */
const OTHER_NAMES = ['gw_session_mine', 'app', 'theme', 'gw_sessions', 'xgw_session', 'gw', 'GW_SESSION', 'gw_session.sig', 'gw_sessionx_form']
/** How many gateway cookies nginx's maps take out of a header; with more, it sends no Cookie header. */
const NGINX_STEPS = 4

/** What the application must get of a header whose cookies have these values (`taken`: those the snippets take out). */
function expectReceived (kind: FrontKind, header: string, values: string[], taken: boolean[], received: string | undefined): void {
  const count = taken.filter(Boolean).length
  const failsClosed = kind === 'nginx' && count > NGINX_STEPS
  values.forEach((value, i) => {
    if (taken[i]) expect(received ?? '').not.toContain(value)
    else if (!failsClosed) expect(received).toContain(value)
  })
  if (count === 0) expect(received).toBe(header)
  if (count === values.length || failsClosed) expect(received).toBeUndefined()
}

describe.each(FRONTS)('the docs\' %s snippet and the gateway agree on which cookie is the gateway\'s (fast-check)', (kind) => {
  let auth: Server
  let front: FrontProxy
  let port: number

  beforeAll(async () => {
    if (missing.includes(kind)) return
    // A gateway that lets every request in: only the Cookie header is under test here.
    auth = createServer((_req, res) => {
      res.writeHead(200, { 'x-forwarded-user': 'bob' })
      res.end()
    })
    const authUrl = await listen(auth)
    front = await startFrontProxy(kind, { gateway: new URL(authUrl).host, upstream: new URL(app.url).host })
    port = front.port
  })

  afterAll(async () => {
    await front?.stop()
    if (auth) await close(auth)
  })

  it.skipIf(missing.includes(kind))('never passes a cookie the gateway reads as its own, and passes the others while nginx\'s steps suffice', async () => {
    const own = allCookieNames(gateway.config)
    const segment = fc.record({
      name: fc.oneof(fc.constantFrom(...own.flatMap((name, i) => [name, [` ${name}`, `${name} `, `\t${name}`, ` ${name}\t`][i % 4]!])), fc.constantFrom(...OTHER_NAMES)),
      // The long run at most seven times: the header stays within nginx's 8 KB line.
      gap: fc.constantFrom(';', '; ', ';  ', ';\t', ' ; ', `;${' '.repeat(1000)}`),
    })
    await fc.assert(fc.asyncProperty(fc.array(segment, { minLength: 1, maxLength: 8 }), async (segments) => {
      const values = segments.map((_, i) => `v${i}x`)
      const header = segments.map(({ name, gap }, i) => `${i === 0 ? '' : gap}${name}=${values[i]}`).join('')
      // The gateway's reading, segment by segment (a header of that one cookie names one of its own or not).
      const ours = segments.map(({ name }) => own.some((ownName) => cookieValue(`${name}=x`, ownName) !== undefined))
      const taken = segments.map(({ name }) => SNIPPET_NAMESPACE.test(name.trim()))
      ours.forEach((isOurs, i) => { if (isOurs) expect(taken[i], segments[i]!.name).toBe(true) })
      expectReceived(kind, header, values, taken, appCookie(await request(port, `127.0.0.1:${port}`, [`Cookie: ${header}`])))
    }), { numRuns: 60 })
  })
})
