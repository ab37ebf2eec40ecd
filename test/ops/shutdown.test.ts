// Graceful shutdown of the real CLI process: on SIGTERM it stops accepting connections, lets an
// in-flight request finish, closes the store and exits 0. A connection that has sent nothing yet (a
// browser opens such connections ahead of time) does not hold the shutdown: Node would keep it
// past the shutdownTimeout (no timeout of Node's ends it once the server is closing), and the
// process would exit 1.
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { createServer, type ServerResponse } from 'node:http'
import { connect, type Socket } from 'node:net'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { WebSocketServer } from 'ws'
import { stringify } from 'yaml'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, TEST_SECRET } from '../helpers/gateway.js'
import { freePort, listen, waitFor } from '../helpers/net.js'
import { Children } from '../helpers/processes.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

let redis: TestRedis
const children = new Children()
let upstream: Upstream

beforeAll(async () => {
  redis = await startRedis()
  upstream = await startUpstream()
})
afterAll(async () => {
  await children.end()
  await upstream?.close()
  await redis?.release()
})

describe('shutdown', () => {
  // Later signals are logged and ignored, not acted on. Ctrl-C under `npm start` reaches the
  // gateway twice: from the terminal and from npm passing it on. A second SIGINT used to take
  // Node's default action and kill the shutdown under way (a new user's finding).
  it('lets an in-flight request finish after SIGTERM, refuses new ones, outlasts two SIGINTs more, and exits 0', async () => {
    const port = await freePort()
    const dir = await mkdtemp(join(tmpdir(), 'gw-shutdown-'))
    const file = join(dir, 'gateway.yaml')
    await writeFile(file, stringify({
      server: { host: '127.0.0.1', port },
      session: { secret: TEST_SECRET },
      store: { type: 'redis', url: redis.url },
      routes: [{ path: '/public/', upstream: upstream.url, auth: 'none' }],
    }))
    const child = children.add(spawn(process.execPath, ['dist/src/main.js', '--config', file], { stdio: ['ignore', 'pipe', 'pipe'] }))
    let output = ''
    child.stdout.on('data', (chunk: Buffer) => { output += chunk.toString() })
    // 'close', not 'exit': its stdout may still hold its last lines when it has exited.
    const exited = new Promise<number | null>((resolve) => child.once('close', resolve))
    const url = `http://127.0.0.1:${port}`
    await waitFor(async () => (await fetch(`${url}/readyz`)).ok, 10_000, 'the gateway to be ready')

    // Connected, and silent: no request on it yet.
    const silent = connect(port, '127.0.0.1')
    const silentClosed = new Promise<void>((resolve) => silent.once('close', () => resolve()))
    silent.on('error', () => {})
    await new Promise((resolve) => silent.once('connect', resolve))

    const seenBefore = upstream.seen.length
    // Held by the upstream until release(): in flight for as long as the signals take.
    const inFlight = fetch(`${url}/public/stream`)
    await waitFor(async () => upstream.seen.length > seenBefore, 5000, 'the request to reach the upstream')
    child.kill('SIGTERM')
    await waitFor(async () => output.includes('shutting down'), 5000, 'the shutdown to begin')
    const repeated = () => output.split('\n').filter((line) => line.includes('already shutting down')).length
    for (const seen of [1, 2]) {
      child.kill('SIGINT')
      await waitFor(async () => repeated() === seen, 5000, `signal ${seen + 1} to be logged as ignored`)
    }

    await expect(fetch(`${url}/healthz`)).rejects.toThrow()
    const response = await inFlight
    expect(response.status).toBe(200)
    upstream.release()
    expect(await response.text()).toBe('first,last')
    expect(await exited).toBe(0)
    expect(output.split('\n').filter((line) => line.includes('"msg":"shutting down')).length).toBe(1)
    expect(output).toContain('"msg":"shut down"')
    expect(output).not.toContain('did not finish')
    await silentClosed
  })

  it('in process: close() ends a connection that never sends a request, and answers one whose request is already under way', async () => {
    const gateway = await startGateway({ store: { type: 'memory' }, routes: [{ path: '/public/', upstream: upstream.url, auth: 'none' }] })
    const port = Number(new URL(gateway.url).port)
    const silent = await connected(port)
    const eager = await connected(port)
    // Without the drain this close() waits for the silent connection as long as it stays open.
    const closing = gateway.close()
    eager.socket.write('GET /public/x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n')
    await closing
    expect(await silent.closed).toBe('')
    // Answered (Fastify answers a request that comes while it closes with 503), not cut off.
    expect(await eager.closed).toMatch(/^HTTP\/1\.1 \d{3} /)
  })

  it('in process: close() ends a connection that sent part of a request\'s headers and stopped, one that did so after a request it was answered, and one that trickles them', async () => {
    const gateway = await startGateway({ store: { type: 'memory' }, routes: [{ path: '/public/', upstream: upstream.url, auth: 'none' }] })
    const connectedHere = async () => await connected(Number(new URL(gateway.url).port))
    const stalled = await connectedHere()
    stalled.socket.write('GET /public/x HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Half: ')
    const reused = await connectedHere()
    reused.socket.write('GET /public/first HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n')
    // The first answer's head, whole (the connection stays open: kept alive).
    await new Promise<void>((resolve) => {
      const arrived = () => reused.received().includes('\r\n\r\n') ? resolve() : reused.socket.once('data', arrived)
      arrived()
    })
    reused.socket.write('GET /public/second HTTP/1.1\r\nHost: 127.0.0.1\r\n')
    // One that keeps sending its headers a byte at a time and never ends them.
    const trickling = await connectedHere()
    trickling.socket.write('GET /public/x HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ')
    const trickle = setInterval(() => { if (!trickling.socket.destroyed) trickling.socket.write('a') }, 50)
    try {
      // Before, close() waited for all three as long as they stayed open (a CLI gateway: until its
      // shutdownTimeout, then exit 1).
      await gateway.close()
    } finally {
      clearInterval(trickle)
    }
    expect(await stalled.closed).toBe('')
    expect(await trickling.closed).toBe('')
    const answers = (await reused.closed).match(/^HTTP\/1\.1 /gm)
    expect(answers).toHaveLength(1)
  })

  // An outside tester's finding: the gateway's close frame waited for ws's own 30 s close timeout,
  // past the default shutdownTimeout (10 s), when the client never answered it (as it did when the
  // gateway had paused the client's leg, backpressure from an upstream that reads nothing, and so
  // never read the answer: closeLeg resumes it). The bound is the test's shutdownTimeout: past it
  // the CLI exits with status 1.
  describe('in process: close() with a websocket open', () => {
    let echo: WebSocketServer
    let echoUrl: string
    beforeAll(async () => {
      const server = createServer()
      echo = new WebSocketServer({ server })
      echo.on('connection', (socket) => { socket.on('message', (data, binary) => { socket.send(data, { binary }) }) })
      echoUrl = await listen(server)
    })
    afterAll(async () => {
      for (const socket of echo.clients) socket.terminate()
      echo.close()
    })

    it('cuts a client that never answers the close frame, within the shutdownTimeout', async () => {
      const gateway = await startGateway({ store: { type: 'memory' }, server: { shutdownTimeout: SHUTDOWN }, routes: [{ path: '/ws/', upstream: echoUrl, auth: 'none', websocket: true }] })
      const socket = await silentWebSocket(gateway.url, '/ws/x')
      const closing = gateway.close()
      const closed = await Promise.race([closing.then(() => true), sleep(SHUTDOWN_MS).then(() => false)])
      socket.destroy()
      await closing
      expect(closed, 'close() waited past the shutdownTimeout for a client that never answers').toBe(true)
    })
  })
  // An outside tester's finding: an upstream's event stream never ends by itself, and nothing ended
  // it, so close() waited for it for ever in process (the CLI: exit 1 at the shutdownTimeout, the
  // stream cut mid-chunk). It is ended cleanly first: its EventSource reconnects elsewhere.
  describe('in process: close() with an event stream open', () => {
    const held = new Set<ServerResponse>()
    /** Answers held back: a request for `/feed/late` is answered when the test lets it go. */
    const waiting: Array<() => void> = []
    let feedUrl: string
    beforeAll(async () => {
      feedUrl = await listen(createServer((request, response) => {
        const answer = () => {
          response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
          response.write('data: first\n\n')
          held.add(response)
        }
        if (request.url?.includes('late') === true) waiting.push(answer)
        else answer()
      }))
    })
    afterAll(() => { for (const response of held) response.destroy() })

    it('ends the stream cleanly, and close() within the shutdownTimeout', async () => {
      const gateway = await startGateway({ store: { type: 'memory' }, server: { shutdownTimeout: SHUTDOWN }, routes: [{ path: '/feed/', upstream: feedUrl, auth: 'none' }] })
      const answer = await fetch(`${gateway.url}/feed/live`, { headers: { accept: 'text/event-stream' } })
      const reader = answer.body!.getReader()
      expect(new TextDecoder().decode((await reader.read()).value)).toContain('data: first')
      const ending = (async () => {
        try {
          for (;;) if ((await reader.read()).done) return 'a clean end'
        } catch (error) {
          return `cut off: ${String((error as Error).cause ?? error)}`
        }
      })()
      const closing = gateway.close()
      const closed = await Promise.race([closing.then(() => true), sleep(SHUTDOWN_MS).then(() => false)])
      // Either way the test ends: the upstream ends its streams, so a close still waiting finishes.
      for (const response of held) response.end()
      await closing
      expect({ closed, stream: await ending }).toEqual({ closed: true, stream: 'a clean end' })
      expect(gateway.logs.some((line) => line.includes('event streams ended for the shutdown'))).toBe(true)
    })

    // An attacker's finding: one answered after the shutdown began (its upstream slower than the hook) was added after it ran.
    it('ends one its upstream answers after the shutdown began, at once and cleanly', async () => {
      const gateway = await startGateway({ store: { type: 'memory' }, server: { shutdownTimeout: SHUTDOWN }, routes: [{ path: '/feed/', upstream: feedUrl, auth: 'none' }] })
      const early = await fetch(`${gateway.url}/feed/early`, { headers: { accept: 'text/event-stream' } })
      const earlyReader = early.body!.getReader()
      await earlyReader.read()
      void (async () => { try { for (;;) if ((await earlyReader.read()).done) return } catch {} })()
      // The second is in flight: the upstream has its request and answers only once the shutdown's hook has run.
      const late = fetch(`${gateway.url}/feed/late`, { headers: { accept: 'text/event-stream' } })
      await waitFor(async () => waiting.length === 1, 5000, 'the upstream to have the late request')
      const closing = gateway.close()
      await waitFor(async () => gateway.logs.some((line) => line.includes('event streams ended for the shutdown')), 5000, 'the shutdown\'s hook')
      waiting.shift()!()
      const reader = (await late).body!.getReader()
      const ending = (async () => {
        try {
          for (;;) if ((await reader.read()).done) return 'a clean end'
        } catch (error) {
          return `cut off: ${String((error as Error).cause ?? error)}`
        }
      })()
      const closed = await Promise.race([closing.then(() => true), sleep(SHUTDOWN_MS).then(() => false)])
      for (const response of held) response.end()
      await closing
      expect({ closed, stream: await ending }).toEqual({ closed: true, stream: 'a clean end' })
    })
  })
})

const SHUTDOWN = '2s'
const SHUTDOWN_MS = 2000
const sleep = async (ms: number) => await new Promise((resolve) => setTimeout(resolve, ms))

/** A raw websocket client of `gatewayUrl`: completes the handshake for `path`, then never reads again (never answers a close frame). */
async function silentWebSocket (gatewayUrl: string, path: string): Promise<Socket> {
  const port = Number(new URL(gatewayUrl).port)
  const socket = connect(port, '127.0.0.1')
  socket.on('error', () => {})
  const key = Buffer.alloc(16, 7).toString('base64')
  socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\nOrigin: ${gatewayUrl}\r\n\r\n`)
  let head = ''
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      head += chunk.toString('latin1')
      if (!head.includes('\r\n\r\n')) return
      socket.off('data', onData)
      socket.pause()
      const accept = createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64')
      if (head.startsWith('HTTP/1.1 101') && head.includes(accept)) resolve()
      else reject(new Error(head))
    }
    socket.on('data', onData)
  })
  return socket
}

/** A client connection to the gateway on `port`: its socket, what it received, and all of it once the connection closed. */
async function connected (port: number): Promise<{ socket: Socket, closed: Promise<string>, received: () => string }> {
  const socket = connect(port, '127.0.0.1')
  socket.on('error', () => {})
  await new Promise((resolve) => socket.once('connect', resolve))
  let received = ''
  socket.on('data', (chunk: Buffer) => { received += chunk.toString('latin1') })
  const closed = new Promise<string>((resolve) => socket.once('close', () => resolve(received)))
  return { socket, closed, received: () => received }
}
