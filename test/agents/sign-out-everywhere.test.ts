// "Sign out everywhere" and an agent's sign-in still under way: a person's sign-in for an agent is
// kept until they allow it (src/agents/pending.ts) and is no session yet, so the person's list does
// not hold it. An outside tester's finding: a consent page left open in another browser (a device
// the person is locking out) could still Allow after "sign out everywhere", minting a grant of the
// person. Sign out everywhere now marks the person for state.ttl, and an Allow of a sign-in kept
// from before the mark is refused (403) and makes nothing; one signed in afterwards is allowed.
import { randomBytes } from 'node:crypto'
import { expect } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { backToClient, pkcePair } from '../helpers/agent-grant.js'
import type { TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'

let gateway: TestGateway
const REDIRECT = 'http://127.0.0.1:8976/callback'
const FORM = { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' }

it.beforeAll(async ({ startStack, upstream }) => {
  gateway = await startStack({
    server: { trustProxy: ['127.0.0.1'] },
    routes: [
      { path: '/mcp', upstream: upstream.url, provider: 'demo', agents: true },
      { path: '/app/', upstream: upstream.url, provider: 'demo' },
    ],
  })
})

async function client (): Promise<{ id: string, verifier: string, url: string }> {
  const response = await fetch(`${gateway.url}/oauth/agents/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-forwarded-for': randomBytes(4).join('.') },
    body: JSON.stringify({ client_name: 'Attack agent', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' }),
  })
  expect(response.status).toBe(201)
  const id = (await response.json() as { client_id: string }).client_id
  const { verifier, challenge } = pkcePair()
  const query = new URLSearchParams({ response_type: 'code', client_id: id, redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: 'S256', resource: `${gateway.url}/mcp` })
  return { id, verifier, url: `${gateway.url}/oauth/agents/authorize?${query.toString()}` }
}

async function toConsent (browser: Browser, url: string, login: string): Promise<{ csrf: string, action: string }> {
  const page = await browser.navigate(url, { login })
  const body = await page.text()
  expect(page.status, body).toBe(200)
  return { csrf: /name="csrf" value="([^"]+)"/.exec(body)![1]!, action: new URL(/<form method="post" action="([^"]+)"/.exec(body)![1]!, gateway.url).href }
}

async function signOutEverywhere (browser: Browser): Promise<string> {
  const out = await browser.fetch(`${gateway.url}/oauth/logout/?everywhere=1`, { method: 'POST', body: '', headers: { ...FORM, accept: 'text/html' } })
  return await out.text()
}

async function call (token: string): Promise<number> {
  const response = await fetch(`${gateway.url}/mcp`, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } })
  await response.arrayBuffer()
  return response.status
}

/** The code's exchange at the token endpoint. */
async function exchange (agent: { id: string, verifier: string }, code: string): Promise<Response> {
  return await fetch(`${gateway.url}/oauth/agents/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'authorization_code', code, client_id: agent.id, redirect_uri: REDIRECT, code_verifier: agent.verifier, resource: `${gateway.url}/mcp` }) })
}

/** The person's laptop, signed in, and another browser showing the consent page of a new agent, signed in there too. */
async function consentBeside (login: string): Promise<{ laptop: Browser, other: Browser, agent: { id: string, verifier: string }, consent: { csrf: string, action: string } }> {
  const laptop = new Browser()
  expect((await laptop.navigate(`${gateway.url}/app/`, { login })).status).toBe(200)
  const other = new Browser()
  const agent = await client()
  return { laptop, other, agent, consent: await toConsent(other, agent.url, login) }
}

async function allow (browser: Browser, consent: { csrf: string, action: string }): Promise<Response> {
  return await browser.fetch(consent.action, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: gateway.url }, body: new URLSearchParams({ csrf: consent.csrf, decision: 'allow' }) })
}

it('refuses the Allow of a consent page opened before "sign out everywhere": no code, no grant', async () => {
  // Another browser has signed in at the provider for an agent and shows the consent page.
  const { laptop, other, consent } = await consentBeside('pend-alice')
  expect(await signOutEverywhere(laptop)).toContain('You are signed out everywhere')
  const response = await allow(other, consent)
  expect(response.status).toBe(403)
  expect(response.headers.get('location')).toBeNull()
  expect(await response.text()).toContain('before its person signed out everywhere')
  // Nothing of it is listed: a new sign-in of the person sees only its own session.
  const again = new Browser()
  expect((await again.navigate(`${gateway.url}/app/`, { login: 'pend-alice' })).status).toBe(200)
  const listed = await again.fetch(`${gateway.url}/oauth/sessions/`, { headers: { accept: 'application/json' } })
  expect((await listed.json() as { sessions: unknown[] }).sessions).toHaveLength(1)
})

it('allows a consent page signed in after "sign out everywhere"', async () => {
  const laptop = new Browser()
  expect((await laptop.navigate(`${gateway.url}/app/`, { login: 'pend-carol' })).status).toBe(200)
  expect(await signOutEverywhere(laptop)).toContain('You are signed out everywhere')
  const other = new Browser()
  const agent = await client()
  const consent = await toConsent(other, agent.url, 'pend-carol')
  const response = await allow(other, consent)
  const code = (await backToClient(other, response, consent.action, REDIRECT)).searchParams.get('code')!
  const token = await exchange(agent, code)
  expect(token.status).toBe(200)
  expect(await call((await token.json() as { access_token: string }).access_token)).toBe(200)
})

it('ends a grant whose code was issued before "sign out everywhere" (its token 401, or the code refused)', async () => {
  const { laptop, other, agent, consent } = await consentBeside('pend-bob')
  const code = (await backToClient(other, await allow(other, consent), consent.action, REDIRECT)).searchParams.get('code')!
  expect(await signOutEverywhere(laptop)).toContain('You are signed out everywhere')
  const token = await exchange(agent, code)
  if (token.status === 200) expect(await call((await token.json() as { access_token: string }).access_token)).toBe(401)
  else expect(token.status).toBe(400)
})
