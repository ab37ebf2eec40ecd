// server.workers: the real CLI starts a primary and that many workers on one port; they share the
// Redis store (a sign-in crosses workers), requests are spread over them, and SIGTERM stops all.
import { spawn } from 'node:child_process'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { stringify } from 'yaml'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parseConfig } from '../../src/config/config.js'
import { Browser } from '../helpers/browser.js'
import { oidcClient, TEST_SECRET } from '../helpers/gateway.js'
import { freePort, waitFor } from '../helpers/net.js'
import { Children } from '../helpers/processes.js'
import { startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

let redis: TestRedis
const children = new Children()
let upstream: Upstream
let op: TestProvider

beforeAll(async () => {
  redis = await startRedis()
  upstream = await startUpstream()
})
afterAll(async () => {
  await children.end()
  await op?.close()
  await upstream?.close()
  await redis?.release()
})

describe('server.workers', () => {
  it('rejects several workers on the in-process store, and reads auto as the core count', () => {
    expect(() => parseConfig('server: { workers: 2 }', {})).toThrow('server.workers: several workers need a shared store')
    expect(parseConfig('server: { workers: auto }\nstore: { type: redis }', {}).server.workers).toBeGreaterThanOrEqual(1)
  })

  // A signal after the first is logged and ignored: the primary killed by a second SIGINT (Ctrl-C
  // under `npm start` sends two) left its workers to the shutdown it had begun (a new user's finding).
  it('runs two workers on one port that share sessions, and stops them all on SIGTERM, a SIGINT after it ignored', async () => {
    const port = await freePort()
    const url = `http://127.0.0.1:${port}`
    op = await startOidcProvider([{ client_id: 'w', client_secret: 'ws', redirect_uris: [`${url}/oauth/authorized/demo/`] }])
    const dir = await mkdtemp(join(tmpdir(), 'gw-workers-'))
    const file = join(dir, 'gateway.yaml')
    await writeFile(file, stringify({
      server: { host: '127.0.0.1', port, baseUrl: url, workers: 2 },
      session: { secret: TEST_SECRET },
      store: { type: 'redis', url: redis.url },
      providers: { demo: oidcClient(op.issuer, 'w', 'ws') },
      routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }],
    }))
    const child = children.add(spawn(process.execPath, ['dist/src/main.js', '--config', file], { stdio: ['ignore', 'pipe', 'pipe'] }))
    let output = ''
    child.stdout.on('data', (chunk: Buffer) => { output += chunk.toString() })
    // 'close', not 'exit': the pipe may still hold the last lines when the primary has exited.
    const exited = new Promise<number | null>((resolve) => child.once('close', resolve))
    // Both workers serving (the first one answers /readyz while the second may still be starting).
    await waitFor(async () => output.split('\n').filter((line) => line.includes('"worker listening"')).length === 2 && (await fetch(`${url}/readyz`)).ok, 15_000, 'the workers to be ready')

    const browser = new Browser()
    expect((await browser.navigate(`${url}/app/`)).status).toBe(200)
    const cookie = browser.cookieHeader(`${url}/app/`)!
    // Separate connections, so the primary hands them to different workers.
    for (let i = 0; i < 10; i++) {
      const response = await fetch(`${url}/app/${i}`, { headers: { accept: 'application/json', cookie, connection: 'close' } })
      expect(response.status).toBe(200)
    }
    // In flight until release(), so that the primary is still stopping when the second signal comes.
    const held = await fetch(`${url}/app/stream`, { headers: { accept: 'application/json', cookie } })
    child.kill('SIGTERM')
    await waitFor(async () => output.includes('"msg":"stopping workers"'), 5000, 'the primary to stop its workers')
    child.kill('SIGINT')
    await waitFor(async () => output.includes('"msg":"already shutting down'), 5000, 'the second signal to be logged as ignored')
    upstream.release()
    expect(await held.text()).toBe('first,last')
    expect(await exited).toBe(0)
    // Log lines are buffered and flushed at exit: read them now. Two workers served, not the primary.
    const pids = new Set(output.split('\n').filter((line) => line.includes('request completed')).map((line) => (JSON.parse(line) as { pid: number }).pid))
    expect(pids.size).toBe(2)
    expect(pids.has(child.pid!)).toBe(false)
    for (const pid of pids) expect(() => process.kill(pid, 0)).toThrow()
  })
})
