// Where a held stream meets other parts (re-readings' findings, each failing on the code of its
// day): a person's own download must go on when a sign-in in another tab renames their session
// (only event streams are held for a browser: a rename ends the old id); an agent's request with an
// Upgrade header that is no websocket its route takes over (h2c, any other, or a websocket upgrade
// on a route nested under a websocket route) is answered as HTTP and must be held like any other;
// an upstream's two Content-Type lines (a list) must not turn a signed-in person's answer into a 502.
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { connect } from 'node:net'
import { createServer, type Server } from 'node:http'
import { afterAll, describe, expect } from 'vitest'
import { agentGrant } from '../helpers/agent-grant.js'
import { signIn } from '../helpers/browser.js'
import type { TestGateway } from '../helpers/gateway.js'
import { waitFor } from '../helpers/net.js'
import { test as it } from '../helpers/stack.js'

let gateway: TestGateway
let odd: Server
const operations = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8')
/** The odd upstream's `/hold` requests, which it never answers, and whether their connection closed. */
const holding: Array<{ url: string, closed: boolean }> = []

it.beforeAll(async ({ startStack, upstream }) => {
  odd = createServer((req, res) => {
    if (req.url?.endsWith('/part')) {
      // A small body of declared length, which the gateway reads whole, of which a tenth comes.
      const entry = { url: req.url, closed: false }
      res.on('close', () => { entry.closed = true })
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '100' })
      res.write('x'.repeat(10), () => { holding.push(entry) })
      return
    }
    if (req.url?.endsWith('/hold')) {
      const entry = { url: req.url, closed: false }
      holding.push(entry)
      res.on('close', () => { entry.closed = true })
      return
    }
    // Two Content-Type lines and a declared length: what some frameworks' middlewares send.
    res.writeHead(200, [['content-type', 'text/plain'], ['content-type', 'text/plain; charset=utf-8'], ['content-length', '5']])
    res.end('hello')
  })
  await new Promise<void>((resolve) => odd.listen(0, '127.0.0.1', resolve))
  const oddUrl = `http://127.0.0.1:${(odd.address() as { port: number }).port}`
  gateway = await startStack({
    server: { trustProxy: ['127.0.0.1'] },
    routes: [
      { path: '/app/', upstream: upstream.url, provider: 'demo' },
      { path: '/admin/', upstream: upstream.url, provider: 'demo', reauth: { maxAge: '5m' } },
      { path: '/mcp', upstream: upstream.url, provider: 'demo', agents: true },
      { path: '/odd/', upstream: oddUrl, provider: 'demo' },
      { path: '/ws', upstream: upstream.url, provider: 'demo', agents: true, websocket: true },
      { path: '/ws/files', upstream: upstream.url, provider: 'demo', agents: true },
      // Long timeouts, as an MCP route's (docs/agents.md): what a client that left held until then.
      { path: '/held/', upstream: oddUrl, provider: 'demo', timeout: '10m' },
      { path: '/one/', upstream: oddUrl, auth: 'none', timeout: '10m', maxConnections: 1 },
    ],
  })
})

afterAll(async () => {
  await new Promise((resolve) => { odd?.closeAllConnections(); odd?.close(resolve) })
})

/** Reads `/…/stream`'s first chunk; `next` settles with 'went on' (the upstream's last chunk came) or 'cut'. */
async function openStream (url: string, headers: Record<string, string>): Promise<{ next: Promise<string> }> {
  const response = await fetch(url, { headers })
  expect(response.status).toBe(200)
  const reader = response.body!.getReader()
  expect(new TextDecoder().decode((await reader.read()).value)).toBe('first,')
  const rest = async (): Promise<string> => {
    let text = ''
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) text += new TextDecoder().decode(chunk.value)
    return text === 'last' ? 'went on' : `ended with ${JSON.stringify(text)}`
  }
  return { next: rest().catch(() => 'cut') }
}

/** The same, with a raw socket (fetch will not send an Upgrade header): 'went on' or 'cut'. */
async function openRaw (path: string, lines: string[]): Promise<{ next: Promise<string> }> {
  const socket = connect(gateway.config.server.port, '127.0.0.1')
  socket.setEncoding('latin1')
  let data = ''
  let firstSeen!: () => void
  const first = new Promise<void>((resolve) => { firstSeen = resolve })
  const closed = new Promise<string>((resolve) => {
    socket.on('data', (chunk: string) => {
      data += chunk
      if (data.includes('first,')) firstSeen()
    })
    socket.on('error', () => resolve('cut'))
    socket.on('close', () => resolve(/\r\n0\r\n\r\n$/.test(data) && data.includes('last') ? 'went on' : 'cut'))
  })
  socket.write([`GET ${path} HTTP/1.1`, `Host: 127.0.0.1:${gateway.config.server.port}`, ...lines, ...(lines.some((line) => /^connection:/i.test(line)) ? [] : ['Connection: close']), '', ''].join('\r\n'))
  await first
  expect(data).toMatch(/^HTTP\/1\.1 200/)
  return { next: closed }
}

async function signOutEverywhere (cookie: string): Promise<void> {
  const response = await fetch(`${gateway.url}/oauth/logout/?everywhere=1`, { method: 'POST', redirect: 'manual', headers: { accept: 'application/json', cookie } })
  await response.arrayBuffer()
  expect(response.status).toBeLessThan(400)
}

describe('a person\'s own download in flight', () => {
  it('control: goes on when nothing happens to its session', async ({ upstream }) => {
    const { cookie } = await signIn(`${gateway.url}/oauth/login/demo/?next=/app/`, 'seam-downloader-0')
    const download = await openStream(`${gateway.url}/app/files/stream`, { cookie })
    upstream.release()
    expect(await download.next).toBe('went on')
  })

  it('goes on when the same person steps up for another route in another tab (the session is renamed, not ended)', async ({ upstream }) => {
    const { browser, cookie } = await signIn(`${gateway.url}/oauth/login/demo/?next=/app/`, 'seam-downloader')
    const download = await openStream(`${gateway.url}/app/files/stream`, { cookie })
    // Another tab of the same browser: /admin/ asks for a fresh sign-in (reauth), of the same person.
    const landed = await browser.navigate(`${gateway.url}/oauth/login/demo/?next=/admin/`, { login: 'seam-downloader' })
    expect(landed.status).toBe(200)
    expect(browser.cookies.get('gw_session')!.value).not.toBe(cookie.split('=')[1])
    upstream.release()
    expect(await download.next).toBe('went on')
  })
})

describe('an agent\'s stream', () => {
  it('control: without an Upgrade header it is cut when its person signs out everywhere', async ({ upstream }) => {
    const { tokens } = await agentGrant(gateway.url, 'seam-agent-a', `${gateway.url}/mcp`)
    const stream = await openRaw('/mcp/stream', [`Authorization: Bearer ${tokens.access_token}`])
    const person = await signIn(`${gateway.url}/oauth/login/demo/?next=/app/`, 'seam-agent-a')
    await signOutEverywhere(person.cookie)
    upstream.release()
    expect(await stream.next).toBe('cut')
  })

  // The last row: a websocket upgrade to a route nested under a websocket route, which answers it as HTTP.
  it.for([
    ['Upgrade: h2c (no Connection: upgrade)', ['Upgrade: h2c'], '/mcp'],
    ['Connection: Upgrade, Upgrade: foo', ['Upgrade: foo', 'Connection: Upgrade'], '/mcp'],
    ['a websocket upgrade on a route nested under a websocket route', ['Upgrade: websocket', 'Connection: Upgrade', 'Sec-WebSocket-Version: 13', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=='], '/ws/files'],
  ] as Array<[string, string[], string]>)('with %s it is still cut when its person signs out everywhere', async ([, extra, route], { upstream }) => {
    const login = `seam-agent-${extra.length}`
    const { tokens } = await agentGrant(gateway.url, login, `${gateway.url}${route}`)
    const stream = await openRaw(`${route}/stream`, [`Authorization: Bearer ${tokens.access_token}`, ...extra])
    const person = await signIn(`${gateway.url}/oauth/login/demo/?next=/app/`, login)
    await signOutEverywhere(person.cookie)
    // The grant's session is gone: a new request with the token is refused...
    const after = await fetch(`${gateway.url}${route}/x`, { headers: { authorization: `Bearer ${tokens.access_token}`, accept: 'application/json' } })
    await after.arrayBuffer()
    expect(after.status).toBe(401)
    upstream.release()
    // ...and so should the stream it opened before be.
    expect(await stream.next).toBe('cut')
  })
})

describe('an upstream that sends Content-Type twice with a Content-Length', () => {
  it('is answered to a signed-in person as to anyone (not 502)', async () => {
    const { cookie } = await signIn(`${gateway.url}/oauth/login/demo/?next=/app/`, 'seam-odd')
    const response = await fetch(`${gateway.url}/odd/page`, { headers: { cookie } })
    const body = await response.text()
    expect(response.status, body).toBe(200)
    expect(body).toBe('hello')
  })
})

// An attacker's finding: a client that left before the upstream answered left the upstream's
// request, and the connection of the route's pool it held, to the route's timeout (10 minutes here).
describe('a client that leaves before the answer', () => {
  /** Sends GET `path` on a socket of its own, waits until the upstream holds it, and goes away. */
  async function leave (path: string, cookie?: string): Promise<{ url: string, closed: boolean }> {
    const before = holding.length
    const socket = connect(gateway.config.server.port, '127.0.0.1', () => {
      socket.write([`GET ${path} HTTP/1.1`, 'Host: 127.0.0.1', ...(cookie === undefined ? [] : [`Cookie: ${cookie}`]), '', ''].join('\r\n'))
    })
    socket.on('error', () => {})
    await waitFor(async () => holding.length > before, 10_000, `the upstream to get ${path}`)
    socket.destroy()
    return holding[before]!
  }

  it.each([
    ['a signed-in person\'s, on a protected route', '/held/hold', true],
    ['anyone\'s, on a public route', '/one/hold', false],
  ])('%s: the upstream\'s request is let go, its connection closed', async (_what, path, signedIn) => {
    const cookie = signedIn ? (await signIn(`${gateway.url}/oauth/login/demo/?next=/oauth/`, 'leaver')).cookie : undefined
    const held = await leave(path, cookie)
    await waitFor(async () => held.closed, 10_000, 'the upstream\'s connection of a request whose client left to close')
  })

  // An attacker's finding: such a request, admitted and sent upstream, wrote no line, and so no audit fields.
  it('is written down: one line with its audit fields, status 499; and one that leaves during the answer, with the status begun', async () => {
    const { cookie } = await signIn(`${gateway.url}/oauth/login/demo/?next=/oauth/`, 'auditee')
    const lines = (url: string) => gateway.logs.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.url === url)
    await leave('/held/audit/hold', cookie)
    await waitFor(async () => lines('/held/audit/hold').length > 0, 10_000, 'the line of a request whose client left')
    expect(lines('/held/audit/hold')).toEqual([expect.objectContaining({ msg: 'request abandoned: the client went away before the answer', statusCode: 499, decision: 'allow', user: 'auditee' })])
    const controller = new AbortController()
    const response = await fetch(`${gateway.url}/app/audit/stream`, { headers: { cookie }, signal: controller.signal })
    await response.body!.getReader().read()
    controller.abort()
    await waitFor(async () => lines('/app/audit/stream').length > 0, 10_000, 'the line of a request whose client left during the answer')
    expect(lines('/app/audit/stream')).toEqual([expect.objectContaining({ msg: 'request abandoned: the client went away during the answer', statusCode: 200, decision: 'allow', user: 'auditee' })])
    // An operator's reading: the audit filter operations.md gives ("Who opened /admin/ yesterday"), run with jq, selects both.
    const block = /```sh\n([\s\S]*?)```/.exec(operations.slice(operations.indexOf('"Who opened `/admin/` yesterday')))![1]!
    const [, flag, filter] = /^jq (-\w) '([\s\S]*?)' gateway-[\d-]+\.log/.exec(block)!
    const selected = (prefix: string) => execFileSync('jq', [flag!, filter!.replace('"/admin/"', `"${prefix}"`)], { input: `${gateway.logs.join('\n')}\n`, encoding: 'utf8' })
      .split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.user === 'auditee')
    expect(selected('/held/').map((line) => line.url)).toEqual(['/held/audit/hold'])
    expect(selected('/app/').map((line) => line.url)).toEqual(['/app/audit/stream'])
  })

  // An attacker's finding: a client that left while a small answer was read whole wrote no line,
  // and the upstream's connection was held to the route's timeout (10 minutes here).
  it('while a small answer is read whole: the upstream\'s answer is let go, and one line is written', async () => {
    const held = await leave('/one/audit/part')
    await waitFor(async () => held.closed, 10_000, 'the upstream\'s connection of an answer whose client left to close')
    const written = () => gateway.logs.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.url === '/one/audit/part')
    await waitFor(async () => written().length > 0, 10_000, 'the line of a request whose client left during the read')
    expect(written()).toEqual([expect.objectContaining({ msg: 'request abandoned: the client went away before the answer', statusCode: 499 })])
  })

  it('frees its connection of the pool: the next client of a route with maxConnections 1 is answered', async () => {
    await leave('/one/hold')
    const response = await fetch(`${gateway.url}/one/next`, { signal: AbortSignal.timeout(10_000) })
    expect(response.status).toBe(200)
    expect(await response.text()).toBe('hello')
  })
})
