// A token request the authorization server refuses must not spend the credential it carried
// (src/agents/token-target.ts; an outside tester's finding).
// oidc-provider's refresh_token and authorization_code handlers consume the refresh token or code
// first and resolve the `resource` parameter after: a request naming another agents route is
// refused (400 invalid_target, no tokens issued), yet the refresh token it carried is rotated away,
// so the client's next, correct refresh counts as the reuse of a rotated token and ends the grant
// (its session, the person's consent). Same for a code: refused, yet spent.
import { randomBytes } from 'node:crypto'
import { afterAll, describe, expect } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { backToClient, pkcePair } from '../helpers/agent-grant.js'
import type { TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'

let gateway: TestGateway
const REDIRECT = 'http://127.0.0.1:8976/callback'

it.beforeAll(async ({ startStack, upstream }) => {
  gateway = await startStack({
    server: { trustProxy: ['127.0.0.1'] },
    routes: [
      { path: '/mcp', upstream: upstream.url, provider: 'demo', agents: true },
      { path: '/other/', upstream: upstream.url, provider: 'demo', agents: true },
    ],
  })
})
afterAll(async () => { await gateway?.close() })

/** A client allowed by alice for /mcp: its id, code and PKCE verifier (the code not exchanged yet). */
async function allowed (): Promise<{ id: string, code: string, verifier: string }> {
  const registered = await fetch(`${gateway.url}/oauth/agents/register`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-forwarded-for': randomBytes(4).join('.') }, body: JSON.stringify({ client_name: 'Refused request test', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' }) })
  expect(registered.status).toBe(201)
  const id = (await registered.json() as { client_id: string }).client_id
  const { verifier, challenge } = pkcePair()
  const query = new URLSearchParams({ response_type: 'code', client_id: id, redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: 'S256', resource: `${gateway.url}/mcp` })
  const browser = new Browser()
  const page = await browser.navigate(`${gateway.url}/oauth/agents/authorize?${query.toString()}`, { login: 'alice' })
  const body = await page.text()
  expect(page.status, body).toBe(200)
  const csrf = /name="csrf" value="([^"]+)"/.exec(body)![1]!
  const action = new URL(/<form method="post" action="([^"]+)"/.exec(body)![1]!, gateway.url).href
  const response = await browser.fetch(action, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: gateway.url }, body: new URLSearchParams({ csrf, decision: 'allow' }) })
  const code = (await backToClient(browser, response, action, REDIRECT)).searchParams.get('code')
  expect(code).toBeTruthy()
  return { id, code: code!, verifier }
}

const token = async (form: Record<string, string>) => await fetch(`${gateway.url}/oauth/agents/token`, { method: 'POST', body: new URLSearchParams(form) })
const call = async (accessToken: string) => await fetch(`${gateway.url}/mcp`, { headers: { authorization: `Bearer ${accessToken}` } })

describe('a token request refused with invalid_target', () => {
  it('leaves the refresh token it carried usable: the corrected refresh gets tokens, and the grant goes on', async () => {
    const { id, code, verifier } = await allowed()
    const exchanged = await token({ grant_type: 'authorization_code', code, client_id: id, redirect_uri: REDIRECT, code_verifier: verifier })
    expect(exchanged.status).toBe(200)
    const tokens = await exchanged.json() as { access_token: string, refresh_token: string }
    expect((await call(tokens.access_token)).status).toBe(200)

    // The client names another agents route (or a misspelling of its own): refused, nothing issued.
    const refused = await token({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: id, resource: `${gateway.url}/other/` })
    expect(refused.status).toBe(400)
    expect(await refused.json()).toMatchObject({ error: 'invalid_target' })

    // It kept its refresh token (it got no other) and tries again as it should have.
    const retried = await token({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: id })
    expect(retried.status, await retried.clone().text()).toBe(200)
    expect((await call(tokens.access_token)).status).toBe(200)
  })

  it('two resources, even its own twice, are refused the same way; its own route alone passes', async () => {
    const { id, code, verifier } = await allowed()
    const exchanged = await token({ grant_type: 'authorization_code', code, client_id: id, redirect_uri: REDIRECT, code_verifier: verifier, resource: `${gateway.url}/mcp` })
    expect(exchanged.status).toBe(200)
    const { refresh_token: refreshToken } = await exchanged.json() as { refresh_token: string }
    const twice = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: id })
    twice.append('resource', `${gateway.url}/mcp`)
    twice.append('resource', `${gateway.url}/mcp`)
    const refused = await fetch(`${gateway.url}/oauth/agents/token`, { method: 'POST', body: twice })
    expect(refused.status).toBe(400)
    expect(refused.headers.get('cache-control')).toBe('no-store')
    expect(await refused.json()).toMatchObject({ error: 'invalid_target' })
    const own = await token({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: id, resource: `${gateway.url}/mcp` })
    expect(own.status, await own.clone().text()).toBe(200)
    expect(await own.json()).toHaveProperty('refresh_token')
  })

  // An outside tester's: a Content-Type the gateway's form reader read otherwise than oidc-provider
  // (Koa's content-type package): the form decoded as UTF-16, its resource unseen, the token spent.
  it.each([
    ['a charset= inside a quoted parameter', 'application/x-www-form-urlencoded; x="; charset=utf-16le"'],
    ['a trailing semicolon (Koa reads no charset)', 'application/x-www-form-urlencoded;charset=utf-16le;'],
  ])('%s: refused as oidc-provider reads the form, nothing spent', async (_name, contentType) => {
    const { id, code, verifier } = await allowed()
    const exchanged = await token({ grant_type: 'authorization_code', code, client_id: id, redirect_uri: REDIRECT, code_verifier: verifier })
    const { refresh_token: refreshToken } = await exchanged.json() as { refresh_token: string }
    const form = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: id, resource: `${gateway.url}/other/` }).toString()
    const refused = await fetch(`${gateway.url}/oauth/agents/token`, { method: 'POST', headers: { 'content-type': contentType }, body: form })
    expect(await refused.json()).toMatchObject({ error: 'invalid_target' })
    const retried = await token({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: id })
    expect(retried.status, await retried.clone().text()).toBe(200)
  })

  it('a code used already, sent again naming another route, is a code used twice: invalid_grant, and its grant ends', async () => {
    const { id, code, verifier } = await allowed()
    const exchanged = await token({ grant_type: 'authorization_code', code, client_id: id, redirect_uri: REDIRECT, code_verifier: verifier })
    const { refresh_token: refreshToken } = await exchanged.json() as { refresh_token: string }
    const replayed = await token({ grant_type: 'authorization_code', code, client_id: id, redirect_uri: REDIRECT, code_verifier: verifier, resource: `${gateway.url}/other/` })
    expect(await replayed.json()).toMatchObject({ error: 'invalid_grant' })
    expect((await token({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: id })).status).toBe(400)
  })

  it('leaves the code it carried usable for the corrected exchange', async () => {
    const { id, code, verifier } = await allowed()
    const refused = await token({ grant_type: 'authorization_code', code, client_id: id, redirect_uri: REDIRECT, code_verifier: verifier, resource: `${gateway.url}/other/` })
    expect(refused.status).toBe(400)
    expect(await refused.json()).toMatchObject({ error: 'invalid_target' })
    const retried = await token({ grant_type: 'authorization_code', code, client_id: id, redirect_uri: REDIRECT, code_verifier: verifier })
    expect(retried.status, await retried.clone().text()).toBe(200)
  })
})
