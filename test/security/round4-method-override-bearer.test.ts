// Security round 4, for machine clients: the same `_method` check holds for a caller with a bearer
// token (a real authorization server issuing client-credentials JWTs) as for a person, and its 403
// offers no sign-in and no other account.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { send } from '../helpers/form-upstream.js'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { CI, clientCredentialsToken, startMachineProvider } from '../helpers/machine.js'
import type { TestProvider } from '../helpers/oidc.js'
import { startOverrideUpstream, type OverrideUpstream } from '../helpers/override-upstream.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'

let redis: TestRedis
let app: OverrideUpstream
let op: TestProvider
let gateway: TestGateway

beforeAll(async () => {
  redis = await startRedis()
  app = await startOverrideUpstream()
  const { port, baseUrl } = await reserveBaseUrl()
  op = await startMachineProvider(baseUrl)
  gateway = await startGateway({
    server: { port, baseUrl },
    store: { type: 'redis', url: redis.url },
    providers: { demo: oidcClient(op.issuer, 'c', 's', 'openid email groups') },
    routes: [{ path: '/orders/', upstream: app.url, provider: 'demo', bearer: { audience: 'api://orders' }, allow: [{ methods: ['GET', 'POST'] }] }],
  })
})

afterAll(async () => {
  await gateway?.close()
  await Promise.all([op?.close(), app?.close()])
  await redis?.release()
})

describe('a machine client on a route whose rules admit GET and POST', () => {
  it('is refused 403 for _method=DELETE (no sign-in offered), and passes a plain POST byte for byte', async () => {
    const token = await clientCredentialsToken(op, CI, 'api://orders', 'orders.read')
    const headers = { accept: 'application/json', authorization: `Bearer ${token}`, 'content-type': 'application/x-www-form-urlencoded' }
    const before = app.handled.length
    const refused = await send(`${gateway.url}/orders/1`, { headers, body: 'qty=2&_method=DELETE' })
    expect(refused.status).toBe(403)
    const body = JSON.parse(refused.body) as Record<string, unknown>
    expect(body.error).toBe('forbidden')
    expect(body).not.toHaveProperty('login_url')
    expect(body).not.toHaveProperty('switch_account_url')
    expect(app.handled.length).toBe(before)
    const passed = await send(`${gateway.url}/orders/1`, { headers, body: 'qty=2' })
    expect(passed.status).toBe(200)
    expect(app.handled.at(-1)).toMatchObject({ method: 'POST', body: Buffer.from('qty=2') })
  })
})
