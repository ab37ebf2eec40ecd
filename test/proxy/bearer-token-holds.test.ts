// A machine client's websockets and event streams end with what let them through (an attacker's findings, each seen failing before):
// a JWT read with claimsFrom: introspection kept its socket after the issuer revoked it, and after its person lost the group the route allows; an event stream outlived its JWT. The gateway's clock and timers are injected (ManualTimers).
// The issuer is the key-issuer stand-in (RS256 JWTs, an RFC 7662 endpoint answering as the test sets).
import { createServer } from 'node:http'
import { decodeJwt } from 'jose'
import { WebSocket, WebSocketServer } from 'ws'
import { afterAll, expect } from 'vitest'
import type { TestGateway } from '../helpers/gateway.js'
import { jtiOf, startKeyIssuer, type KeyIssuer } from '../helpers/key-issuer.js'
import { ManualTimers } from '../helpers/manual-timers.js'
import { close, listen, waitFor } from '../helpers/net.js'
import { test as it } from '../helpers/stack.js'

const timers = new ManualTimers()
timers.time = Date.now()
const answers = new Map<string, Record<string, unknown>>()
let issuer: KeyIssuer
let gateway: TestGateway
const wsUpstream = createServer((_req, res) => res.end('plain'))
const opened: WebSocket[] = []

it.beforeAll(async ({ startStack, upstream }) => {
  issuer = await startKeyIssuer({ introspect: (token) => answers.get(jtiOf(token) ?? '') ?? { active: false } })
  const wss = new WebSocketServer({ server: wsUpstream })
  wss.on('connection', (socket) => socket.on('message', (data) => socket.send(`echo ${String(data)}`)))
  const ws = await listen(wsUpstream)
  gateway = await startStack({
    providers: { stand: { issuer: issuer.url, clientId: 'c', clientSecret: 's', scope: 'openid' } },
    routes: [
      { path: '/intro/', upstream: ws, provider: 'stand', websocket: true, allow: { groups: ['staff'] }, bearer: { audience: 'api://orders', claimsFrom: 'introspection' } },
      { path: '/sse/', upstream: upstream.url, provider: 'stand', bearer: { audience: 'api://orders' } },
    ],
  }, { deps: { clock: timers, timers } })
})

afterAll(async () => {
  for (const socket of opened) socket.terminate()
  await gateway?.close()
  await issuer?.close()
  await close(wsUpstream)
})

const sign = async (claims: Record<string, unknown>, lifetimeS = 3600): Promise<string> =>
  await issuer.sign(claims, { audience: 'api://orders', now: timers.time, lifetimeS })

async function call (path: string, token: string): Promise<number> {
  const response = await fetch(`${gateway.url}${path}`, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } })
  await response.arrayBuffer()
  return response.status
}

/** Opens a websocket as a CLI does (no Origin); resolves once an echo went through. */
async function open (path: string, token: string): Promise<{ closed: Promise<number>, echo: (text: string) => Promise<string> }> {
  const socket = new WebSocket(`${gateway.url.replace('http', 'ws')}${path}`, { headers: { authorization: `Bearer ${token}` } })
  opened.push(socket)
  const closed = new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)))
  await new Promise((resolve, reject) => {
    socket.once('open', resolve)
    socket.once('unexpected-response', (_request, response) => reject(new Error(`handshake answered ${response.statusCode}`)))
    socket.once('error', reject)
  })
  const echo = async (text: string) => await new Promise<string>((resolve) => {
    socket.once('message', (data) => resolve(String(data)))
    socket.send(text)
  })
  expect(await echo('hello')).toBe('echo hello')
  return { closed, echo }
}

/** 'open' when nothing ended it within a second of real time. */
async function within<T> (ended: Promise<T>): Promise<T | 'open'> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<'open'>((resolve) => { timer = setTimeout(() => resolve('open'), 1000) })
  try {
    return await Promise.race([ended, late])
  } finally {
    clearTimeout(timer)
  }
}

// security.md: "for an introspected token, within 60 s of its revocation at the issuer"; machine-clients.md:
// with claimsFrom: introspection "a token the issuer revoked ... is judged on the new answer within a minute".
// A JWT read with claimsFrom: introspection is held as a JWT (introspected: false): its socket lives to exp.
it('a JWT websocket on a claimsFrom: introspection route closes once the issuer revokes the token (requests: 401)', async () => {
  const token = await sign({ sub: 'bob', jti: 'ws-revoked' })
  answers.set('ws-revoked', { active: true, sub: 'bob', groups: ['staff'] })
  const socket = await open('/intro/feed', token)
  answers.set('ws-revoked', { active: false })
  timers.advance(timers.time + 61_000)
  // Requests with the token are refused now.
  expect(await call('/intro/x', token)).toBe(401)
  // Expected: closed with 1008 (token ended). Found: open, and it stays open to the JWT's exp, an hour on.
  expect(await within(socket.closed)).toBe(1008)
})

it('a JWT websocket whose person lost the group the route allows is closed as requests are refused (403)', async () => {
  const token = await sign({ sub: 'carol', jti: 'ws-demoted' })
  answers.set('ws-demoted', { active: true, sub: 'carol', groups: ['staff'] })
  const socket = await open('/intro/feed', token)
  answers.set('ws-demoted', { active: true, sub: 'carol', groups: [] })
  timers.advance(timers.time + 61_000)
  expect(await call('/intro/x', token)).toBe(403)
  expect(await within(socket.closed)).toBe(1008)
})

// An agent's event stream is cut at its token's exp (+ skew); a browser's with its session; a
// websocket with its token. A machine client's event stream is held by nothing: it outlives its JWT.
it('a machine client\'s event stream is cut once its JWT would be refused (exp + 60 s)', async () => {
  const token = await sign({ sub: 'dan', jti: 'sse' }, 120)
  const expMs = decodeJwt(token).exp! * 1000
  const response = await fetch(`${gateway.url}/sse/events`, { headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' } })
  expect(response.status).toBe(200)
  const reader = response.body!.getReader()
  expect(new TextDecoder().decode((await reader.read()).value)).toContain('data: first')
  // Held until a request with the token would be refused: its exp plus the 60 s clock tolerance.
  await waitFor(async () => timers.live().includes(expMs + 60_000), 1000, 'the stream\'s timer')
  timers.advance(expMs + 61_000)
  expect(await call('/sse/x', token)).toBe(401)
  // Expected: the stream cut (read rejects or ends). Found: still open.
  const ended = reader.read().then(() => 'ended', () => 'cut')
  const outcome = await within(ended)
  void reader.cancel().catch(() => {})
  expect(outcome).not.toBe('open')
})
