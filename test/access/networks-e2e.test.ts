// `networks` rules end to end, with clients at different addresses (127.0.0.2, .3, .5: each its own
// loopback source address) through a real nginx in front, running docs/deployment.md's server block as
// written (its X-Forwarded-For appends to a client's own), with server.trustProxy naming it: the address
// judged is the client's, never one a client writes, and a client that reaches the gateway without the
// proxy is judged by its own address whatever X-Forwarded-For it sends. Forward-auth behind the
// docs' nginx snippet judges the address its X-Forwarded-For names. The 403 names the rule and the
// address; the refusals are counted by kind; a rule with only networks admits nobody without a session.
import { request } from 'node:http'
import { expect } from 'vitest'
import { frontBinary, startFrontProxy, startNginxInFront, type FrontProxy } from '../helpers/front-proxy.js'
import { sessionCookie, type TestGateway } from '../helpers/gateway.js'
import { metricValue } from '../helpers/metrics.js'
import { test as it } from '../helpers/stack.js'
import type { Upstream } from '../helpers/upstream.js'

const APP = 'app.example.com'
const missing = frontBinary('nginx') === undefined
if (missing) console.warn('!!! nginx not installed: the networks tests behind nginx are SKIPPED (.ci/run installs it) !!!')

interface Answer { status: number, body: string }

/** GET `path` on 127.0.0.1:`port` from the loopback address `from`, with these headers. */
async function get (port: number, path: string, from: string, headers: Record<string, string> = {}): Promise<Answer> {
  return await new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, localAddress: from, headers: { accept: 'application/json', ...headers } }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => { body += chunk })
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
    })
    req.on('error', reject)
    req.end()
  })
}

let gateway: TestGateway
let upstream: Upstream
let front: FrontProxy
let auth: FrontProxy
let cookie: string

it.beforeAll(async ({ startStack, upstream: echo }) => {
  if (missing) return
  upstream = echo
  gateway = await startStack({
    server: { trustProxy: ['127.0.0.1'] },
    routes: [{
      path: '/app/',
      upstream: echo.url,
      provider: 'demo',
      allow: [{ networks: ['127.0.0.2', '127.0.0.4/31'] }],
      deny: [{ networks: ['127.0.0.5'], paths: ['/app/admin/*'] }],
    }],
    forwardAuth: { hosts: { [APP]: { deny: [{ networks: ['127.0.0.3'] }] } } },
  })
  const address = `127.0.0.1:${gateway.config.server.port}`
  front = await startNginxInFront(address)
  auth = await startFrontProxy('nginx', { gateway: address, upstream: new URL(echo.url).host, host: APP })
  cookie = await sessionCookie(gateway, 'alice')
})

it.afterAll(async () => {
  await Promise.all([front?.stop(), auth?.stop()])
})

it.skipIf(missing)('through the proxy: admitted from an allowed address, refused from another, whatever X-Forwarded-For the client writes', async () => {
  const seen = upstream.seen.length
  expect(await get(front.port, '/app/x', '127.0.0.2', { cookie })).toMatchObject({ status: 200 })
  expect(await get(front.port, '/app/x', '127.0.0.4', { cookie })).toMatchObject({ status: 200 })
  const outside = await get(front.port, '/app/x', '127.0.0.3', { cookie })
  expect(outside.status).toBe(403)
  // Every allow rule names networks this address is not in: no account would pass from here, so none is offered (an operator's finding).
  const body = JSON.parse(outside.body) as Record<string, unknown>
  expect(body).toMatchObject({ error: 'forbidden', rule: null, address: '127.0.0.3', by_network: true, message: 'alice may not use this application from 127.0.0.3: no allow rule takes this address.' })
  expect(body.switch_account_url).toBeUndefined()
  const page = await get(front.port, '/app/x', '127.0.0.3', { cookie, accept: 'text/html' })
  expect(page.body).toContain('no allow rule takes this address')
  expect(page.body).toContain('Connect from a network its rules take')
  expect(page.body).not.toContain('Use another account')
  // The client's own X-Forwarded-For comes first in the proxy's: the address judged is the one the proxy saw.
  expect((await get(front.port, '/app/x', '127.0.0.3', { cookie, 'x-forwarded-for': '127.0.0.2' })).status).toBe(403)
  expect(upstream.seen.length - seen).toBe(2)
})

it.skipIf(missing)('a deny on networks and paths refuses there only, and its 403 says where from, offering no other account', async () => {
  expect((await get(front.port, '/app/x', '127.0.0.5', { cookie })).status).toBe(200)
  const refused = await get(front.port, '/app/admin/x', '127.0.0.5', { cookie })
  expect(refused.status).toBe(403)
  const body = JSON.parse(refused.body) as Record<string, unknown>
  expect(body).toMatchObject({ rule: 'deny[0]', address: '127.0.0.5', by_network: true })
  // Only the admin paths are refused from there: the message and the page name this request.
  expect(body.message).toBe('alice may not GET /app/admin/x from 127.0.0.5: the rule deny[0] refused; other requests to this application stay open to this account.')
  expect(body.refused_for).toEqual({ method: 'GET', path: '/app/admin/x' })
  expect(body.switch_account_url).toBeUndefined()
  const page = await get(front.port, '/app/admin/x', '127.0.0.5', { cookie, accept: 'text/html' })
  expect(page.body).toContain('<dt>Address</dt><dd>127.0.0.5</dd>')
  expect(page.body).toContain('the rule <code>deny[0]</code>, on where the request comes from')
  expect(page.body).not.toContain('Use another account')
  expect(gateway.logs.some((line) => line.includes('"url":"/app/admin/x"') && line.includes('"rule":"deny[0]"') && line.includes('"decision":"forbidden"'))).toBe(true)
})

it.skipIf(missing)('without the proxy: a client is its own address, and its X-Forwarded-For is not believed', async () => {
  const port = gateway.config.server.port
  expect((await get(port, '/app/x', '127.0.0.2', { cookie })).status).toBe(200)
  expect((await get(port, '/app/x', '127.0.0.3', { cookie, 'x-forwarded-for': '127.0.0.2' })).status).toBe(403)
  // The trusted proxy's own address, without X-Forwarded-For, is judged as itself.
  expect((await get(port, '/app/x', '127.0.0.1', { cookie })).status).toBe(403)
})

it.skipIf(missing)('a rule of networks only admits nobody without a session: the sign-in still comes first', async () => {
  const answer = await get(front.port, '/app/x', '127.0.0.2')
  expect(answer.status).toBe(401)
  expect(JSON.parse(answer.body)).toMatchObject({ error: 'unauthenticated' })
})

it.skipIf(missing)('forward-auth behind the docs\' nginx judges the address nginx names', async () => {
  const host = `${APP}:${auth.port}`
  expect((await get(auth.port, '/page', '127.0.0.2', { cookie, host })).status).toBe(200)
  expect((await get(auth.port, '/page', '127.0.0.3', { cookie, host })).status).toBe(403)
  expect((await get(auth.port, '/page', '127.0.0.3', { cookie, host, 'x-forwarded-for': '127.0.0.2' })).status).toBe(403)
})

it.skipIf(missing)('forward-auth asked by the trusted proxy with an X-Forwarded-For that names no address cannot tell the address either: a deny on networks holds', async () => {
  const port = gateway.config.server.port
  const asked = { cookie, 'x-forwarded-host': APP, 'x-forwarded-proto': 'http', 'x-forwarded-uri': '/page', 'x-forwarded-method': 'GET' }
  expect((await get(port, '/oauth/auth/demo/', '127.0.0.1', asked)).status).toBe(403)
  // proxy-addr skips empty entries and gives the proxy's own address, which the deny does not name (an outside tester's finding).
  for (const named of ['', ',', ' ', ' , ,']) expect((await get(port, '/oauth/auth/demo/', '127.0.0.1', { ...asked, 'x-forwarded-for': named })).status, JSON.stringify(named)).toBe(403)
  expect((await get(port, '/oauth/auth/demo/', '127.0.0.1', { ...asked, 'x-forwarded-for': '127.0.0.2' })).status).toBe(200)
})

it.skipIf(missing)('forward-auth\'s query networks= is a condition each query rule needs; one entry that is no network allows nobody', async () => {
  const port = gateway.config.server.port
  // As the proxy in front asks: from its own address, naming the client's.
  const ask = async (query: string, client: string): Promise<number> => (await get(port, `/oauth/auth/demo/${query}`, '127.0.0.1', { cookie, 'x-forwarded-for': client })).status
  expect(await ask('?networks=127.0.0.2', '127.0.0.2')).toBe(200)
  expect(await ask('?networks=127.0.0.2', '127.0.0.6')).toBe(403)
  expect(await ask('?networks=!127.0.0.0/30', '127.0.0.2')).toBe(403)
  expect(await ask('?networks=!127.0.0.0/30', '127.0.0.9')).toBe(200)
  expect(await ask('?groups=nobody&networks=127.0.0.2', '127.0.0.2')).toBe(403)
  expect(await ask('?emails=alice@example.com,x@y.z&networks=127.0.0.9', '127.0.0.2')).toBe(403)
  for (const hostile of ['10.1.2.3/8', '127.0.0.2,vpn', '', '127.0.0.2%00', '::ffff:127.0.0.2']) {
    expect([hostile, await ask(`?networks=${encodeURIComponent(hostile)}`, '127.0.0.2')]).toEqual([hostile, 403])
  }
})

it.skipIf(missing)('refusals are counted by route and by what refused, never by value', async () => {
  const metrics = await (await fetch(`${gateway.url}/metrics`)).text()
  expect(metricValue(metrics, 'gateway_rule_refusals_total{route="/app",refused_by="no_allow_rule"}')).toBe(5)
  expect(metricValue(metrics, 'gateway_rule_refusals_total{route="/app",refused_by="paths+networks"}')).toBe(2)
  // 2 behind nginx, and the 5 asked with no address named.
  expect(metricValue(metrics, 'gateway_rule_refusals_total{route="forward-auth",refused_by="networks"}')).toBe(7)
  // The query's rules are allow rules: their refusals are no_allow_rule (4, and the 5 hostile values).
  expect(metricValue(metrics, 'gateway_rule_refusals_total{route="forward-auth",refused_by="no_allow_rule"}')).toBe(9)
  expect(metrics).not.toMatch(/gateway_rule_refusals_total\{[^}]*127\.0\.0/)
})
