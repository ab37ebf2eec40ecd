// When the identity assertion cannot be signed (the key ring's store read fails, as in a Redis
// outage), the request is the store's failure: 503 `session_store_unavailable`, nothing forwarded,
// and forward-auth's error carries none of the session's credentials (before the request pipeline
// was one, forward-auth set the bearer token and identity headers and only then signed, so its 503
// went out with `Authorization: Bearer ...` and `X-Forwarded-User`).
import { afterAll, describe, expect } from 'vitest'
import { GatewayError } from '../../src/errors.js'
import { Browser } from '../helpers/browser.js'
import type { TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

describe('an assertion that cannot be signed', () => {
  let upstream: Upstream
  let gateway: TestGateway
  let cookie: string

  it.beforeAll(async ({ startStack }) => {
    upstream = await startUpstream()
    gateway = await startStack({
      server: { trustProxy: ['127.0.0.1'] },
      assertion: {},
      store: { type: 'memory' },
      routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo', assertion: true }],
    })
    // Signed in without visiting /app/, so that no assertion is cached yet.
    const browser = new Browser()
    expect((await browser.navigate(`${gateway.url}/oauth/login/demo/?next=/oauth/`)).status).toBe(200)
    cookie = `gw_session=${browser.cookies.get('gw_session')!.value}`
    gateway.app.assertions!.keys.signingKey = async () => { throw new GatewayError('session_store_unavailable', 'The session store is unreachable.') }
  })

  afterAll(async () => {
    await gateway?.close()
    await upstream?.close()
  })

  it('forward-auth answers 503 without the bearer token or identity headers', async () => {
    const response = await fetch(`${gateway.url}/oauth/auth/demo/`, { headers: { cookie, accept: 'application/json', 'x-forwarded-uri': '/page', 'x-forwarded-proto': 'http' } })
    expect(response.status).toBe(503)
    expect(await response.json()).toMatchObject({ error: 'session_store_unavailable' })
    expect(response.headers.get('authorization')).toBeNull()
    expect(response.headers.get('x-forwarded-user')).toBeNull()
    expect(response.headers.get('x-gateway-assertion')).toBeNull()
  })

  it('the proxy answers 503 and the application sees nothing', async () => {
    const before = upstream.seen.length
    const response = await fetch(`${gateway.url}/app/x`, { headers: { cookie, accept: 'application/json' } })
    expect(response.status).toBe(503)
    expect(await response.json()).toMatchObject({ error: 'session_store_unavailable' })
    expect(upstream.seen.length).toBe(before)
  })
})
