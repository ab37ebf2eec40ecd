// A rolling change of session.secret on two gateway instances sharing one Redis, with a real
// authorization server: [s1] -> [s1, previous s2] -> [s2, previous s1] -> [s2], one instance at a
// time. Sessions and sign-ins (and a sign-out walk) in flight across every step keep working; after
// the last step what only s1 opened is no session: 401 for an API client, the sign-in for a browser,
// never an error. Also shown: why the first step exists (an instance holding only s1 cannot open
// what one already sealing with s2 wrote).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { keyIdOf } from '../../src/session/seal.js'
import { Browser } from '../helpers/browser.js'
import { oidcClient, reserveBaseUrl, sessionStatus, startGateway, type TestGateway } from '../helpers/gateway.js'
import { gatewayClient, startOidcProvider, walk, type TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

const S1 = 'rotation-secret-one-0123456789-abcdefghijk'
const S2 = 'rotation-secret-two-9876543210-zyxwvutsrqp'

let redis: TestRedis
let op: TestProvider
let upstream: Upstream
let base: { port: number, baseUrl: string }
/** Instance A listens at the base URL (the provider's callbacks land there); B has a port of its own. */
const instances: { a?: TestGateway, b?: TestGateway } = {}
/** The log lines of every instance started, closed ones too. */
const logs: string[][] = []

beforeAll(async () => {
  redis = await startRedis()
  upstream = await startUpstream()
  base = await reserveBaseUrl()
  op = await startOidcProvider([gatewayClient(base.baseUrl, 'demo', 'c')], { logout: true })
})

afterAll(async () => {
  await Promise.all([instances.a?.close(), instances.b?.close()])
  await Promise.all([op?.close(), upstream?.close()])
  await redis?.release()
})

/** Starts (or restarts) an instance with `secrets`: the first is session.secret, the others previousSecrets. */
async function roll (which: 'a' | 'b', secrets: string[]): Promise<TestGateway> {
  await instances[which]?.close()
  instances[which] = await startGateway({
    server: which === 'a' ? { port: base.port, baseUrl: base.baseUrl } : { baseUrl: base.baseUrl },
    session: { secret: secrets[0], previousSecrets: secrets.slice(1) },
    store: { type: 'redis', url: redis.url },
    providers: { demo: oidcClient(op.issuer, 'c', 's', 'openid email') },
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }],
  })
  logs.push(instances[which].logs)
  return instances[which]
}

/** An instance as tests reach it: at its own port (B's `url`, its base URL, is A's). */
function at (gateway: TestGateway): TestGateway {
  return { ...gateway, url: `http://127.0.0.1:${gateway.config.server.port}` }
}
const a = (): TestGateway => at(instances.a!)
const b = (): TestGateway => at(instances.b!)

/** A sign-in begun at `on`, stopped at the provider's door: the browser and where it was sent. */
interface InFlight { browser: Browser, authorize: string }

async function begin (on: TestGateway, browser = new Browser()): Promise<InFlight> {
  // /app/ sends the browser to the gateway's sign-in, which sends it to the provider.
  const signIn = await browser.fetch(`${on.url}/app/`)
  expect(signIn.status).toBe(302)
  const response = await browser.fetch(new URL(signIn.headers.get('location')!, on.url).href.replace(base.baseUrl, on.url))
  expect(response.status).toBe(302)
  const authorize = response.headers.get('location')!
  expect(authorize.startsWith(op.issuer)).toBe(true)
  return { browser, authorize }
}

/** The key id the sign-in's state names in its JWS header. */
function stateKid (flight: InFlight): string {
  const state = new URL(flight.authorize).searchParams.get('state')!
  return (JSON.parse(Buffer.from(state.split('.')[0]!, 'base64url').toString()) as { kid: string }).kid
}

/** Completes the sign-in at the provider; its callback lands on instance A. The new session cookie. */
async function complete (flight: InFlight, login: string): Promise<string> {
  const response = await flight.browser.navigate(flight.authorize, { login })
  expect(response.status).toBe(200)
  return flight.browser.cookies.get('gw_session')!.value
}

async function signedIn (on: TestGateway, login: string): Promise<string> {
  return await complete(await begin(on), login)
}

/** Whether both instances serve `cookie`'s session. */
async function servedByBoth (cookie: string): Promise<boolean> {
  return await sessionStatus(a(), cookie) === 200 && await sessionStatus(b(), cookie) === 200
}

describe('rotating session.secret on two instances', () => {
  it('signs nobody out and breaks no sign-in in flight; what only s1 opened is then no session, never an error', async () => {
    await roll('a', [S1])
    await roll('b', [S1])
    const early = await signedIn(b(), 'alice')
    expect(early.endsWith(`.${keyIdOf(S1)}`)).toBe(true)
    const flightBeforeAll = await begin(b())
    expect(stateKid(flightBeforeAll)).toBe(keyIdOf(S1))

    // Step 1: every instance learns s2, still sealing with s1.
    await roll('a', [S1, S2])
    expect(await servedByBoth(early)).toBe(true)
    const stillS1 = await complete(flightBeforeAll, 'bob')
    expect(stillS1.endsWith(`.${keyIdOf(S1)}`)).toBe(true)
    await roll('b', [S1, S2])
    const flightAcrossTheSwitch = await begin(b())
    // A sign-out walk leaves for the provider with a state signed with s1.
    const leaving = new Browser()
    await complete(await begin(a(), leaving), 'erin')
    const signOut = await leaving.fetch(`${a().url}/oauth/logout/`, {
      method: 'POST',
      body: new URLSearchParams({ next: '/app/bye' }),
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' },
    })
    expect(signOut.headers.get('location')).toMatch(new RegExp(`^${op.issuer}/`))

    // Step 2: s2 seals, s1 still opens. A first: B (at [s1, previous s2]) opens what A now seals.
    await roll('a', [S2, S1])
    const late = await complete(flightAcrossTheSwitch, 'carol')
    expect(late.endsWith(`.${keyIdOf(S2)}`)).toBe(true)
    expect(await servedByBoth(late)).toBe(true)
    expect(await servedByBoth(early)).toBe(true)
    expect(await servedByBoth(stillS1)).toBe(true)
    // The walk comes back to A, which now seals with s2: it opens the walk s1 sealed and goes on to its `next`.
    const end = await walk(leaving, signOut.headers.get('location')!)
    expect(end.visited).toContain(`${base.baseUrl}/app/bye`)
    await roll('b', [S2, S1])
    const flightAtS2 = await begin(b())
    expect(stateKid(flightAtS2)).toBe(keyIdOf(S2))
    expect(await servedByBoth(early)).toBe(true)

    // Step 3: s1 is dropped, one instance after the other.
    await roll('a', [S2])
    expect(await servedByBoth(await complete(flightAtS2, 'dave'))).toBe(true)
    expect(await servedByBoth(late)).toBe(true)
    await roll('b', [S2])
    expect(await servedByBoth(late)).toBe(true)
    for (const on of [a(), b()]) {
      expect(await sessionStatus(on, early)).toBe(401)
      const browser = await fetch(`${on.url}/app/`, { headers: { accept: 'text/html', cookie: `gw_session=${early}` }, redirect: 'manual' })
      expect(browser.status).toBe(302)
      expect(browser.headers.get('location')).toBe(`${base.baseUrl}/oauth/login/demo/?next=%2Fapp%2F`)
    }
    expect(logs.flat().filter((line) => /"level":50/.test(line))).toEqual([])
  }, 60_000)

  it('an instance that holds only s1 cannot open what an instance sealing with s2 wrote: hence the first step', async () => {
    await roll('a', [S2, S1])
    await roll('b', [S1])
    const cookie = await signedIn(a(), 'frank')
    expect(await sessionStatus(a(), cookie)).toBe(200)
    expect(await sessionStatus(b(), cookie)).toBe(401)
    const flight = await begin(a())
    await roll('a', [S1])
    const callback = await flight.browser.navigate(flight.authorize, { login: 'frank' })
    expect(callback.status).toBe(400)
    expect(await callback.text()).toContain('invalid_state')
    expect(flight.browser.cookies.get('gw_session')).toBeUndefined()
  }, 30_000)
})
