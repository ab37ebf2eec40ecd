// The gateway's home page, /oauth/: where a refused `next` and every "start over" link lead. `/`
// redirects there when no route serves it; browsers get a page (who is signed in, a sign-in link
// per provider, a sign-out form), API clients the /oauth/userinfo/ JSON shape.
import { describe, expect } from 'vitest'
import { Browser } from '../helpers/browser.js'
import type { TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'

let gateway: TestGateway

it.beforeAll(async ({ startStack, upstream }) => {
  gateway = await startStack({ store: { type: 'memory' }, routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }] })
})

describe('/oauth/', () => {
  it('is where / leads when no route serves /', async () => {
    const response = await fetch(`${gateway.url}/`, { redirect: 'manual' })
    expect(response.status).toBe(302)
    expect(response.headers.get('location')).toBe('/oauth/')
  })

  // A newcomer's reading: every page load logged `request rejected` (not_found) for the icon.
  it('answers a browser\'s /favicon.ico with 204 and no log line of a refusal, where no route serves it', async () => {
    const before = gateway.logs.length
    const response = await new Browser().fetch(`${gateway.url}/favicon.ico`)
    expect(response.status).toBe(204)
    expect(gateway.logs.slice(before).filter((line) => line.includes('request rejected'))).toEqual([])
  })

  it('shows a browser that nobody is signed in, with a sign-in link per provider and no sign-out button', async () => {
    const page = await (await new Browser().fetch(`${gateway.url}/oauth/`)).text()
    expect(page).toContain('You are not signed in.')
    expect(page).toContain(`href="${gateway.url}/oauth/login/demo/?next=%2Fapp%2F"`)
    expect(page).not.toContain('action="/oauth/logout/"')
  })

  it('shows who is signed in with which provider, and a sign-out form that ends the session', async () => {
    const browser = new Browser()
    expect((await browser.navigate(`${gateway.url}/app/`)).status).toBe(200)
    const page = await (await browser.fetch(`${gateway.url}/oauth/`)).text()
    expect(page).toMatch(/alice.*with <code>demo<\/code>/)
    expect(page).toContain('<form method="post" action="/oauth/logout/">')
    const signedOut = await browser.fetch(`${gateway.url}/oauth/logout/`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: gateway.url }, body: '' })
    expect(signedOut.status).toBe(200)
    expect((await (await browser.fetch(`${gateway.url}/oauth/`)).text())).toContain('You are not signed in.')
  })

  it('answers API clients with the userinfo shape', async () => {
    const anonymous = await fetch(`${gateway.url}/oauth/`, { headers: { accept: 'application/json' } })
    expect(anonymous.status).toBe(200)
    expect(await anonymous.json()).toEqual({ identities: {} })
    const browser = new Browser()
    await browser.navigate(`${gateway.url}/app/`)
    const signedIn = await browser.fetch(`${gateway.url}/oauth/`, { headers: { accept: 'application/json' } })
    expect(await signedIn.json()).toMatchObject({ identities: { demo: { sub: 'alice' } } })
  })
})
