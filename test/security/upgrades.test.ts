// Upgrades: only websocket routes accept an upgrade; every other upgrade request
// gets an ordinary HTTP answer and its socket is closed, so a stranger cannot hold sockets open.
// The real CLI process: 1,000 upgrade requests without a session, its open file descriptors back
// to the baseline, then SIGTERM still exits promptly. Websocket upgrades must carry the gateway's
// own Origin (or one listed in allowedOrigins), and Origin is forwarded upstream.
import { spawn, type ChildProcess } from 'node:child_process'
import { readdir, mkdtemp, writeFile } from 'node:fs/promises'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { stringify } from 'yaml'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { TEST_SECRET } from '../helpers/gateway.js'
import { holdPort, releasePort, waitFor } from '../helpers/net.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

/** server.shutdownTimeout: how long SIGTERM waits for open sockets. */
const SHUTDOWN_TIMEOUT_MS = 10_000

let upstream: Upstream
let child: ChildProcess
let exited: Promise<number | null>
let port: number

beforeAll(async () => {
  upstream = await startUpstream()
  port = await holdPort()
  const file = join(await mkdtemp(join(tmpdir(), 'gw-upgrades-')), 'gateway.yaml')
  await writeFile(file, stringify({
    server: { host: '127.0.0.1', port, shutdownTimeout: `${SHUTDOWN_TIMEOUT_MS}ms` },
    session: { secret: TEST_SECRET },
    store: { type: 'memory' },
    providers: { demo: { clientId: 'c', clientSecret: 's', authorizeUrl: 'http://127.0.0.1:9/authorize', tokenUrl: 'http://127.0.0.1:9/token', scope: 'read' } },
    routes: [
      { path: '/app/', upstream: upstream.url, provider: 'demo' },
      { path: '/open/', upstream: upstream.url, auth: 'none' },
      { path: '/live/', upstream: upstream.url, provider: 'demo', websocket: true },
    ],
  }))
  await releasePort(port)
  child = spawn(process.execPath, ['dist/src/main.js', '--config', file], { stdio: ['ignore', 'ignore', 'inherit'] })
  exited = new Promise((resolve) => child.once('exit', resolve))
  await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).ok, 10_000, 'the gateway to be ready')
})

afterAll(async () => {
  if (child.exitCode === null) child.kill('SIGKILL')
  await upstream?.close()
})

/** Open file descriptors of the gateway process (sockets included). */
async function openFds (): Promise<number> {
  return (await readdir(`/proc/${child.pid!}/fd`)).length
}

/**
 * A websocket upgrade request that never closes its own end: resolves with the status line the
 * gateway answered once the gateway has closed the socket, or 'still open' after `waitMs`.
 */
async function upgrade (path: string, waitMs = 5000): Promise<string> {
  return await new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write([`GET ${path} HTTP/1.1`, `Host: 127.0.0.1:${port}`, 'Upgrade: websocket', 'Connection: Upgrade',
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version: 13', '', ''].join('\r\n'))
    })
    let data = ''
    const timer = setTimeout(() => { socket.destroy(); resolve(`still open: ${data.split('\r\n')[0] ?? ''}`) }, waitMs)
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => { data += chunk })
    socket.on('error', reject)
    socket.on('close', () => { clearTimeout(timer); resolve(data.split('\r\n')[0] ?? '') })
  })
}

describe('upgrade requests on routes without websocket', () => {
  it.each([
    ['a protected route without a session', '/app/x', 'HTTP/1.1 401 Unauthorized'],
    ['a public route', '/open/x', 'HTTP/1.1 200 OK'],
    ['no route at all', '/nowhere', 'HTTP/1.1 404 Not Found'],
    ['a websocket route, from no page of this site (no Origin)', '/live/x', 'HTTP/1.1 403 Forbidden'],
    ['a target the edge refuses', '/app/%2e%2e/%2e%2e/x', 'HTTP/1.1 400 Bad Request'],
  ])('on %s: an ordinary answer, then the gateway closes the socket', async (_name, path, status) => {
    expect(await upgrade(path)).toBe(status)
  })

  it('1,000 of them leave no socket open, and SIGTERM still exits promptly', async () => {
    const baseline = await openFds()
    const paths = ['/app/x', '/open/x', '/nowhere', '/live/x']
    for (let batch = 0; batch < 20; batch++) {
      const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => upgrade(paths[i % paths.length]!)))
      expect(answers.filter((answer) => !answer.startsWith('HTTP/1.1 ') || answer.includes('101'))).toEqual([])
    }
    await waitFor(async () => (await openFds()) <= baseline + 2, 5000, `open descriptors back to ${baseline}`)
    const stopped = Date.now()
    child.kill('SIGTERM')
    expect(await exited).toBe(0)
    // A socket left open would hold the shutdown for the whole server.shutdownTimeout; with none,
    // the process is gone in under 30% of it.
    expect(Date.now() - stopped).toBeLessThan(0.3 * SHUTDOWN_TIMEOUT_MS)
  })
})
