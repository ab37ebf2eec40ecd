// The gate as the proxy applies it, through the real router (app.inject, memory store, a real
// upstream socket): each decision becomes its HTTP answer, public paths reach the upstream without
// credentials, and a route the router matched on the decoded path (`/café`, `/app!`) is judged
// like any other instead of being refused as outside the route.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, type TestGateway } from '../helpers/gateway.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

const json = { accept: 'application/json' }
const html = { accept: 'text/html,application/xhtml+xml' }
let upstream: Upstream
let gateway: TestGateway

beforeAll(async () => {
  upstream = await startUpstream()
  gateway = await startGateway({
    store: { type: 'memory' },
    providers: {
      // Never called: no test here signs in.
      demo: { clientId: 'c', clientSecret: 's', authorizeUrl: 'http://127.0.0.1:9/auth', tokenUrl: 'http://127.0.0.1:9/token', scope: 'profile' },
    },
    routes: [
      { path: '/app/', upstream: upstream.url, provider: 'demo', public: ['GET /app/static/*', 'OPTIONS *'] },
      { path: '/café/', upstream: upstream.url, provider: 'demo' },
      { path: '/app!/', upstream: upstream.url, provider: 'demo' },
      { path: '/@admin/', upstream: upstream.url, provider: 'demo' },
      { path: '/', upstream: upstream.url, auth: 'none' },
    ],
  }, { listen: false })
})

afterAll(async () => {
  await gateway?.close()
  await upstream?.close()
})

describe('the gate behind the router', () => {
  it('sends a browser without a session to sign in with the whole target as next', async () => {
    const res = await gateway.app.inject({ url: '/app/x?y=1', headers: html })
    expect(res.statusCode).toBe(302)
    expect(res.headers.location).toBe(`${gateway.url}/oauth/login/demo/?next=${encodeURIComponent('/app/x?y=1')}`)
  })

  it('answers an API client without a session 401 with login_url and WWW-Authenticate', async () => {
    const res = await gateway.app.inject({ url: '/app/x', headers: json })
    expect(res.statusCode).toBe(401)
    expect(res.json()).toMatchObject({ error: 'unauthenticated', login_url: `${gateway.url}/oauth/login/demo/?next=%2Fapp%2Fx` })
    expect(res.headers['www-authenticate']).toBe('Bearer realm="demo"')
  })

  it('forwards a public path without the client\'s credentials', async () => {
    const res = await gateway.app.inject({ url: '/app/static/a.js', headers: { ...json, authorization: 'Bearer planted', 'x-forwarded-user': 'admin' } })
    expect(res.statusCode).toBe(200)
    const seen = upstream.seen.at(-1)!
    expect(seen.url).toBe('/app/static/a.js')
    expect(seen.headers.authorization).toBeUndefined()
    expect(seen.headers['x-forwarded-user']).toBeUndefined()
  })

  it('does not let a public rule for GET admit a POST', async () => {
    const res = await gateway.app.inject({ method: 'POST', url: '/app/static/a.js', headers: json, payload: {} })
    expect(res.statusCode).toBe(401)
  })

  it('judges a route whose path the router matched decoded (non-ASCII), instead of refusing it', async () => {
    const res = await gateway.app.inject({ url: '/caf%C3%A9/menu', headers: json })
    expect(res.statusCode).toBe(401)
    expect(res.json()).toMatchObject({ error: 'unauthenticated' })
  })

  it('routes an encoded sub-delimiter, `:` or `@` to the route it spells, never to the public route beside it', async () => {
    for (const url of ['/@admin/x', '/%40admin/x', '/%40admin', '/%40%61dmin/x']) {
      const before = upstream.seen.length
      const res = await gateway.app.inject({ url, headers: json })
      expect([url, res.statusCode, upstream.seen.length]).toEqual([url, 401, before])
    }
    // The public route still serves what is its own, as the upstream receives it.
    const res = await gateway.app.inject({ url: '/wiki/Special%3AVersion', headers: json })
    expect(res.statusCode).toBe(200)
    expect(upstream.seen.at(-1)?.url).toBe('/wiki/Special:Version')
  })

  it('judges a route whose path the router matched decoded (a sub-delimiter)', async () => {
    for (const url of ['/app!/x', '/app%21/x']) {
      const res = await gateway.app.inject({ url, headers: json })
      expect([url, res.statusCode]).toEqual([url, 401])
    }
  })
})
