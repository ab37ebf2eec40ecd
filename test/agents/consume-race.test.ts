// An agent's code, device code or refresh token used twice across two instances on one Redis (X,
// and Y behind a hold-proxy), and a use whose "used" mark the store refused (an attacker's
// findings, each seen failing before): a second use that read the code before the first was
// answered, and claimed it once the first gave its claim back, got tokens too (consume did not look
// at the mark when its claim succeeded); and a 200 whose mark the store refused left the old refresh
// token usable again once its claim ended. Now the second use ends the grant, and an answer whose
// mark cannot be written is 503, its tokens never sent, and the retry goes on.
import { randomBytes } from 'node:crypto'
import { expect } from 'vitest'
import { agentGrant, backToClient, pkcePair } from '../helpers/agent-grant.js'
import { Browser } from '../helpers/browser.js'
import { oidcClient, type TestGateway } from '../helpers/gateway.js'
import { heldInstance, type HoldProxy } from '../helpers/hold-proxy.js'
import { refusedUrl } from '../helpers/net.js'
import { test as it } from '../helpers/stack.js'

const REDIRECT = 'http://127.0.0.1:8976/callback'
let x: TestGateway
let y: TestGateway
let proxy: HoldProxy
let closeY: () => Promise<void>

it.beforeAll(async ({ startStack, upstream, redis, op }) => {
  const raw = {
    store: { type: 'redis', url: redis.url, timeout: '5s' },
    routes: [{ path: '/other/', upstream: upstream.url, provider: 'demo', agents: true }],
    agents: { deviceFlow: true },
  }
  x = await startStack(raw)
  ;({ gateway: y, proxy, close: closeY } = await heldInstance(redis.url, { ...raw, server: { baseUrl: x.url }, providers: { demo: oidcClient(op.issuer, 'c', 's') } }))
})

it.afterAll(async () => { await closeY?.() })

async function codeFor (login: string): Promise<{ id: string, code: string, verifier: string, resource: string }> {
  const resource = `${x.url}/other`
  const registered = await fetch(`${x.url}/oauth/agents/register`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-forwarded-for': randomBytes(4).join('.') }, body: JSON.stringify({ client_name: 'Race', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' }) })
  const id = (await registered.json() as { client_id: string }).client_id
  const { verifier, challenge } = pkcePair()
  const query = new URLSearchParams({ response_type: 'code', client_id: id, redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: 'S256', resource })
  const browser = new Browser()
  const page = await browser.navigate(`${x.url}/oauth/agents/authorize?${query.toString()}`, { login })
  const body = await page.text()
  const csrf = /name="csrf" value="([^"]+)"/.exec(body)![1]!
  const action = new URL(/<form method="post" action="([^"]+)"/.exec(body)![1]!, x.url).href
  const response = await browser.fetch(action, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: x.url }, body: new URLSearchParams({ csrf, decision: 'allow' }) })
  const code = (await backToClient(browser, response, action, REDIRECT)).searchParams.get('code')!
  return { id, code, verifier, resource }
}

async function token (gateway: TestGateway, form: Record<string, string>): Promise<{ status: number, headers: Headers, body: Record<string, unknown> }> {
  const answer = await fetch(`http://127.0.0.1:${gateway.config.server.port}/oauth/agents/token`, { method: 'POST', headers: { accept: 'application/json' }, body: new URLSearchParams(form) })
  const text = await answer.text()
  try { return { status: answer.status, headers: answer.headers, body: JSON.parse(text) as Record<string, unknown> } } catch { return { status: answer.status, headers: answer.headers, body: { text } } }
}

async function routeStatus (accessToken: string): Promise<number> {
  const answer = await fetch(`${x.url}/other/x`, { headers: { authorization: `Bearer ${accessToken}`, accept: 'application/json' } })
  await answer.arrayBuffer()
  return answer.status
}

type Answer = Awaited<ReturnType<typeof token>>

/** The command that marks a code or token used: SET <record>:consumed <the request's own value> PX <ms> NX. */
const MARK = [':consumed\r\n', '\r\nset\r\n', '\r\nnx\r\n']

/**
 * Two uses of one code or token: the attacker's at Y, held at its claim once it has read the record;
 * the legit one at X, answered meanwhile (marked used, its claim given back); then Y's let go. The
 * second's answer, the 200s, and how many of their access tokens still work.
 */
async function raced (model: string, form: Record<string, string>): Promise<{ late: Answer, ok: Answer[], working: number }> {
  const held = proxy.arm([model], ['in-use'])
  const second = token(y, form)
  await held
  const first = await token(x, form)
  expect(first.status, JSON.stringify(first.body)).toBe(200)
  proxy.release()
  const late = await second
  const ok = [first, late].filter((each) => each.status === 200)
  const working = await Promise.all(ok.map(async (each) => await routeStatus(String(each.body.access_token))))
  return { late, ok, working: working.filter((status) => status === 200).length }
}

it('an authorization code exchanged twice (the second read it before the first was answered, claims it after): one set of tokens at most', async () => {
  const { id, code, verifier, resource } = await codeFor('race-code')
  const { late, working } = await raced('AuthorizationCode', { grant_type: 'authorization_code', code, client_id: id, redirect_uri: REDIRECT, code_verifier: verifier, resource })
  expect({ secondStatus: late.status, secondError: late.body.error, workingAccessTokens: working }).toEqual({ secondStatus: 400, secondError: 'invalid_grant', workingAccessTokens: 0 })
})

it('a refresh token used twice the same way: the second read it before the first was answered; whatever it gets, nothing of the grant works after', async () => {
  const { id, tokens } = await agentGrant(x.url, 'race-refresh', `${x.url}/other`)
  const { ok, working } = await raced('RefreshToken', { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: id })
  const refreshed = await Promise.all(ok.map(async (each) => (await token(x, { grant_type: 'refresh_token', refresh_token: String(each.body.refresh_token), client_id: id })).status))
  expect({ workingAccessTokens: working, workingRefreshTokens: refreshed.filter((s) => s === 200).length }).toEqual({ workingAccessTokens: 0, workingRefreshTokens: 0 })
})

/**
 * A use at Y whose mark is held at the proxy while a failover demotes the master (REPLICAOF an
 * absent host), so the mark and its undo are refused; the master is promoted again once Y answered.
 */
async function failedOver (admin: import('ioredis').Redis, model: string, form: Record<string, string>): Promise<Answer> {
  const held = proxy.arm([model], MARK)
  const first = token(y, form)
  await held
  const absent = new URL(await refusedUrl())
  await admin.call('REPLICAOF', absent.hostname, absent.port)
  proxy.release()
  const answered = await first
  await admin.call('REPLICAOF', 'NO', 'ONE')
  return answered
}

// A failover demoted the master between the new tokens' save and the mark: the answer is 503 (its
// tokens never leave), the claim is Y's until it is given back or ends (X answers 503 meanwhile), and
// then the client's retry with its old refresh token goes on; that token used after is a second use.
it('a refresh whose used mark the store refused: 503, no tokens; the retry goes on once the claim ends, and the old token after it is a second use', async ({ redis }) => {
  const { Redis } = await import('ioredis')
  const admin = new Redis(redis.url)
  try {
    const before = new Set(await admin.keys('gw:agents:RefreshToken:*'))
    const { id, tokens } = await agentGrant(x.url, 'refused-mark', `${x.url}/other`)
    const [record] = (await admin.keys('gw:agents:RefreshToken:*')).filter((key) => !before.has(key) && !key.includes(':'.repeat(1) + 'in-use'))
    const form = { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: id }
    // The legit client refreshes at Y; its mark (SET <record>:consumed <its own value> NX) is refused.
    const answered = await failedOver(admin, 'RefreshToken', form)
    expect({ status: answered.status, error: answered.body.error, tokens: answered.body.refresh_token }).toEqual({ status: 503, error: 'temporarily_unavailable', tokens: undefined })
    // At X, Y's claim holds the token: 503, and the grant goes on.
    expect((await token(x, form)).body.error).toBe('temporarily_unavailable')
    expect(await routeStatus(tokens.access_token)).toBe(200)
    // The claim's life (30 s) ends: the retry goes on.
    await admin.del(`${record!}:in-use`)
    const retry = await token(x, form)
    expect(retry.status, JSON.stringify(retry.body)).toBe(200)
    // The old token, used for real now, is a second use.
    const again = await token(x, form)
    expect({ again: again.body.error, grant: await routeStatus(String(retry.body.access_token)) }).toEqual({ again: 'invalid_grant', grant: 401 })
  } finally {
    await admin.call('REPLICAOF', 'NO', 'ONE')
    admin.disconnect()
  }
})

it('a device code polled by two CLIs after approval (the second read it before the first was answered, claims it after): one set of tokens at most', async () => {
  const DEVICE = 'urn:ietf:params:oauth:grant-type:device_code'
  const registered = await fetch(`${x.url}/oauth/agents/register`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-forwarded-for': randomBytes(4).join('.') }, body: JSON.stringify({ client_name: 'Race CLI', grant_types: [DEVICE, 'refresh_token'], token_endpoint_auth_method: 'none' }) })
  const id = (await registered.json() as { client_id: string }).client_id
  const resource = `${x.url}/other`
  const started = await (await fetch(`${x.url}/oauth/agents/device/auth`, { method: 'POST', body: new URLSearchParams({ client_id: id, resource }) })).json() as { device_code: string, user_code: string }
  const browser = new Browser()
  const submit = async (form: Record<string, string>) => await browser.fetch(`${x.url}/oauth/agents/device`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: x.url }, body: new URLSearchParams(form) })
  const xsrfOf = (html: string) => /name="xsrf" value="([^"]+)"/.exec(html)?.[1] ?? ''
  const entry = await (await browser.fetch(`${x.url}/oauth/agents/device`)).text()
  const confirmation = await (await submit({ xsrf: xsrfOf(entry), user_code: started.user_code })).text()
  const confirmed = await submit({ xsrf: xsrfOf(confirmation), user_code: started.user_code, confirm: 'yes' })
  const consentPage = await browser.navigate(new URL(confirmed.headers.get('location')!, x.url).href, { login: 'race-device' })
  const consent = await consentPage.text()
  const csrf = /name="csrf" value="([^"]+)"/.exec(consent)![1]!
  const action = new URL(/<form method="post" action="([^"]+)"/.exec(consent)![1]!, x.url).href
  let last = await browser.fetch(action, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: x.url }, body: new URLSearchParams({ csrf, decision: 'allow' }) })
  while (last.status === 302 || last.status === 303) last = await browser.fetch(new URL(last.headers.get('location')!, action).href)
  const { late, working } = await raced('DeviceCode', { grant_type: DEVICE, device_code: started.device_code, client_id: id })
  expect({ secondStatus: late.status, secondError: late.body.error, workingAccessTokens: working }).toEqual({ secondStatus: 400, secondError: 'invalid_grant', workingAccessTokens: 0 })
})

// The mark of a use refused (a failover), its undo refused too and owed at Y; the retry at X then
// marks the code used. Y's owed undo, done before its next token request, took that mark away, and
// the code was used a third time, with tokens (a re-reader's finding): a mark is taken back only
// while it holds its own request's value.
it('an owed undo of a refused mark does not take away the mark another instance wrote since: the code stays used', async ({ redis }) => {
  const { Redis } = await import('ioredis')
  const admin = new Redis(redis.url)
  try {
    const { id, code, verifier, resource } = await codeFor('owed-undo')
    const form = { grant_type: 'authorization_code', code, client_id: id, redirect_uri: REDIRECT, code_verifier: verifier, resource }
    const answered = await failedOver(admin, 'AuthorizationCode', form)
    // The answer in place of the tokens keeps what oidc-provider's token answers say of caching.
    expect({ status: answered.status, error: answered.body.error, cache: answered.headers.get('cache-control'), type: answered.headers.get('content-type') })
      .toEqual({ status: 503, error: 'temporarily_unavailable', cache: 'no-store', type: 'application/json; charset=utf-8' })
    // Y's claim ends with its life (30 s).
    for (const key of await admin.keys('gw:agents:AuthorizationCode:*:in-use')) await admin.del(key)
    const retry = await token(x, form)
    expect(retry.status, JSON.stringify(retry.body)).toBe(200)
    // The same code again, at Y (which first does what it owes): a second use.
    const again = await token(y, form)
    const working = again.status === 200 ? await routeStatus(String(again.body.access_token)) : 0
    expect({ again: again.status, error: again.body.error, secondTokensWork: working === 200, firstTokens: await routeStatus(String(retry.body.access_token)) })
      .toEqual({ again: 400, error: 'invalid_grant', secondTokensWork: false, firstTokens: 401 })
  } finally {
    await admin.call('REPLICAOF', 'NO', 'ONE')
    admin.disconnect()
  }
})
