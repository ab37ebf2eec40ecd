// Several instances behave as one when they share Redis and session.secret: here two gateways on a
// real Redis Cluster (three nodes): sign in through one, use the session through the other, sign
// out through the other, and the session is gone on both (pub/sub drops the other instance's
// cached copy, kept 10 s here so that only the message can end it sooner).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { signIn } from '../helpers/browser.js'
import { endedElsewhere, oidcClient, startGateway, type TestGateway } from '../helpers/gateway.js'
import { freePort } from '../helpers/net.js'
import { startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { startRedisCluster, type TestCluster } from '../helpers/redis-cluster.js'
import { startUpstream, type SeenRequest, type Upstream } from '../helpers/upstream.js'

const json = { accept: 'application/json' }

describe('two instances on a Redis Cluster', () => {
  let cluster: TestCluster
  let op: TestProvider
  let upstream: Upstream
  let a: TestGateway
  let b: TestGateway

  beforeAll(async () => {
    cluster = await startRedisCluster()
    upstream = await startUpstream()
    const ports = [await freePort(), await freePort()]
    const urls = ports.map((port) => `http://127.0.0.1:${port}`)
    op = await startOidcProvider([{ client_id: 'c', client_secret: 's', redirect_uris: urls.map((url) => `${url}/oauth/authorized/demo/`) }])
    const instance = (i: number) => startGateway({
      server: { port: ports[i], baseUrl: urls[i] },
      session: { cacheTtl: '10s' },
      // Masters without replicas: nothing could acknowledge a sign-in (store.waitForReplica).
      store: { type: 'redis', cluster: cluster.urls, waitForReplica: false },
      providers: { demo: oidcClient(op.issuer, 'c', 's') },
      routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }],
    })
    a = await instance(0)
    b = await instance(1)
  })

  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()])
    await Promise.all([op?.close(), upstream?.close()])
    await cluster?.stop()
  })

  it('signs in on one, uses the session and signs out on the other', async () => {
    const { cookie, value } = await signIn(`${a.url}/app/`, 'dana')

    const onB = await fetch(`${b.url}/app/x`, { headers: { ...json, cookie } })
    expect(onB.status).toBe(200)
    const bearer = (await onB.json() as SeenRequest).headers.authorization!
    expect((await fetch(`${op.issuer}/me`, { headers: { authorization: bearer } })).status).toBe(200)

    // A has the session in its memory cache; signing out on B reaches it through pub/sub.
    expect((await fetch(`${a.url}/app/x`, { headers: { ...json, cookie } })).status).toBe(200)
    const logout = await fetch(`${b.url}/oauth/logout/?next=/`, { headers: { cookie }, redirect: 'manual' })
    expect(logout.status).toBe(302)
    expect((await fetch(`${b.url}/app/x`, { headers: { ...json, cookie } })).status).toBe(401)
    // Without the message A would serve the session from its cache for 10 s.
    await endedElsewhere(a, value)
    expect((await fetch(`${a.url}/readyz`)).status).toBe(200)
  })
})
