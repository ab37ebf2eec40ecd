// An answer the gateway sends before the request's body has arrived (a 404, a 401 or a redirect to
// sign in) closes the connection after it: Node would keep it open for the rest of the body, as
// long as the client trickles it (up to its requestTimeout, 120 s, checked every 30 s). An outside
// tester's finding: a POST declaring 100,000 bytes and sending 10 held its socket past its 404 and
// its 401; the gateway's own endpoints and proxied answers already closed it. A request without a
// body keeps its connection (keep-alive).
import { connect } from 'node:net'
import { describe, expect } from 'vitest'
import type { TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'

let gateway: TestGateway

it.beforeAll(async ({ startStack, upstream }) => {
  gateway = await startStack({ routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }] })
})

/** Writes `request` and never sends more: the answer's head, once the gateway has closed the connection (or the answer, `open`, while it keeps it). */
async function send (request: string, until: 'closed' | 'answered'): Promise<string> {
  const socket = connect(Number(new URL(gateway.url).port), '127.0.0.1')
  socket.on('error', () => {})
  let text = ''
  socket.setEncoding('latin1')
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
  const answered = new Promise<void>((resolve) => socket.on('data', (chunk: string) => { text += chunk; if (text.includes('\r\n\r\n')) resolve() }))
  socket.write(request)
  await (until === 'closed' ? closed : answered)
  socket.destroy()
  return text.slice(0, text.indexOf('\r\n\r\n')).toLowerCase()
}

const stalledPost = (path: string, accept: string) =>
  `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: ${accept}\r\nContent-Type: application/octet-stream\r\nContent-Length: 100000\r\n\r\n0123456789`

describe('an answer sent before the request body arrived', () => {
  it.each([
    ['a path no route has', '/nowhere/x', 'application/json', 'http/1.1 404'],
    ['a protected route without a session (an API client)', '/app/x', 'application/json', 'http/1.1 401'],
    ['a protected route without a session (a browser: sent to sign in)', '/app/x', 'text/html', 'http/1.1 302'],
  ])('%s: answered, with Connection: close, and the connection ends', async (_what, path, accept, status) => {
    const head = await send(stalledPost(path, accept), 'closed')
    expect(head).toMatch(new RegExp(`^${status} `))
    expect(head).toContain('connection: close')
  })

  // An outside tester's finding: the gateway's own answers outside /oauth/ waited for the rest.
  it.each([
    ['/healthz', 'http/1.1 200'],
    ['/readyz', 'http/1.1 200'],
    ['/metrics', 'http/1.1 200'],
    ['/', 'http/1.1 302'],
  ])('GET %s, the gateway\'s own: answered, and the connection ends', async (path, status) => {
    const head = await send(stalledPost(path, 'application/json').replace(/^POST/, 'GET'), 'closed')
    expect(head).toMatch(new RegExp(`^${status} `))
  })

  it('a request without a body keeps its connection', async () => {
    const head = await send('GET /nowhere/x HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n\r\n', 'answered')
    expect(head).toMatch(/^http\/1\.1 404 /)
    expect(head).toContain('connection: keep-alive')
  })
})
