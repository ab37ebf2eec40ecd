// A websocket on a route with step-up (`reauth: { maxAge: 15m }`) closes once the sign-in it was
// admitted under is older than that, as every request of the route is then sent to sign in again
// (an outside tester's finding: one opened at minute 14 went on for as long as its session, days).
// The gateway's clock and timers are the test's.
import { createServer } from 'node:http'
import { WebSocket, WebSocketServer } from 'ws'
import { afterAll, describe, expect } from 'vitest'
import { signIn } from '../helpers/browser.js'
import type { TestGateway } from '../helpers/gateway.js'
import { ManualTimers } from '../helpers/manual-timers.js'
import { close, listen } from '../helpers/net.js'
import { test as it } from '../helpers/stack.js'
import { settledWithin } from '../helpers/websocket.js'

const MINUTE = 60_000
let gateway: TestGateway
const timers = new ManualTimers()
timers.time = Date.now()
const wsServer = createServer((_request, response) => response.end('plain HTTP'))
new WebSocketServer({ server: wsServer }).on('connection', (socket) => socket.on('message', (data) => socket.send(`echo ${String(data)}`)))

it.beforeAll(async ({ startStack }) => {
  const wsUrl = await listen(wsServer)
  gateway = await startStack({
    routes: [{ path: '/admin/', upstream: wsUrl, provider: 'demo', websocket: true, reauth: { maxAge: '15m' } }],
  }, { deps: { clock: timers, timers } })
})

afterAll(async () => {
  await gateway?.close()
  await close(wsServer)
})

/** Sends `text` and resolves with the upstream's echo. */
async function echo (socket: WebSocket, text: string): Promise<string> {
  return await new Promise((resolve) => { socket.once('message', (data) => resolve(String(data))); socket.send(text) })
}

describe('a websocket on a step-up route', () => {
  it('closes (1008) once the sign-in is older than the route\'s reauth.maxAge, as every request is then refused', async () => {
    const { cookie } = await signIn(`${gateway.url}/oauth/login/demo/?next=/admin/`, 'stepper')
    timers.advance(timers.time + 14 * MINUTE)
    const socket = new WebSocket(`${gateway.url.replace('http', 'ws')}/admin/feed`, { headers: { cookie, origin: gateway.url } })
    const closed = new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)))
    await new Promise((resolve, reject) => { socket.once('open', resolve); socket.once('error', reject); socket.once('unexpected-response', (_q, r) => reject(new Error(`handshake ${r.statusCode}`))) })
    try {
      // The socket's deadline, once the gateway has read its session (the first check after both
      // legs opened, a store read): awaited as an event, bounded by the test's own timeout only.
      while (timers.live().length === 0) await new Promise((resolve) => setTimeout(resolve, 10))
      expect(timers.live()).toHaveLength(1)
      const deadline = timers.live()[0]!
      // About two minutes on: the sign-in was 14 minutes old, and the check allows a minute of skew.
      expect(deadline - timers.time).toBeGreaterThan(MINUTE)
      timers.advance(deadline - 1000)
      expect(await echo(socket, 'still')).toBe('echo still')
      timers.advance(deadline)
      expect(await settledWithin(closed)).toBe(1008)
      // A request on the route now needs a fresh sign-in.
      const plain = await fetch(`${gateway.url}/admin/x`, { headers: { cookie, accept: 'application/json' }, redirect: 'manual' })
      expect(plain.status).toBe(401)
    } finally {
      socket.close()
    }
  })
})
