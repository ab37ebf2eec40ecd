// Ending sessions when a store reply comes later than store.timeout (a slow link: Redis ran the
// command, the gateway heard nothing in time) at any step: sign out everywhere, a revoke on the
// sessions page, a provider's back-channel logout. Each answers 503 and is done by its retry (the
// person's, or the provider's resend of the same token): the session meant to end ends. An outside
// tester's findings: each took the sessions out of its index before ending them, so after a late
// reply the retry found nothing, and the session kept passing, unlisted, out of every page's reach.
// And a 503 from one late reply has a line at warn naming its cause (it had one at debug only).
import { describe, expect } from 'vitest'
import { signIn } from '../helpers/browser.js'
import { oidcClient, sessionStatus, type TestGateway } from '../helpers/gateway.js'
import { startHoldProxy, type HoldProxy } from '../helpers/hold-proxy.js'
import { logoutToken, type TestProvider } from '../helpers/oidc.js'
import { test as it } from '../helpers/stack.js'

/** store.timeout: the bound of one store command, which a held reply outlasts. */
const STORE_TIMEOUT_MS = 300

let gateway: TestGateway
let hold: HoldProxy
/** The worker's provider that sends back-channel logout tokens, for the route /bcl/. */
let bcl: TestProvider

it.beforeAll(async ({ startStack, upstream, redis, bcl: provider }) => {
  hold = await startHoldProxy(redis.url)
  bcl = provider
  gateway = await startStack({
    store: { type: 'redis', url: hold.url, timeout: `${STORE_TIMEOUT_MS}ms` },
    session: { cacheTtl: 0 },
    providers: { bcl: oidcClient(bcl.issuer, 'c2', 's') },
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }, { path: '/bcl/', upstream: upstream.url, provider: 'bcl' }],
  })
})

it.afterAll(async () => {
  await gateway?.close()
  await hold?.close()
})

const signOutEverywhere = async (cookie: string): Promise<Response> => await fetch(`${gateway.url}/oauth/logout/`, {
  method: 'POST', redirect: 'manual', headers: { cookie: `gw_session=${cookie}`, accept: 'application/json', 'content-type': 'application/x-www-form-urlencoded', origin: gateway.url }, body: 'everywhere=1',
})

async function listed (cookie: string): Promise<Array<{ id: string, current: boolean }>> {
  const response = await fetch(`${gateway.url}/oauth/sessions/`, { headers: { cookie: `gw_session=${cookie}`, accept: 'application/json' } })
  expect(response.status).toBe(200)
  return (await response.json() as { sessions: Array<{ id: string, current: boolean }> }).sessions
}

const revoke = async (cookie: string, id: string): Promise<Response> => await fetch(`${gateway.url}/oauth/sessions/${id}/revoke`, {
  method: 'POST', headers: { cookie: `gw_session=${cookie}`, accept: 'application/json', origin: gateway.url },
})

/** The steps a store reply may come late at: the index's entries taken out (the old order), a session deleted, the mark of sign-out everywhere. */
const STEPS = [['zrem', 'person:'], ['del', 'session:'], ['set', 'signed-out:']]

const status = async (cookie: string): Promise<number> => await sessionStatus(gateway, cookie, '/bcl/x')
const post = async (token: string): Promise<Response> => await fetch(`${gateway.url}/oauth/backchannel-logout/bcl/`, {
  method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' }, body: `logout_token=${token}`,
})

describe('the log', () => {
  // First in the file: the line is said at most once a minute, and the tests below make more such runs.
  it('a 503 from one late reply has a line at warn naming its cause', async () => {
    const { value: cookie } = await signIn(`${gateway.url}/bcl/`, 'bcl-log')
    const from = gateway.logs.length
    const first = await hold.lateFrom(['logout:bcl:sub:'], async () => await post(await logoutToken(bcl, 'c2', 'bcl-log')))
    expect(first.status).toBe(503)
    // The next command answered: the run of failures was no outage, and it is said so.
    expect(await status(cookie)).toBe(200)
    const lines = gateway.logs.slice(from).map((line) => JSON.parse(line) as { level: number, msg: string, reason?: string })
    expect(lines).toContainEqual(expect.objectContaining({ level: 40, reason: 'Command timed out', msg: expect.stringMatching(/^session store failed for less than 1000 ms; requests that needed it then got 503/) }))
  })
})

describe('sign out everywhere', () => {
  it.each(STEPS)('a reply late at %s %s: 503, and tried again, the other session has ended', async (...on) => {
    const login = `soe-${on[0]}`
    const mine = (await signIn(`${gateway.url}/app/`, login)).value
    const other = (await signIn(`${gateway.url}/app/`, login)).value
    const first = await hold.lateFrom(on, async () => await signOutEverywhere(mine))
    if (first.status === 503) expect((await signOutEverywhere(mine)).status).toBeLessThan(400)
    else expect(first.status).toBeLessThan(400)
    expect(await sessionStatus(gateway, other)).toBe(401)
  })
})

describe('a revoke on the sessions page', () => {
  it.each(STEPS.slice(0, 2))('a reply late at %s %s: 503, and tried again, the session has ended', async (...on) => {
    const login = `rev-${on[0]}`
    const mine = (await signIn(`${gateway.url}/app/`, login)).value
    const other = (await signIn(`${gateway.url}/app/`, login)).value
    const target = (await listed(mine)).find((entry) => !entry.current)!
    const first = await hold.lateFrom(on, async () => await revoke(mine, target.id))
    if (first.status === 503) {
      // Still listed while it runs, and so revocable again; once ended (its delete ran), no longer listed.
      const running = await sessionStatus(gateway, other) === 200
      expect((await listed(mine)).some((entry) => entry.id === target.id)).toBe(running)
      expect((await revoke(mine, target.id)).status).toBe(running ? 200 : 404)
    } else {
      expect(first.status).toBe(200)
    }
    expect(await sessionStatus(gateway, other)).toBe(401)
    expect((await listed(mine)).some((entry) => entry.id === target.id)).toBe(false)
  })
})

describe('a back-channel logout', () => {
  // The first: the claim of the token's jti (a late reply there once left it used, and the resend was refused as a replay).
  it.each([['logout-token:bcl:'], ['logout:bcl:sub:'], ['del', 'session:']])('a reply late at %s: 503, and the provider\'s resend of the token ends the session', async (...on) => {
    const login = `bcl-${on.length}`
    const { value: cookie } = await signIn(`${gateway.url}/bcl/`, login)
    expect(await status(cookie)).toBe(200)
    const token = await logoutToken(bcl, 'c2', login)
    const first = await hold.lateFrom(on, async () => await post(token))
    expect(first.status).toBe(503)
    expect((await post(token)).status).toBe(200)
    expect(await status(cookie)).toBe(401)
  })
})
