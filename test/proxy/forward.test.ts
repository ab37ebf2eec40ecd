// What the route's forwarder (src/proxy/forward.ts) does with an upstream's answer beyond passing
// it on, through a real gateway and a real node:http upstream: an answer is sent once (a GET
// answered 503 is not retried behind the client's back), a status above 599 is 502, interim
// answers (102, 103) are not taken for the answer, a 304 or 204 is passed on though the upstream
// declared a length for it, two Location headers are both mapped back under
// the route, a connection whose request body was not all read is closed after the answer, and a
// client that has gone lets go of the upstream's answer.
import { createServer, get, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, type TestGateway } from '../helpers/gateway.js'
import { close, listen } from '../helpers/net.js'

/** How long the route waits for its upstream: the bound of every wait below. */
const TIMEOUT_MS = 5000

let upstream: Server
let gateway: TestGateway
const asked: string[] = []
/** Resolved with the upstream's response to /app/endless when it closes (the gateway let it go). */
let endlessClosed: Promise<boolean>

beforeAll(async () => {
  let closed: (finished: boolean) => void = () => {}
  endlessClosed = new Promise((resolve) => { closed = resolve })
  upstream = createServer((request: IncomingMessage, response: ServerResponse) => {
    asked.push(request.url!)
    if (request.url === '/app/busy') {
      response.writeHead(503, { 'content-type': 'text/plain', 'retry-after': '1' }).end('busy')
    } else if (request.url === '/app/not-modified') {
      // RFC 9110 8.6: a 304 may carry the Content-Length the 200 would have had; it has no body.
      response.writeHead(304, { etag: '"v1"', 'content-length': '5' }).end()
    } else if (request.url === '/app/no-content') {
      // Not allowed on a 204 (RFC 9110 8.6), sent all the same by some servers: still no body.
      response.writeHead(204, { 'content-length': '5' }).end()
    } else if (request.url === '/app/odd-status') {
      response.writeHead(799, { 'content-type': 'text/plain' }).end('odd')
    } else if (request.url === '/app/interim') {
      response.writeProcessing()
      response.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' })
      response.writeHead(200, { 'content-type': 'text/plain', 'content-length': '5' }).end('final')
    } else if (request.url?.startsWith('/inner/two-locations')) {
      // Chunked (no declared length): the body streams.
      response.setHeader('location', ['/inner/a', '/inner/b'])
      response.writeHead(302, { 'content-type': 'text/plain' }).end('moved')
    } else if (request.url === '/app/endless') {
      // Streams until the other side goes: a chunk every 10 ms.
      response.writeHead(200, { 'content-type': 'text/plain' })
      const timer = setInterval(() => response.write('x'), 10)
      response.once('close', () => {
        clearInterval(timer)
        closed(response.writableFinished)
      })
    } else {
      // Answers at once, without reading the request's body.
      response.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' }).end('ok')
    }
  })
  const url = await listen(upstream)
  gateway = await startGateway({
    store: { type: 'memory' },
    routes: [
      { path: '/app/', upstream: url, auth: 'none', timeout: `${TIMEOUT_MS}ms` },
      { path: '/mapped/', upstream: url, auth: 'none', rewritePrefix: '/inner/', timeout: `${TIMEOUT_MS}ms` },
    ],
  })
})

afterAll(async () => {
  await gateway?.close()
  if (upstream) await close(upstream)
})

/**
 * Writes `head` (and `body`) on a socket of its own; resolves with all the gateway sent once it has
 * closed the connection. Not rawRequest (test/helpers/raw-http.ts): that one asks for
 * `Connection: close` itself, which is what the test must see the gateway choose.
 */
async function exchange (head: string, body = ''): Promise<string> {
  return await new Promise((resolve, reject) => {
    const socket = connect(Number(new URL(gateway.url).port), '127.0.0.1', () => socket.write(head + body))
    let data = ''
    socket.setEncoding('latin1')
    socket.setTimeout(TIMEOUT_MS, () => socket.destroy(new Error('no answer within the route timeout')))
    socket.on('data', (chunk: string) => { data += chunk })
    socket.on('error', reject)
    socket.on('close', () => resolve(data))
  })
}

describe('the forwarder', () => {
  it('passes a GET answered 503 on once: the upstream is asked once', async () => {
    const before = asked.length
    const response = await fetch(`${gateway.url}/app/busy`)
    expect(response.status).toBe(503)
    expect(response.headers.get('retry-after')).toBe('1')
    expect(await response.text()).toBe('busy')
    expect(asked.slice(before)).toEqual(['/app/busy'])
  })

  it.each([
    ['/app/not-modified', 304],
    ['/app/no-content', 204],
  ])('passes %s on as %i without a body though the upstream declared a length, and keeps serving', async (path, status) => {
    const response = await fetch(`${gateway.url}${path}`, { headers: { 'if-none-match': '"v1"' } })
    expect(response.status).toBe(status)
    if (status === 304) expect(response.headers.get('etag')).toBe('"v1"')
    expect(await response.text()).toBe('')
    expect((await fetch(`${gateway.url}/app/busy`)).status).toBe(503)
    // On the wire: the head and nothing after it.
    const raw = await exchange(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`)
    expect(raw).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `))
    expect(raw.endsWith('\r\n\r\n')).toBe(true)
  })

  it('answers 502 bad_gateway for a status above 599', async () => {
    const response = await fetch(`${gateway.url}/app/odd-status`, { headers: { accept: 'application/json' } })
    expect(response.status).toBe(502)
    expect(await response.json()).toMatchObject({ error: 'bad_gateway' })
  })

  it('waits past 102 Processing and 103 Early Hints for the answer', async () => {
    const response = await fetch(`${gateway.url}/app/interim`)
    expect(response.status).toBe(200)
    expect(await response.text()).toBe('final')
  })

  it('maps both of two Location headers back under the route, and keeps serving', async () => {
    const response = await fetch(`${gateway.url}/mapped/two-locations`, { redirect: 'manual' })
    expect(response.status).toBe(302)
    expect(response.headers.get('location')).toBe('/mapped/a, /mapped/b')
    expect(await response.text()).toBe('moved')
    expect((await fetch(`${gateway.url}/app/busy`)).status).toBe(503)
  })

  it('closes a connection whose request body was not all read by the time the answer went out', async () => {
    const port = new URL(gateway.url).port
    // 10 bytes declared, 3 sent: the answer comes before the rest, which the connection would still owe.
    const answer = await exchange(`POST /app/upload HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\ncontent-type: text/plain\r\ncontent-length: 10\r\n\r\n`, 'abc')
    expect(answer).toMatch(/^HTTP\/1\.1 200 /)
    expect(answer.toLowerCase()).toContain('\r\nconnection: close\r\n')
  })

  it('keeps the connection of a request whose body was all read', async () => {
    const response = await fetch(`${gateway.url}/app/upload`, { method: 'POST', body: 'abc' })
    expect(response.status).toBe(200)
    expect(response.headers.get('connection')).not.toBe('close')
    await response.arrayBuffer()
  })

  it('lets go of the upstream\'s answer once the client has gone', async () => {
    // A connection of its own, closed by the client once the answer has begun.
    const status = await new Promise<number | undefined>((resolve, reject) => {
      const request = get(`${gateway.url}/app/endless`, { agent: false }, (response) => {
        resolve(response.statusCode)
        request.destroy()
      })
      request.on('error', (error) => { if (!request.destroyed) reject(error) })
    })
    expect(status).toBe(200)
    const finished = await Promise.race([endlessClosed, new Promise<string>((resolve) => setTimeout(() => resolve('still open after the route timeout'), TIMEOUT_MS))])
    expect(finished).toBe(false)
  })
})
