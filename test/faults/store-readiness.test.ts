// /readyz and the session store, on purpose: with store.readiness `required` (the default) an
// instance is taken out of the load balancer only when no part of the store answers; with `ignored`
// it stays in whatever the store does, and the body still says how the store is.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parseConfig } from '../../src/config/config.js'
import { startGateway, type TestGateway } from '../helpers/gateway.js'
import { waitFor } from '../helpers/net.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'

let redis: TestRedis
let required: TestGateway
let ignored: TestGateway

beforeAll(async () => {
  redis = await startRedis('spawn')
  const routes = [{ path: '/open/', upstream: 'http://127.0.0.1:9', auth: 'none' }]
  required = await startGateway({ store: { type: 'redis', url: redis.url }, routes })
  ignored = await startGateway({ store: { type: 'redis', url: redis.url, readiness: 'ignored' }, routes })
})
afterAll(async () => {
  await required?.close()
  await ignored?.close()
  await redis?.release()
})

const ready = async (gateway: TestGateway) => {
  const response = await fetch(`${gateway.url}/readyz`)
  return { status: response.status, body: await response.json() as Record<string, unknown> }
}

describe('store.readiness', () => {
  it('reads required (the default) or ignored, and refuses anything else naming the key', () => {
    expect(parseConfig('store: { type: redis }', {}).store.readiness).toBe('required')
    expect(parseConfig('store: { type: redis, readiness: ignored }', {}).store.readiness).toBe('ignored')
    expect(() => parseConfig('store: { type: redis, readiness: sometimes }', {})).toThrow('store.readiness')
  })

  it('is 503 when the store does not answer if required, 200 saying the store is down if ignored, and 200 for both once it is back', async () => {
    expect(await ready(required)).toEqual({ status: 200, body: { status: 'ready', store: 'up' } })
    expect(await ready(ignored)).toEqual({ status: 200, body: { status: 'ready', store: 'up' } })

    await redis.stop()
    expect(await ready(required)).toMatchObject({ status: 503, body: { error: 'session_store_unavailable' } })
    expect(await ready(ignored)).toMatchObject({ status: 200, body: { status: 'ready', store: 'down' } })
    // Liveness never depends on the store.
    expect((await fetch(`${required.url}/healthz`)).status).toBe(200)

    await redis.restart!()
    await waitFor(async () => (await ready(required)).status === 200, 5000, 'readiness once the store is back')
    expect(await ready(ignored)).toEqual({ status: 200, body: { status: 'ready', store: 'up' } })
  })
})
