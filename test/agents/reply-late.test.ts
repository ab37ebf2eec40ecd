// The agents' authorization server when a Redis reply comes later than store.timeout (a slow link:
// Redis did the command, the gateway heard nothing in time). A store fault is a 503 and never a
// sign-out, and the retry of the same request goes on (outside testers' findings, each seen
// failing before): a refresh whose one-use claim was answered late ended the grant at its retry (a
// second use of the token, to the gateway); the consent's Allow took the kept sign-in first, so
// its retry after a late reply found nothing (403) and the person had to start over from the agent;
// the consent page's read of the interaction answered late was "This authorization has expired"
// (400), not the store's 503; and a revocation (RFC 7009) whose grant's revoke failed after the
// token was deleted was answered 200 at its retry, the grant going on.
import { randomBytes } from 'node:crypto'
import { auth } from '@modelcontextprotocol/sdk/client/auth.js'
import { Redis } from 'ioredis'
import { expect } from 'vitest'
import { agentGrant, backToClient, MemoryProvider, pkcePair, type AgentTokens } from '../helpers/agent-grant.js'
import { Browser } from '../helpers/browser.js'
import type { TestGateway } from '../helpers/gateway.js'
import { startHoldProxy, type HoldProxy } from '../helpers/hold-proxy.js'
import { refusedUrl } from '../helpers/net.js'
import { test as it } from '../helpers/stack.js'

/** store.timeout: the bound of one store command, which a held reply outlasts. */
const STORE_TIMEOUT_MS = 300
const REDIRECT = 'http://127.0.0.1:8976/callback'
const DEVICE_CODE = 'urn:ietf:params:oauth:grant-type:device_code'

let gateway: TestGateway
let proxy: HoldProxy

it.beforeAll(async ({ startStack, upstream, redis }) => {
  proxy = await startHoldProxy(redis.url)
  gateway = await startStack({
    store: { type: 'redis', url: proxy.url, timeout: `${STORE_TIMEOUT_MS}ms` },
    session: { cacheTtl: 0 },
    routes: [{ path: '/other/', upstream: upstream.url, provider: 'demo', agents: true }],
    agents: { deviceFlow: true },
  })
})

it.afterAll(async () => {
  await gateway?.close()
  await proxy?.close()
})

async function refresh (id: string, refreshToken: string): Promise<{ status: number, body: Record<string, unknown> }> {
  const answer = await fetch(`${gateway.url}/oauth/agents/token`, { method: 'POST', headers: { accept: 'application/json' }, body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: id }) })
  const text = await answer.text()
  let body: Record<string, unknown>
  try { body = JSON.parse(text) as Record<string, unknown> } catch { body = { text } }
  return { status: answer.status, body }
}

async function routeStatus (token: string): Promise<number> {
  const answer = await fetch(`${gateway.url}/other/x`, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } })
  await answer.arrayBuffer()
  return answer.status
}

it('a refresh whose one-use claim is answered late: 503, and the retry with the same refresh token keeps the grant', async () => {
  const { id, tokens } = await agentGrant(gateway.url, 'late-refresh', `${gateway.url}/other`)
  expect(await routeStatus(tokens.access_token)).toBe(200)

  const held = proxy.armReplies(['in-use', 'nx'])
  const first = await refresh(id, tokens.refresh_token)
  await held
  proxy.release()
  // A store fault: 503 (never a 400 invalid_grant that would make the client drop its grant), with
  // the OAuth code a client retries (an outside tester's finding: it was server_error, which the
  // MCP SDK takes for a refresh that failed for good).
  expect({ status: first.status, error: first.body.error, description: first.body.error_description }, JSON.stringify(first.body))
    .toEqual({ status: 503, error: 'temporarily_unavailable', description: 'The session store cannot be reached right now; try again shortly.' })

  // The client retries with the only refresh token it has.
  const retry = await refresh(id, tokens.refresh_token)
  const stillWorks = await routeStatus(tokens.access_token)
  expect({ retry: retry.status, retryError: retry.body.error, grantStillWorks: stillWorks }).toEqual({ retry: 200, retryError: undefined, grantStillWorks: 200 })
  // And the new refresh token works; the old one, now used for real, is not reused twice.
  const next = retry.body as unknown as AgentTokens
  expect((await refresh(id, next.refresh_token)).status).toBe(200)
})

// A failover's demoted master: the claim landed, then the store refused every write, the claim's
// undo too. The client got 503 and keeps its old refresh token; its retry, once the store writes
// again, was a second use and ended the grant (an outside tester's finding).
it('a refresh whose claim landed and whose undo the store refused (a demoted master): the retry, once the store writes again, keeps the grant', async ({ redis }) => {
  const { id, tokens } = await agentGrant(gateway.url, 'refused-undo', `${gateway.url}/other`)
  const admin = new Redis(redis.url)
  try {
    const held = proxy.armReplies(['in-use', 'nx'])
    const first = refresh(id, tokens.refresh_token)
    await held
    // Once the claim is in Redis, Redis refuses writes: the claim's undo is refused too.
    while ((await admin.keys('gw:agents:RefreshToken:*:in-use')).length === 0) await new Promise((resolve) => setImmediate(resolve))
    const absent = new URL(await refusedUrl())
    await admin.call('REPLICAOF', absent.hostname, absent.port)
    const answered = await first
    proxy.release()
    expect({ status: answered.status, error: answered.body.error }).toEqual({ status: 503, error: 'temporarily_unavailable' })
    await admin.call('REPLICAOF', 'NO', 'ONE')

    const retry = await refresh(id, tokens.refresh_token)
    expect({ retry: retry.status, retryError: retry.body.error, grantStillWorks: await routeStatus(tokens.access_token) }).toEqual({ retry: 200, retryError: undefined, grantStillWorks: 200 })
    const next = retry.body as unknown as AgentTokens
    expect((await refresh(id, next.refresh_token)).status).toBe(200)
    // The old token, used for real now, is still told from a retry: its next use ends the grant.
    expect((await refresh(id, tokens.refresh_token)).body.error).toBe('invalid_grant')
    expect(await routeStatus(tokens.access_token)).toBe(401)
  } finally {
    await admin.call('REPLICAOF', 'NO', 'ONE')
    admin.disconnect()
  }
})

// A claim another request holds (one under way at another instance, or one whose undo the store
// refused there): the use is answered 503, not taken for a second use; once that request has
// been answered (its token marked used), it is one, and the grant ends.
it('a refresh token another request holds: 503 and the grant goes on; once that request was answered, a second use ends the grant', async ({ redis }) => {
  const admin = new Redis(redis.url)
  try {
    const before = new Set(await admin.keys('gw:agents:RefreshToken:*'))
    const { id, tokens } = await agentGrant(gateway.url, 'claimed-elsewhere', `${gateway.url}/other`)
    const [record] = (await admin.keys('gw:agents:RefreshToken:*')).filter((key) => !before.has(key))
    await admin.set(`${record!}:in-use`, 'another-request', 'PX', 30_000)
    const meanwhile = await refresh(id, tokens.refresh_token)
    expect({ status: meanwhile.status, error: meanwhile.body.error, description: meanwhile.body.error_description, grantStillWorks: await routeStatus(tokens.access_token) })
      .toEqual({ status: 503, error: 'temporarily_unavailable', description: 'This code or token is being used by another request right now; try again shortly.', grantStillWorks: 200 })
    await admin.set(`${record!}:consumed`, 'used', 'PX', 30_000)
    expect((await refresh(id, tokens.refresh_token)).body.error).toBe('invalid_grant')
    expect(await routeStatus(tokens.access_token)).toBe(401)
  } finally {
    admin.disconnect()
  }
})

// The device flow's pace is read and written in the store beside oidc-provider's answer: a reply
// late there was a plain-text 503 from outside oidc-provider (an outside tester's finding).
it('a device code\'s poll whose pace the store answers late: the poll\'s own answer (authorization_pending), in JSON', async () => {
  const registered = await fetch(`${gateway.url}/oauth/agents/register`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-forwarded-for': randomBytes(4).join('.') }, body: JSON.stringify({ client_name: 'Late CLI', grant_types: [DEVICE_CODE], token_endpoint_auth_method: 'none' }) })
  const id = (await registered.json() as { client_id: string }).client_id
  const started = await fetch(`${gateway.url}/oauth/agents/device/auth`, { method: 'POST', body: new URLSearchParams({ client_id: id }) })
  const { device_code: deviceCode } = await started.json() as { device_code: string }
  const poll = async () => await fetch(`${gateway.url}/oauth/agents/token`, { method: 'POST', body: new URLSearchParams({ grant_type: DEVICE_CODE, device_code: deviceCode, client_id: id }) })
  const held = proxy.armReplies(['device-poll'])
  const answer = await poll()
  const text = await answer.text()
  await held
  proxy.release()
  expect({ status: answer.status, type: answer.headers.get('content-type'), text }).toMatchObject({ status: 400, type: expect.stringContaining('application/json'), text: expect.stringContaining('"authorization_pending"') })
})

/** Up to the consent page: the browser on it, its form's action and csrf. */
async function consentPage (login: string): Promise<{ browser: Browser, action: string, csrf: string }> {
  const resource = `${gateway.url}/other`
  const registered = await fetch(`${gateway.url}/oauth/agents/register`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-forwarded-for': randomBytes(4).join('.') }, body: JSON.stringify({ client_name: 'Test agent', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' }) })
  expect(registered.status).toBe(201)
  const id = (await registered.json() as { client_id: string }).client_id
  const { challenge } = pkcePair()
  const query = new URLSearchParams({ response_type: 'code', client_id: id, redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: 'S256', resource })
  const browser = new Browser()
  const page = await browser.navigate(`${gateway.url}/oauth/agents/authorize?${query.toString()}`, { login })
  const body = await page.text()
  expect(page.status, body).toBe(200)
  const csrf = /name="csrf" value="([^"]+)"/.exec(body)![1]!
  const action = new URL(/<form method="post" action="([^"]+)"/.exec(body)![1]!, gateway.url).href
  return { browser, action, csrf }
}

async function allow (browser: Browser, action: string, csrf: string): Promise<Response> {
  return await browser.fetch(action, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: gateway.url, accept: 'text/html' }, body: new URLSearchParams({ csrf, decision: 'allow' }) })
}

it('the interaction\'s read answered late: 503 session_store_unavailable, not "this authorization has expired"', async () => {
  const { browser, action, csrf } = await consentPage('consent-late-read')
  const held = proxy.armReplies(['agents:interaction:'])
  const answer = await allow(browser, action, csrf)
  const text = await answer.text()
  await held
  proxy.release()
  expect({ status: answer.status, storeNamed: text.includes('session_store_unavailable') }, text.slice(0, 400)).toEqual({ status: 503, storeNamed: true })
})

// The Allow's writes (the grant's session label) and oidc-provider's own (the interaction's result:
// an attacker's finding, after the first fix, that write came after the kept sign-in was deleted, so
// the browser got no answer, the retry was 403, and a grant no client got was left with its session).
it.each([['the grant is written', ['grant-label']], ['oidc-provider writes the interaction\'s result', ['set', 'interaction:']]])('a reply late while %s: 503, and the same Allow again completes the authorization', async (_when, on) => {
  const { browser, action, csrf } = await consentPage(`consent-late-${on[0]}`)
  const held = proxy.armReplies(on)
  const first = await allow(browser, action, csrf)
  await first.arrayBuffer()
  await held
  proxy.release()
  expect(first.status).toBe(503)
  const again = await allow(browser, action, csrf)
  const refused = again.status >= 400 ? (await again.text()).slice(0, 400) : ''
  // A redirect on its way back to the client with a code (never the 403 "expired, or answered already").
  expect([302, 303], refused).toContain(again.status)
  expect((await backToClient(browser, again, action, REDIRECT)).searchParams.get('code')).toBeTruthy()
})

it('a revoke (RFC 7009) whose grant-list read is answered late, then retried, ends the grant', async () => {
  const { id, tokens } = await agentGrant(gateway.url, 'agent-late', `${gateway.url}/other`)
  const bearer = { authorization: `Bearer ${tokens.access_token}` }
  expect((await fetch(`${gateway.url}/other/x`, { headers: bearer })).status).toBe(200)
  const revoke = async () => await fetch(`${gateway.url}/oauth/agents/revoke`, { method: 'POST', body: new URLSearchParams({ token: tokens.refresh_token, client_id: id }) })
  const first = await proxy.lateFrom(['smembers', 'agents:grant:'], revoke)
  // The client is told the revoke failed (or it was done): either way, tried again, the grant must be over.
  const statuses = [first.status]
  if (first.status !== 200) statuses.push((await revoke()).status)
  const after = (await fetch(`${gateway.url}/other/x`, { headers: bearer })).status
  expect({ statuses, accessTokenAfterRevoke: after }).toMatchObject({ accessTokenAfterRevoke: 401 })
})

it('the MCP SDK refreshing while the store answers late is not sent back to an interactive sign-in (its refresh token works at the retry)', async () => {
  const { id, tokens } = await agentGrant(gateway.url, 'late-refresh-sdk', `${gateway.url}/other`)
  const provider = new MemoryProvider('http://127.0.0.1:8976/callback', { client_id: id, redirect_uris: ['http://127.0.0.1:8976/callback'] }, { ...tokens, token_type: 'Bearer' })
  const serverUrl = `${gateway.url}/other/`
  const held = proxy.armReplies(['in-use', 'nx'])
  let outcome: string
  try {
    outcome = await auth(provider, { serverUrl })
  } catch (error) {
    outcome = `threw ${(error as Error).constructor.name}: ${(error as Error).message}`
  }
  await held
  proxy.release()
  // A store blip: the SDK should get an error it surfaces (temporarily_unavailable), not start a new sign-in in the person's browser.
  const afterwards = await auth(provider, { serverUrl })
  expect({ outcome, sentToSignIn: provider.authorizationUrl !== undefined, afterwards }).toMatchObject({ sentToSignIn: false, afterwards: 'AUTHORIZED' })
})
