// /metrics kept off the public port: with `metrics.listen` set, the public port answers /metrics
// with 404 and a separate loopback listener serves it, started when the gateway listens and closed
// with it. Without the key nothing changes. With several workers the primary serves it, summed.
import { spawn } from 'node:child_process'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { createServer } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { TEST_SECRET, startGateway } from '../helpers/gateway.js'
import { close, freePort, waitFor } from '../helpers/net.js'
import { startRedis } from '../helpers/redis.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

let upstream: Upstream

beforeAll(async () => { upstream = await startUpstream() })
afterAll(async () => { await upstream?.close() })

const routes = () => [{ path: '/open/', upstream: upstream.url, auth: 'none' }]

/** Resolves when something can bind `port` on loopback again (nothing holds it). */
async function portIsFree (port: number): Promise<boolean> {
  const server = createServer()
  const bound = await new Promise<boolean>((resolve) => {
    server.once('error', () => resolve(false))
    server.listen(port, '127.0.0.1', () => resolve(true))
  })
  if (bound) await close(server)
  return bound
}

describe('metrics.listen', () => {
  it('serves /metrics on its own port only, and releases the port on close', async () => {
    const port = await freePort()
    const gateway = await startGateway({ metrics: { listen: `127.0.0.1:${port}` }, routes: routes() })
    try {
      await gateway.app.metricsListener!.listening
      expect((await fetch(`${gateway.url}/open/x`)).status).toBe(200)

      const publicAnswer = await fetch(`${gateway.url}/metrics`, { headers: { accept: 'application/json' } })
      expect(publicAnswer.status).toBe(404)
      expect(await publicAnswer.json()).toMatchObject({ error: 'not_found' })

      const scrape = await fetch(`http://127.0.0.1:${port}/metrics`)
      expect(scrape.status).toBe(200)
      expect(scrape.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/)
      expect(await scrape.text()).toContain('gateway_proxied_requests_total{route="/open",status_class="2xx"} 1')
      expect((await fetch(`http://127.0.0.1:${port}/`)).status).toBe(404)
    } finally {
      await gateway.close()
    }
    expect(await portIsFree(port)).toBe(true)
  })

  it('a metrics port already taken fails the start with the reason', async () => {
    const port = await freePort()
    const squatter = createServer()
    await new Promise<void>((resolve) => squatter.listen(port, '127.0.0.1', resolve))
    const gateway = await startGateway({ metrics: { listen: `127.0.0.1:${port}` }, routes: routes() })
    try {
      await expect(gateway.app.metricsListener!.listening).rejects.toThrow(`metrics.listen: cannot listen on 127.0.0.1:${port} (EADDRINUSE)`)
    } finally {
      await gateway.close()
      await close(squatter)
    }
  })

  it('without it, /metrics stays on the public port', async () => {
    const gateway = await startGateway({ routes: routes() }, { listen: false })
    try {
      expect(gateway.app.metricsListener).toBeUndefined()
      const scrape = await gateway.app.inject('/metrics')
      expect(scrape.statusCode).toBe(200)
      expect(scrape.body).toContain('# TYPE gateway_proxied_requests_total counter')
    } finally {
      await gateway.close()
    }
  })
})

describe('metrics.listen with server.workers > 1', () => {
  it('the primary serves every worker\'s metrics summed, not those of whichever worker a scrape reaches', async () => {
    const redis = await startRedis()
    const [port, metricsPort] = [await freePort(), await freePort()]
    const url = `http://127.0.0.1:${port}`
    const dir = await mkdtemp(join(tmpdir(), 'gw-metrics-'))
    const file = join(dir, 'gateway.yaml')
    await writeFile(file, stringify({
      server: { host: '127.0.0.1', port, baseUrl: url, workers: 2 },
      session: { secret: TEST_SECRET },
      store: { type: 'redis', url: redis.url },
      routes: routes(),
      metrics: { listen: `127.0.0.1:${metricsPort}` },
    }))
    const child = spawn(process.execPath, ['dist/src/main.js', '--config', file], { stdio: 'ignore' })
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
    try {
      const count = async () => {
        const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()
        return Number(/gateway_proxied_requests_total\{route="\/open",status_class="2xx"\} (\d+)/.exec(text)?.[1] ?? 0)
      }
      await waitFor(async () => (await fetch(`${url}/readyz`)).ok && (await count()) === 0, 15_000, 'the workers and the metrics listener')
      // Separate connections, so the primary hands them to both workers.
      for (let i = 0; i < 10; i++) expect((await fetch(`${url}/open/${i}`, { headers: { connection: 'close' } })).status).toBe(200)
      expect((await fetch(`${url}/metrics`, { headers: { connection: 'close' } })).status).toBe(404)
      expect(await count()).toBe(10)
    } finally {
      child.kill('SIGTERM')
      expect(await exited).toBe(0)
      await redis.release()
    }
  })
})
