// The sessions page for a browser whose session holds a provider's sign-in and no identity (a
// provider whose claims name no user; a plain OAuth 2.0 provider without userinfo): its routes
// admit it, and a re-reading found that the page, which sends a browser without a session to sign
// in and back, sent this one round that loop for ever (each turn a token exchange). It answers the
// 401 page instead.
import { describe, expect } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { oidcClient, type TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'

let gateway: TestGateway

it.beforeAll(async ({ startStack, upstream, op }) => {
  gateway = await startStack({
    providers: { demo: { ...oidcClient(op.issuer, 'c', 's'), claims: { user: 'no_such_claim' } } },
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }],
  })
})

describe('the sessions page for a browser signed in without an identity', () => {
  it('ends on a page (never sends the browser round sign-in and back forever)', async () => {
    const browser = new Browser()
    // Signed in: the route admits it.
    expect((await browser.navigate(`${gateway.url}/app/`, { login: 'noname' })).status).toBe(200)
    // The page that says no one is signed in who has a list, not a sign-in that comes back here.
    const page = await browser.fetch(`${gateway.url}/oauth/sessions/`, { headers: { accept: 'text/html' }, redirect: 'manual' })
    expect(page.status).toBe(401)
  })
})
