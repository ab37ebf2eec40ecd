// The Redis Sentinel form of store:, against a real sentinel (redis-server --sentinel) watching a
// real Redis: the gateway asks the sentinel for the master and keeps its sessions there.
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { startGatewayWithProvider, type TestGateway } from '../helpers/gateway.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startSentinel, type TestSentinel } from '../helpers/redis-sentinel.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

describe('store.sentinel', () => {
  let master: TestRedis
  let sentinel: TestSentinel
  let stack: Awaited<ReturnType<typeof startGatewayWithProvider>>
  let upstream: Upstream
  let gateway: TestGateway

  beforeAll(async () => {
    master = await startRedis('spawn')
    sentinel = await startSentinel(master.url)
    upstream = await startUpstream()
    stack = await startGatewayWithProvider({
      store: { type: 'redis', sentinel: { name: 'mymaster', nodes: [sentinel.node] } },
      routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }],
    })
    gateway = stack.gateway
  })

  afterAll(async () => {
    await stack?.close()
    await upstream?.close()
    await sentinel?.stop()
    await master?.stop()
  })

  it('finds the master through the sentinel and keeps sessions there', async () => {
    const browser = new Browser()
    expect((await browser.navigate(`${gateway.url}/app/`)).status).toBe(200)
    expect((await fetch(`${gateway.url}/readyz`)).status).toBe(200)
    const client = new Redis(master.url)
    expect((await client.keys('gw:session:*')).length).toBe(1)
    await client.quit()
  })
})
