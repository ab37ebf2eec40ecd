// Fault: the provider rotates its signing key. The real oidc-provider really replaces its key (a new
// `kid`, the old one gone from its JWKS) while the gateway holds the old set. A sign-in after the
// rotation succeeds once the cached set is older than the gateway's JWKS cooldown (JWKS_COOLDOWN_MS,
// not jose's 30 s), and back-channel logout tokens signed with the new key are accepted too. Tokens
// with made-up `kid`s cost the provider at most one JWKS fetch per cooldown, however many arrive.
// Time moves through a Date.now spy, never by waiting: the JWKS cooldown and the logout token's `iat`
// are jose's, which reads Date.now itself, so an injected gateway clock could not move them (the
// gateway's own, left as the wall clock, moves with them).
import { randomUUID } from 'node:crypto'
import { generateKeyPair, SignJWT } from 'jose'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { BACKCHANNEL_LOGOUT_EVENT } from '../../src/oauth/backchannel.js'
import { JWKS_COOLDOWN_MS, JWKS_MAX_AGE_MS } from '../../src/oauth/issuer-keys.js'
import { Browser } from '../helpers/browser.js'
import { startGatewayWithProvider, type TestGateway } from '../helpers/gateway.js'
import type { TestProvider } from '../helpers/oidc.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

let upstream: Upstream
let gateway: TestGateway
let op: TestProvider
let stop: () => Promise<void>

/** How far Date.now has been moved on; it only grows, so the JWKS's fetch times stay in the past. */
let offset = 0
const realNow = Date.now.bind(Date)
function advance (ms: number): void {
  offset += ms
  vi.spyOn(Date, 'now').mockImplementation(() => realNow() + offset)
}

beforeAll(async () => {
  upstream = await startUpstream()
  // A provider that announces back-channel logout: the gateway takes its logout tokens.
  const stack = await startGatewayWithProvider({ store: { type: 'memory' }, routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }] }, {}, { logout: true })
  gateway = stack.gateway
  op = stack.op
  stop = stack.close
})

afterEach(() => {
  vi.restoreAllMocks()
})

afterAll(async () => {
  await stop?.()
  await upstream?.close()
})

const jwksFetches = () => op.requests('/jwks')

async function signIn (): Promise<Response> {
  return await new Browser().navigate(`${gateway.url}/app/`)
}

/** A back-channel logout token for client `c`, signed with `key` under `kid`. */
async function logoutToken (key: Parameters<SignJWT['sign']>[0], kid: string): Promise<string> {
  return await new SignJWT({ sid: randomUUID(), events: { [BACKCHANNEL_LOGOUT_EVENT]: {} }, jti: randomUUID() })
    .setProtectedHeader({ alg: 'RS256', kid, typ: 'logout+jwt' })
    .setIssuer(op.issuer).setAudience('c').setIssuedAt(Math.floor(Date.now() / 1000))
    .sign(key)
}

async function postLogout (token: string): Promise<{ status: number, body: string }> {
  const response = await fetch(`${gateway.url}/oauth/backchannel-logout/demo/`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ logout_token: token }),
  })
  return { status: response.status, body: await response.text() }
}

describe('fault: the provider rotates its signing key', () => {
  it('signs in with the new key once the cached JWKS is older than the cooldown, and accepts logout tokens signed with it', async () => {
    expect((await signIn()).status).toBe(200)
    const fetched = jwksFetches()
    expect(fetched).toBeGreaterThanOrEqual(1)

    await op.rotateSigningKey()
    // The set the gateway holds was fetched "moments" ago no more: JWKS_COOLDOWN_MS later (jose's
    // default cooldown, 30 s, refused the new kid for that long and sign-ins answered 502).
    advance(JWKS_COOLDOWN_MS)
    const page = await signIn()
    expect(page.status).toBe(200)
    expect(jwksFetches()).toBe(fetched + 1)

    const newKid = ((await (await fetch(`${op.issuer}/jwks`)).json()) as { keys: Array<{ kid: string }> }).keys[0]!.kid
    expect(await postLogout(await logoutToken(op.signingKey, newKid))).toEqual({ status: 200, body: '' })
  })

  it('fetches the JWKS at most once per cooldown for tokens with unknown kids, and once again after it', async () => {
    const stranger = (await generateKeyPair('RS256')).privateKey
    const forged = async () => await postLogout(await logoutToken(stranger, randomUUID()))
    // Past any earlier fetch's cooldown: the first unknown kid fetches the set.
    advance(JWKS_COOLDOWN_MS)
    const before = jwksFetches()
    expect((await forged()).status).toBe(400)
    const fetched = jwksFetches()
    expect(fetched).toBe(before + 1)

    // Within the cooldown: no fetch at all, concurrent or one after another. Each is told to come
    // back (its key may be newer than the set: a 5xx, so a provider sends a genuine one again),
    // never accepted.
    const burst = await Promise.all(Array.from({ length: 20 }, forged))
    for (let i = 0; i < 5; i++) burst.push(await forged())
    for (const answer of burst) {
      expect(answer.status).toBe(502)
      expect(answer.body).toContain('had not published when its keys were last read')
    }
    expect(jwksFetches()).toBe(fetched)

    // Past it: one fetch for all of them at once. The token that began it is refused (the set read
    // after it came does not hold its key); those that came while it was under way are told to
    // come back, as within the cooldown (that read began before them).
    advance(JWKS_COOLDOWN_MS)
    const next = await Promise.all(Array.from({ length: 20 }, forged))
    for (const answer of next) expect([400, 502]).toContain(answer.status)
    const refused = next.filter((answer) => answer.status === 400)
    expect(refused.length).toBeGreaterThanOrEqual(1)
    expect(refused[0]!.body).toContain('The logout token is not signed with the provider\'s keys.')
    expect(jwksFetches()).toBe(fetched + 1)
  })
})

// An outside tester's findings: sign-ins and back-channel logout read the keys through jose's
// createRemoteJWKSet, which reloads a set older than 10 minutes before using it and throws when
// that fails (every sign-in refused while the JWKS endpoint was down, with the key in hand), times
// its cooldown from the last good fetch (a failing endpoint fetched once per token), and whose
// failure a logout token's check answered 400 (the provider then never sends it again). They now
// use the one set machine clients use (src/oauth/issuer-keys.ts).
describe('fault: the provider\'s JWKS endpoint fails while the rest of it works', () => {
  let jwksDown = false

  /** /jwks answers 503 while `jwksDown` (the demo provider's per-request handler wrapped: its Koa middleware is composed once, at start). */
  function installJwksSwitch (): void {
    type Handle = (ctx: { path: string, res: import('node:http').ServerResponse }, fn: unknown) => Promise<void>
    const app = op.provider as unknown as { handleRequest: Handle }
    const original = app.handleRequest.bind(app)
    app.handleRequest = async (ctx, fn) => {
      if (jwksDown && ctx.path === '/jwks') {
        ctx.res.writeHead(503, { 'content-type': 'text/plain' }).end('unavailable')
        return
      }
      await original(ctx, fn)
    }
  }

  beforeAll(() => { installJwksSwitch() })
  afterEach(() => { jwksDown = false })

  it('keeps signing people in with the key it holds once its set is older than 10 minutes, reading it again in the background', async () => {
    advance(JWKS_COOLDOWN_MS)
    expect((await signIn()).status).toBe(200)
    jwksDown = true
    const before = jwksFetches()
    advance(JWKS_MAX_AGE_MS + 1000)
    expect((await signIn()).status).toBe(200)
    expect(jwksFetches()).toBe(before + 1)
    expect(gateway.logs.join('\n')).toContain('signing keys could not be read')
  })

  it('answers a genuine logout token of a key it cannot read yet 502, not 400, and fetches a failing set at most once per cooldown', async () => {
    await op.rotateSigningKey()
    installJwksSwitch()
    const kid = ((await (await fetch(`${op.issuer}/jwks`)).json()) as { keys: Array<{ kid: string }> }).keys[0]!.kid
    jwksDown = true
    advance(JWKS_COOLDOWN_MS)
    const before = jwksFetches()
    const answers = []
    for (let i = 0; i < 10; i++) answers.push(await postLogout(await logoutToken(op.signingKey, i === 0 ? kid : randomUUID())))
    expect(answers.map((answer) => answer.status)).toEqual(Array.from({ length: 10 }, () => 502))
    expect(answers[0]!.body).toContain('could not be read')
    expect(jwksFetches()).toBe(before + 1)
    // The provider sends it again once the set can be read: accepted.
    jwksDown = false
    advance(JWKS_COOLDOWN_MS)
    expect(await postLogout(await logoutToken(op.signingKey, kid))).toEqual({ status: 200, body: '' })
  })
})
