// A websocket route whose path is not ASCII (`/café/`): the upgrade is kept for the route as an
// ASCII one's is (http/upgrades.ts compares the request's canonical path, `/caf%C3%A9/x`, with the
// route's path in the same spelling). An outside tester found it proxied as plain HTTP (200).
// A websocket route whose path is non-ASCII (`/café/`): upgrades.ts compares the canonical request
// path (`/caf%C3%A9/...`) with the route's path as written (`/café`), so its upgrades are never kept
// for the route, and no websocket ever opens through it; the same route at `/cafe/` works.
import { createServer } from 'node:http'
import { WebSocket, WebSocketServer } from 'ws'
import { afterAll, describe, expect, it } from 'vitest'
import { startGateway, type TestGateway } from '../helpers/gateway.js'
import { close, listen } from '../helpers/net.js'

const DEMO = { clientId: 'c', clientSecret: 's', authorizeUrl: 'http://127.0.0.1:9/auth', tokenUrl: 'http://127.0.0.1:9/token', scope: 'profile' }
const upstreamServer = createServer((_req, res) => res.end('plain HTTP'))
const wss = new WebSocketServer({ server: upstreamServer })
wss.on('connection', (socket, request) => socket.send(`hello ${request.url ?? ''}`))
let gateway: TestGateway | undefined

afterAll(async () => {
  await gateway?.close()
  wss.close()
  await close(upstreamServer)
})

/** The first message through a websocket to `path`, or the HTTP status the upgrade was answered. */
function open (base: string, path: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = new WebSocket(`${base.replace('http', 'ws')}${path}`, { headers: { origin: base } })
    socket.once('message', (data) => { resolve(`message: ${data.toString()}`); socket.close() })
    socket.once('unexpected-response', (_req, res) => { resolve(`status: ${res.statusCode ?? 0}`); res.resume() })
    socket.once('error', (error) => resolve(`error: ${error.message}`))
  })
}

describe('websocket route with a non-ASCII path', () => {
  it('opens as the ASCII one does', async () => {
    const upstream = await listen(upstreamServer)
    gateway = await startGateway({
      store: { type: 'memory' },
      providers: { demo: DEMO },
      routes: [
        { path: '/cafe/', upstream, auth: 'none', websocket: true },
        { path: '/café/', upstream, auth: 'none', websocket: true },
      ],
    })
    expect(await open(gateway.url, '/cafe/x')).toBe('message: hello /cafe/x')
    expect(await open(gateway.url, '/caf%C3%A9/x')).toBe('message: hello /caf%C3%A9/x')
  })
})
