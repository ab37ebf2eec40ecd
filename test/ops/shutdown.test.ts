// Graceful shutdown of the real CLI process: on SIGTERM it stops accepting connections, lets an
// in-flight request finish, closes the store and exits 0. A connection that has sent nothing yet (a
// browser opens such connections ahead of time) does not hold the shutdown: Node would keep it
// past the shutdownTimeout (no timeout of Node's ends it once the server is closing), and the
// process would exit 1.
import { spawn } from 'node:child_process'
import { connect, type Socket } from 'node:net'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { stringify } from 'yaml'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, TEST_SECRET } from '../helpers/gateway.js'
import { freePort, waitFor } from '../helpers/net.js'
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
  it('lets an in-flight request finish after SIGTERM, refuses new ones, and exits 0', async () => {
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
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
    const url = `http://127.0.0.1:${port}`
    await waitFor(async () => (await fetch(`${url}/readyz`)).ok, 10_000, 'the gateway to be ready')

    // Connected, and silent: no request on it yet.
    const silent = connect(port, '127.0.0.1')
    const silentClosed = new Promise<void>((resolve) => silent.once('close', () => resolve()))
    silent.on('error', () => {})
    await new Promise((resolve) => silent.once('connect', resolve))

    const seenBefore = upstream.seen.length
    const inFlight = fetch(`${url}/public/delay/1000`)
    await waitFor(async () => upstream.seen.length > seenBefore, 5000, 'the request to reach the upstream')
    child.kill('SIGTERM')
    await waitFor(async () => output.includes('shutting down'), 5000, 'the shutdown to begin')

    await expect(fetch(`${url}/healthz`)).rejects.toThrow()
    const response = await inFlight
    expect(response.status).toBe(200)
    expect(await exited).toBe(0)
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
})

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
