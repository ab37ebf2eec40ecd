// Fault: the provider rotates its signing key while machine clients call a `bearer:` route and a
// forward-auth host (reliability round 3). The real oidc-provider replaces its key (a new `kid`, the
// old one gone from its JWKS) under client-credentials load. A client with a token of the new key is
// told "try again" (503 with Retry-After, never 401 invalid_token, which tells an RFC 6750 client to
// throw its token away) until the gateway's set is older than the refetch cooldown, and then passes
// after one refetch. Made-up `kid`s cost the provider one JWKS fetch per cooldown however many
// arrive, and one still unknown after a refetch made since it was first seen is 401. With the
// provider down, a token of a key read minutes before still passes, and an unknown `kid` is 503;
// once it is back on its address, the next read takes its keys and its tokens pass.
// The gateway's clock is injected and stands still unless the test moves it: no waiting.
import { readFileSync } from 'node:fs'
import { generateKeyPair, SignJWT } from 'jose'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { BEARER_JWKS_COOLDOWN_MS } from '../../src/oauth/access-tokens.js'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { CI, clientCredentialsToken, startMachineProvider } from '../helpers/machine.js'
import type { TestProvider } from '../helpers/oidc.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

const API = 'api.example.com'
const start = Date.now()
/** The gateway's clock: still unless {@link advance} moves it. */
const clock = { offset: 0, now: () => start + clock.offset }
function advance (ms: number): void {
  clock.offset += ms
}

let upstream: Upstream
let op: TestProvider
let opClosed = false
let gateway: TestGateway

beforeAll(async () => {
  upstream = await startUpstream()
  const { port, baseUrl } = await reserveBaseUrl()
  op = await startMachineProvider(baseUrl)
  gateway = await startGateway({
    server: { port, baseUrl, trustProxy: ['127.0.0.1'] },
    store: { type: 'memory' },
    providers: { demo: oidcClient(op.issuer, 'c', 's') },
    routes: [{ path: '/orders/', upstream: upstream.url, provider: 'demo', bearer: { audience: 'api://orders', scopes: ['orders.read'] } }],
    forwardAuth: { hosts: { [API]: { bearer: { audience: 'api://orders', scopes: ['orders.read'] } } } },
  }, { deps: { clock } })
})

afterAll(async () => {
  await gateway?.close()
  if (!opClosed) await op?.close()
  await upstream?.close()
})

interface Seen { status: number, retryAfter: string | null, challenge: string | null, error: string | undefined, token: string }

async function seen (response: Response, token: string): Promise<Seen> {
  const body = await response.text()
  const error = response.status === 200 ? undefined : (JSON.parse(body) as { error?: string }).error
  return { status: response.status, retryAfter: response.headers.get('retry-after'), challenge: response.headers.get('www-authenticate'), error, token }
}

/** One call of the route with `token`. */
async function call (token: string): Promise<Seen> {
  return await seen(await fetch(`${gateway.url}/orders/x`, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } }), token)
}

/** One forward-auth check of `token` for the bearer host. */
async function auth (token: string): Promise<Seen> {
  return await seen(await fetch(`${gateway.url}/oauth/auth/demo/`, {
    headers: { authorization: `Bearer ${token}`, accept: 'application/json', 'x-forwarded-proto': 'https', 'x-forwarded-host': API, 'x-forwarded-uri': '/v1/orders' },
  }), token)
}

const orders = async (): Promise<string> => await clientCredentialsToken(op, CI, 'api://orders', 'orders.read')
const jwksFetches = (): number => op.requests('/jwks')

/** A "try again" answer: 503 with Retry-After (seconds, within the cooldown), a JSON error, and no token verdict. */
function expectTryAgain (answer: Seen): void {
  expect(answer.status).toBe(503)
  expect(answer.error).toBe('issuer_keys_unavailable')
  expect(Number(answer.retryAfter)).toBeGreaterThanOrEqual(1)
  expect(Number(answer.retryAfter)).toBeLessThanOrEqual(BEARER_JWKS_COOLDOWN_MS / 1000)
  expect(answer.challenge ?? '').not.toContain('invalid_token')
}

/** The 503 docs/machine-clients.md shows: status line, Retry-After and body. */
function documented503 (): string {
  const page = readFileSync('docs/machine-clients.md', 'utf8')
  return /^```http\n(HTTP\/1\.1 503 [\s\S]*?)^```$/m.exec(page)![1]!.trim()
}

/** A token with the issuer, audience and scope of a real one, signed by a key the provider never had, under `kid`. */
const stranger = (await generateKeyPair('RS256')).privateKey
async function madeUp (kid: string): Promise<string> {
  return await new SignJWT({ scope: 'orders.read', client_id: CI.id })
    .setProtectedHeader({ alg: 'RS256', kid, typ: 'at+jwt' })
    .setIssuer(op.issuer).setAudience('api://orders').setSubject(CI.id)
    .setIssuedAt(Math.floor(clock.now() / 1000)).setExpirationTime(Math.floor(clock.now() / 1000) + 600)
    .sign(stranger)
}

/** Machine clients calling with whatever token `current()` gives, recording every answer, until stopped. */
function load (current: () => string, clients = 4): { answers: Seen[], stop (): Promise<Seen[]> } {
  const answers: Seen[] = []
  const state = { running: true }
  const loops = Array.from({ length: clients }, async (_, i) => {
    while (state.running) answers.push(i % 2 === 0 ? await call(current()) : await auth(current()))
  })
  return { answers, stop: async () => { state.running = false; await Promise.all(loops); return answers } }
}

/** Resolves once `count` answers after index `from` satisfy `match` (a deadline: fails instead of hanging). */
async function answersAfter (answers: Seen[], from: number, count: number, match: (answer: Seen) => boolean): Promise<void> {
  const deadline = Date.now() + 10_000
  while (answers.slice(from).filter(match).length < count) {
    if (Date.now() > deadline) {
      const statuses = answers.slice(from).reduce<Record<number, number>>((counts, { status }) => ({ ...counts, [status]: (counts[status] ?? 0) + 1 }), {})
      throw new Error(`fewer than ${count} matching answers; statuses since: ${JSON.stringify(statuses)}`)
    }
    await new Promise((resolve) => setImmediate(resolve))
  }
}

describe('fault: the provider rotates its signing key under machine-client load', () => {
  it('answers tokens of the new key 503 with Retry-After, never 401, until one refetch past the cooldown lets them pass', async () => {
    let token = await orders()
    expect((await call(token)).status).toBe(200)
    const fetched = jwksFetches()
    expect(fetched).toBe(1)

    const traffic = load(() => token)
    let rotated = ''
    let switched = 0
    let advanced = 0
    try {
      await answersAfter(traffic.answers, 0, 20, (answer) => answer.status === 200)
      await op.rotateSigningKey()
      // A token of the new key, never seen by the gateway, while its set was read moments ago.
      rotated = await orders()
      switched = traffic.answers.length
      token = rotated
      await answersAfter(traffic.answers, switched, 20, (answer) => answer.token === rotated)
      expect(jwksFetches()).toBe(fetched)

      advance(BEARER_JWKS_COOLDOWN_MS)
      advanced = traffic.answers.length
      await answersAfter(traffic.answers, advanced, 20, (answer) => answer.status === 200 && answer.token === rotated)
    } finally {
      await traffic.stop()
    }
    const answers = traffic.answers

    expect(answers.filter((answer) => answer.status === 401)).toEqual([])
    for (const answer of answers) {
      if (answer.status !== 200) expectTryAgain(answer)
    }
    // Before the cooldown ran out, the new key was unknown: try again.
    expect(answers.slice(switched, advanced).some((answer) => answer.token === rotated && answer.status === 503)).toBe(true)
    // One refetch for all of the clients.
    expect(jwksFetches()).toBe(fetched + 1)
    expect(answers.slice(advanced).findLastIndex((answer) => answer.status !== 200)).toBeLessThan(answers.length - advanced - 20)
  })

  it('fetches the JWKS once per cooldown for a flood of made-up kids; an unknown kid after a refetch since it was first seen is 401', async () => {
    advance(BEARER_JWKS_COOLDOWN_MS)
    const before = jwksFetches()
    // The first of a burst refetches; the others join it, or come within its cooldown.
    const burst = await Promise.all(Array.from({ length: 25 }, async (_, i) => i % 2 === 0 ? await call(await madeUp(`made-up-${i}`)) : await auth(await madeUp(`made-up-${i}`))))
    expect(jwksFetches()).toBe(before + 1)
    for (const answer of burst) {
      if (answer.status === 503) expectTryAgain(answer)
      else {
        expect(answer.status).toBe(401)
        expect(answer.error).toBe('invalid_token')
        expect(answer.challenge).toContain('error="invalid_token"')
      }
    }
    // Within the cooldown: no fetch at all, one after another either.
    for (let i = 0; i < 10; i++) {
      const answer = await call(await madeUp(`later-${i}`))
      expect(answer.status === 401 || answer.status === 503).toBe(true)
    }
    expect(jwksFetches()).toBe(before + 1)

    // Past it: one kid alone refetches, and is still unknown: the token is refused.
    advance(BEARER_JWKS_COOLDOWN_MS)
    const alone = await madeUp('made-up-alone')
    for (const answer of [await call(alone), await call(alone), await auth(alone)]) {
      expect(answer.status).toBe(401)
      expect(answer.error).toBe('invalid_token')
    }
    expect(jwksFetches()).toBe(before + 2)
  })

  it('with the provider down, passes a new token of a key read minutes before, and answers an unknown kid 503 with Retry-After', async () => {
    const known = [await orders(), await orders()]
    advance(11 * 60_000)
    await op.close()
    opClosed = true
    expect((await call(known[0]!)).status).toBe(200)
    expect((await auth(known[1]!)).status).toBe(200)
    // Again later, past any refetch's cooldown: the failed refetches dropped no key.
    advance(BEARER_JWKS_COOLDOWN_MS)
    expect((await call(known[0]!)).status).toBe(200)
    const fresh = await madeUp('made-up-while-down')
    const response = await fetch(`${gateway.url}/orders/x`, { headers: { authorization: `Bearer ${fresh}`, accept: 'application/json' } })
    const sent = `HTTP/1.1 ${response.status} ${response.statusText}\nRetry-After: ${response.headers.get('retry-after')}\n\n${await response.text()}`
    // The answer docs/machine-clients.md shows, for its provider `corp`.
    expect(sent).toBe(documented503().replaceAll('corp', 'demo'))
    expect(response.headers.get('www-authenticate')).toBeNull()
    expectTryAgain(await auth(fresh))
    advance(BEARER_JWKS_COOLDOWN_MS)
    expectTryAgain(await call(await madeUp('made-up-while-down-2')))
    // Three reads failed; the outage is one warning line, not one per read or per request.
    expect(gateway.logs.filter((line) => line.includes('signing keys could not be read'))).toHaveLength(1)
  })

  it('answers 503 with Retry-After while the provider has never been read (no keys yet), never 401', async () => {
    const { port, baseUrl } = await reserveBaseUrl()
    const late = await startGateway({
      server: { port, baseUrl },
      store: { type: 'memory' },
      providers: { demo: oidcClient(op.issuer, 'c', 's') },
      routes: [{ path: '/orders/', upstream: upstream.url, provider: 'demo', bearer: { audience: 'api://orders' } }],
    }, { deps: { clock } })
    try {
      const response = await fetch(`${late.url}/orders/x`, { headers: { authorization: `Bearer ${await madeUp('any')}`, accept: 'application/json' } })
      expectTryAgain(await seen(response, ''))
    } finally {
      await late.close()
    }
  })

  it('reads the keys again once the provider is back on its address, and its new key passes', async () => {
    const port = op.port
    op = await startMachineProvider(gateway.url, { port })
    opClosed = false
    advance(BEARER_JWKS_COOLDOWN_MS)
    // A restarted provider signs with a key of its own: one read, then its tokens pass.
    const token = await orders()
    expect((await call(token)).status).toBe(200)
    expect((await auth(await orders())).status).toBe(200)
    expect(jwksFetches()).toBe(1)
    expect(gateway.logs.filter((line) => line.includes('signing keys read again'))).toHaveLength(1)
  })
})
