// Fault: an upstream whose port refuses connections (the application is down). Every request gets
// 502 bad_gateway at once, not after the route's timeout, and each is one warn line naming the
// route and the upstream, without a stack.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, type TestGateway } from '../helpers/gateway.js'
import { refusedUrl } from '../helpers/net.js'

const TIMEOUT_MS = 5000
const CONCURRENT = 50

describe('fault: an upstream that refuses connections', () => {
  let gateway: TestGateway
  let upstream: string

  beforeAll(async () => {
    upstream = await refusedUrl()
    gateway = await startGateway({ routes: [{ path: '/down/', upstream, auth: 'none', timeout: `${TIMEOUT_MS}ms`, maxConnections: 4 }] })
  })

  afterAll(async () => {
    await gateway?.close()
  })

  it(`answers ${CONCURRENT} concurrent requests 502 bad_gateway at once`, async () => {
    const start = performance.now()
    const answers = await Promise.all(Array.from({ length: CONCURRENT }, async (_, i) => {
      const response = await fetch(`${gateway.url}/down/x/${i}`)
      return { status: response.status, body: await response.json() as { error: string } }
    }))
    expect(answers.filter((answer) => answer.status === 502 && answer.body.error === 'bad_gateway')).toHaveLength(CONCURRENT)
    // "At once": before the route's timeout, which a refused connection must not wait for (a
    // request that waited for it would take that long at least).
    expect(performance.now() - start).toBeLessThan(TIMEOUT_MS)
  })

  it('logs each refused connection once, at warn, naming the route and the upstream, without a stack', () => {
    const lines = gateway.logs.map((line) => JSON.parse(line) as Record<string, unknown>)
    const refused = lines.filter((line) => line.msg === 'upstream refused the connection')
    expect(refused).toHaveLength(CONCURRENT)
    expect(refused[0]).toMatchObject({ level: 40, error: 'bad_gateway', route: '/down', upstream, timeoutMs: TIMEOUT_MS, errno: 'ECONNREFUSED' })
    expect(lines.filter((line) => line.msg === 'response errored' || line.msg === 'request failed')).toEqual([])
    expect(gateway.logs.filter((line) => line.includes('"stack"'))).toEqual([])
  })
})
