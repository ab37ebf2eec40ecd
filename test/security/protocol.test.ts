// Protocol checks at the callback (docs/security.md): RFC 9207 `iss` when the provider
// advertises it, repeated `code`/`state`/`iss` refused before anything is done with them, and an
// unverified e-mail address that never satisfies an `emails`/`domains` allow rule. Real Redis, the
// real oidc-provider (demo/authorization-server.ts), sign-ins walked up to the callback and the
// callback then sent as it came or altered.
import { afterAll, describe, expect } from 'vitest'
import { compileRules } from '../../src/access/rules.js'
import { lists } from '../helpers/rules.js'
import { identityFrom } from '../../src/oauth/claims.js'
import { Browser } from '../helpers/browser.js'
import { reachCallback } from '../helpers/callback.js'
import { oidcClient, type TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'
import type { TestProvider } from '../helpers/oidc.js'
import type { TestRedis } from '../helpers/redis.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

const json = { accept: 'application/json' }
let redis: TestRedis
let upstream: Upstream
let op: TestProvider
let gateway: TestGateway

it.beforeAll(async ({ startStack, op: workerOp, redis: fileRedis }) => {
  redis = fileRedis
  op = workerOp
  upstream = await startUpstream()
  gateway = await startStack({
    store: { type: 'redis', url: redis.url },
    providers: { demo: oidcClient(op.issuer, 'c', 's', 'openid profile email groups') },
    routes: [
      { path: '/app/', upstream: upstream.url, provider: 'demo' },
      { path: '/domain/', upstream: upstream.url, provider: 'demo', allow: { domains: ['example.test'] } },
      { path: '/email/', upstream: upstream.url, provider: 'demo', allow: { emails: ['eve@example.test', 'carol@example.test'] } },
      { path: '/staff/', upstream: upstream.url, provider: 'demo', allow: { groups: ['staff'] } },
    ],
  })
})

afterAll(async () => {
  await gateway?.close()
  await upstream?.close()
})

/** A fresh browser, walked through the provider up to (not into) the gateway's callback. */
async function atCallback (login = 'alice'): Promise<{ browser: Browser, callback: URL }> {
  const browser = new Browser()
  const callback = await reachCallback(browser, `${gateway.url}/oauth/login/demo/?next=/app/`, { login })
  return { browser, callback }
}

/** The callback URL with its query replaced by `pairs`, in that order (repeats kept). */
function withQuery (callback: URL, pairs: Array<[string, string]>): string {
  const url = new URL(callback)
  url.search = new URLSearchParams(pairs).toString()
  return url.href
}

function pairsOf (callback: URL): Array<[string, string]> {
  return [...callback.searchParams]
}

async function expectError (response: Response, status: number, error: string): Promise<void> {
  expect(response.status).toBe(status)
  expect((await response.json() as { error: string }).error).toBe(error)
  expect(response.headers.getSetCookie().some((line) => line.startsWith('gw_session='))).toBe(false)
}

/** The untouched callback still completes the sign-in: the flow was not used up by the refused one. */
async function expectStillUsable (browser: Browser, callback: URL): Promise<void> {
  const response = await browser.fetch(callback.href, { headers: json })
  expect([response.status, response.headers.get('location')]).toEqual([302, '/app/'])
}

describe('RFC 9207: iss in the authorization response', () => {
  it('is advertised by the demo authorization server', async () => {
    const metadata = await (await fetch(`${op.issuer}/.well-known/openid-configuration`)).json() as Record<string, unknown>
    expect(metadata.authorization_response_iss_parameter_supported).toBe(true)
  })

  it('signs in when the callback carries the provider\'s iss, untouched', async () => {
    const { browser, callback } = await atCallback()
    expect(callback.searchParams.get('iss')).toBe(op.issuer)
    const response = await browser.fetch(callback.href, { headers: json })
    expect([response.status, response.headers.get('location')]).toEqual([302, '/app/'])
    expect((await browser.fetch(`${gateway.url}/app/x`, { headers: json })).status).toBe(200)
  })

  it('rejects a callback without iss with 400 invalid_request', async () => {
    const { browser, callback } = await atCallback()
    const stripped = pairsOf(callback).filter(([name]) => name !== 'iss')
    await expectError(await browser.fetch(withQuery(callback, stripped), { headers: json }), 400, 'invalid_request')
  })

  it.each([
    ['another issuer', 'https://evil.example'],
    ['the issuer with a trailing slash', 'ISSUER/'],
    ['an empty iss', ''],
  ])('rejects a callback whose iss is %s with 400 invalid_request', async (_name, value) => {
    const { browser, callback } = await atCallback()
    const changed = pairsOf(callback).map(([name, v]): [string, string] => [name, name === 'iss' ? value.replace('ISSUER', op.issuer) : v])
    await expectError(await browser.fetch(withQuery(callback, changed), { headers: json }), 400, 'invalid_request')
  })
})

describe('repeated callback parameters', () => {
  it.each(['code', 'state', 'iss'])('rejects a repeated %s (same value twice) with 400 invalid_request, before using the flow', async (param) => {
    const { browser, callback } = await atCallback()
    const pairs = pairsOf(callback)
    const repeated = [...pairs, pairs.find(([name]) => name === param)!]
    await expectError(await browser.fetch(withQuery(callback, repeated), { headers: json }), 400, 'invalid_request')
    await expectStillUsable(browser, callback)
  })

  it.each([
    ['code', 'forged-code', 'first'],
    ['code', 'forged-code', 'last'],
    ['code', '', 'last'],
    ['state', 'forged-state', 'first'],
    ['state', 'forged-state', 'last'],
    ['iss', 'https://evil.example', 'first'],
    ['iss', 'https://evil.example', 'last'],
  ])('rejects a second %s=%j placed %s with 400 invalid_request, never 502 or a session', async (param, value, where) => {
    const { browser, callback } = await atCallback()
    const pairs = pairsOf(callback)
    const extra: [string, string] = [param, value]
    const repeated = where === 'first' ? [extra, ...pairs] : [...pairs, extra]
    await expectError(await browser.fetch(withQuery(callback, repeated), { headers: json }), 400, 'invalid_request')
    await expectStillUsable(browser, callback)
  })
})

describe('email_verified: false never satisfies an e-mail rule', () => {
  const mapping = { user: 'sub', email: 'email', name: 'name', groups: 'groups' }
  const admits = (identity: ReturnType<typeof identityFrom>, over: { emails?: string[], domains?: string[], groups?: string[] }) =>
    compileRules(lists([over]))(identity, 'GET', '/app/', undefined).admit

  it.each([
    ['false', false, false],
    ['"false"', false, 'false'],
    ['"FALSE"', false, 'FALSE'],
    ['true', true, true],
    ['"true"', true, 'true'],
    ['absent', true, undefined],
  ])('email_verified %s: e-mail and domain rules match: %s; group rules still match', (_name, matches, verified) => {
    const identity = identityFrom({ sub: 'eve', email: 'Eve@Example.test', groups: ['staff'], ...(verified === undefined ? {} : { email_verified: verified }) }, mapping)
    expect(identity?.email).toBe('eve@example.test')
    expect(identity?.emailVerified).toBe(matches ? undefined : false)
    expect(admits(identity, { emails: ['eve@example.test'] })).toBe(matches)
    expect(admits(identity, { domains: ['example.test'] })).toBe(matches)
    expect(admits(identity, { groups: ['staff'] })).toBe(true)
  })

  it('keeps the unverified fact in the identity and refuses e-mail and domain rules end to end (groups still pass)', async () => {
    const eve = new Browser()
    expect((await eve.navigate(`${gateway.url}/app/`, { login: 'eve' })).status).toBe(200)
    const info = await (await eve.fetch(`${gateway.url}/oauth/userinfo/`, { headers: json })).json() as { identities: Record<string, unknown> }
    expect(info.identities.demo).toMatchObject({ sub: 'eve', email: 'eve@example.test', emailVerified: false })
    await expectError(await eve.fetch(`${gateway.url}/domain/x`, { headers: json }), 403, 'forbidden')
    await expectError(await eve.fetch(`${gateway.url}/email/x`, { headers: json }), 403, 'forbidden')
    const staff = await eve.fetch(`${gateway.url}/staff/x`, { headers: json })
    expect(staff.status).toBe(200)
    // Upstreams that trust X-Forwarded-Email are not handed an address nobody verified.
    const seen = await staff.json() as { headers: Record<string, string> }
    expect(seen.headers['x-forwarded-user']).toBe('eve')
    expect(seen.headers['x-forwarded-email']).toBeUndefined()
  })

  it('lets a verified address through the same e-mail and domain rules', async () => {
    const carol = new Browser()
    expect((await carol.navigate(`${gateway.url}/app/`, { login: 'carol' })).status).toBe(200)
    const domain = await carol.fetch(`${gateway.url}/domain/x`, { headers: json })
    expect(domain.status).toBe(200)
    expect((await domain.json() as { headers: Record<string, string> }).headers['x-forwarded-email']).toBe('carol@example.test')
    expect((await carol.fetch(`${gateway.url}/email/x`, { headers: json })).status).toBe(200)
  })
})

describe('what the provider sees of a sign-in (its logs, its analytics, the history of its pages)', () => {
  it('never reads where the sign-in goes back to: a protected URL\'s query (an application\'s own code, a reset token) is sealed in the state', async () => {
    const secrets = ['AppOwnOauthCode9f8e7d6c5b4a', 'AppOwnOauthState1a2b3c4d5e6f', 'PasswordResetToken5c4b3a2f1e']
    const target = `/app/integrations/callback?code=${secrets[0]}&state=${secrets[1]}&reset=${secrets[2]}`
    const browser = new Browser()
    const response = await browser.navigate(`${gateway.url}${target}`, { login: 'alice' })
    expect(response.status).toBe(200)
    // The application gets its query back after the sign-in.
    expect(upstream.seen.at(-1)?.url).toBe(target)
    const authorize = new URL(browser.hops.find((hop) => hop.location?.startsWith(op.issuer) === true)!.location!)
    const state = authorize.searchParams.get('state')!
    const seen = `${authorize.href}\n${Buffer.from(state.split('.')[1]!, 'base64url').toString('utf8')}`
    expect(secrets.filter((secret) => seen.includes(secret))).toEqual([])
    expect(seen).not.toContain('integrations')
  })

  it('is not told the address of a callback\'s error page by the browser either (its query holds the code and state)', async () => {
    const browser = new Browser()
    const callback = await reachCallback(browser, `${gateway.url}/app/x?token=secret`)
    const failed = await browser.fetch(`${gateway.url}/oauth/authorized/demo/?error=access_denied&state=${encodeURIComponent(callback.searchParams.get('state')!)}`, { headers: { accept: 'text/html' } })
    expect(failed.status).toBeGreaterThanOrEqual(400)
    expect(failed.headers.get('referrer-policy')).toBe('same-origin')
  })
})
