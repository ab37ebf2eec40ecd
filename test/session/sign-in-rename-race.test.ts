// A sign-in that adds a provider to a browser's session gives it a new id and ends the old one. A
// sign-out handled on the other instance in the middle of that (a back-channel logout of the first
// provider, "sign out everywhere") must end the session under whichever id it has by then. Found by
// an outside tester: the new id was listed where sign-outs look (the back-channel and person
// indexes) only after the old one had ended, so a sign-out in between found neither, and the
// session went on under its new id with the ended provider's tokens. Now the new id is listed
// before the old one ends (Sessions.start). Each moment is forced: instance B reaches Redis through
// a proxy that holds its commands from a known one on (test/helpers/hold-proxy.ts).
import { afterAll, describe, expect } from 'vitest'
import { signIn, type Browser } from '../helpers/browser.js'
import { reachCallback } from '../helpers/callback.js'
import { oidcClient, sessionStatus, startGateway, type TestGateway } from '../helpers/gateway.js'
import { startHoldProxy, type HoldProxy } from '../helpers/hold-proxy.js'
import { logoutToken, type TestProvider } from '../helpers/oidc.js'
import { test as it } from '../helpers/stack.js'
import { MAX_SESSIONS } from '../../src/session/person-index.js'

/** The first provider, `bcl`: the worker's that sends back-channel logout tokens; the second, `demo`: the worker's own. */
let bcl: TestProvider
let proxy: HoldProxy
let a: TestGateway
let b: TestGateway

it.beforeAll(async ({ startStack, op, bcl: provider, redis, upstream }) => {
  bcl = provider
  proxy = await startHoldProxy(redis.url)
  // Neither instance keeps sessions in memory: what B answers for a session A ended is what the
  // store holds, not whether B has yet heard A's broadcast (endedElsewhere's tests' subject).
  const raw = {
    session: { cacheTtl: 0 },
    providers: { bcl: oidcClient(bcl.issuer, 'c2', 's', 'openid email'), demo: oidcClient(op.issuer, 'c', 's') },
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'bcl' }, { path: '/two/', upstream: upstream.url, provider: 'demo' }],
  }
  // B: the instance the browser signs in on (its Redis through the proxy); A: the other.
  b = await startStack({ ...raw, store: { type: 'redis', url: proxy.url } })
  a = await startGateway({ ...raw, store: { type: 'redis', url: redis.url } })
})

afterAll(async () => {
  proxy?.release()
  await Promise.all([a?.close(), b?.close()])
  await proxy?.close()
})

async function backchannelLogout (sub: string): Promise<void> {
  const token = await logoutToken(bcl, 'c2', sub)
  const response = await fetch(`${a.url}/oauth/backchannel-logout/bcl/`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ logout_token: token }) })
  await response.arrayBuffer()
  expect(response.status).toBe(200)
}

async function signOutEverywhere (other: Browser): Promise<void> {
  const response = await other.fetch(`${a.url}/oauth/logout/`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: a.url }, body: new URLSearchParams({ everywhere: '1', next: '/' }) })
  await response.arrayBuffer()
  expect(response.status).toBe(302)
}

/**
 * The moments of B's sign-in: right after the old id ended (B's next command held: the code before
 * listed the new id only then), and after the new id was listed but before the old one ended.
 */
/** The DEL that ends the old id, as RESP sends it (a bare "del" could be part of a random key). */
const DEL = '$3\r\ndel\r\n'
const MOMENTS = {
  'right after the old id ended': { after: [DEL, 'session:'], hold: [] as string[] },
  'after the new id was listed, before the old one ended': { after: ['person:'], hold: [DEL, 'session:'] },
}
type Moment = keyof typeof MOMENTS

/** Signs `browser` in at `demo` on B over its bcl session, runs `meanwhile` with B held at `moment`; the sign-in's status and the browser's cookie after it. */
async function addSecondProviderWhile (browser: Browser, moment: Moment, meanwhile: () => Promise<void>): Promise<{ status: number, cookie: string }> {
  const callback = await reachCallback(browser, `${b.url}/oauth/login/demo/?next=/two/`)
  const held = proxy.arm(MOMENTS[moment].after, MOMENTS[moment].hold)
  const answered = browser.fetch(callback.href)
  await held
  try {
    await meanwhile()
  } finally {
    proxy.release()
  }
  const response = await answered
  await response.arrayBuffer()
  return { status: response.status, cookie: browser.cookies.get('gw_session')!.value }
}

describe.each(Object.keys(MOMENTS) as Moment[])('a sign-in adding a provider, with a sign-out on the other instance %s', (moment) => {
  it('a back-channel logout of the first provider ends the session under its new id too', async () => {
    const { browser, value: old } = await signIn(`${b.url}/app/`, 'carol')
    const { status, cookie } = await addSecondProviderWhile(browser, moment, async () => { await backchannelLogout('carol') })
    // Completed (302) under a new id without carol's bcl session, or refused (400 invalid_state: sign in again).
    expect([302, 400]).toContain(status)
    for (const instance of [a, b]) {
      expect(await sessionStatus(instance, old)).toBe(401)
      expect(await sessionStatus(instance, cookie, '/app/x')).toBe(401)
    }
  })

  it('"sign out everywhere" from another browser ends the session under its new id too', async () => {
    const { browser, value: old } = await signIn(`${b.url}/app/`, 'dave')
    const other = await signIn(`${b.url}/app/`, 'dave')
    const { status, cookie } = await addSecondProviderWhile(browser, moment, async () => { await signOutEverywhere(other.browser) })
    expect([302, 400]).toContain(status)
    for (const instance of [a, b]) {
      for (const session of [old, other.value, cookie]) expect(await sessionStatus(instance, session, '/app/x')).toBe(401)
    }
  })
})

it('control: a back-channel logout after the sign-in completed ends the renamed session', async () => {
  const { browser } = await signIn(`${b.url}/app/`, 'erin')
  const { status, cookie } = await addSecondProviderWhile(browser, 'right after the old id ended', async () => {})
  expect(status).toBe(302)
  expect(await sessionStatus(a, cookie, '/app/x')).toBe(200)
  await backchannelLogout('erin')
  expect(await sessionStatus(a, cookie, '/app/x')).toBe(401)
})

describe('a sign-in adding a provider when the person has MAX_SESSIONS sessions (found by an outside tester: the new id, listed while the old one still lived, counted it)', () => {
  /** The person's MAX_SESSIONS sessions on B (the proxy holds nothing here), signed in one after another; the browser of the `renamed`-th (0: the oldest). */
  async function sessionsOf (login: string, renamed: number) {
    const signedIn = []
    for (let i = 0; i < MAX_SESSIONS; i++) signedIn.push(await signIn(`${b.url}/app/`, login))
    return { all: signedIn.map((session) => session.value), browser: signedIn[renamed]!.browser, old: signedIn[renamed]!.value }
  }

  it.each([['the oldest', 0], ['another than the oldest', 7]])('renaming %s ends none of them and keeps the provider it had', async (_name, renamed) => {
    const { all, browser, old } = await sessionsOf(`bound-${renamed}`, renamed)
    const landed = await browser.navigate(`${b.url}/two/`, { login: `bound-${renamed}` })
    await landed.arrayBuffer()
    expect(landed.status).toBe(200)
    const cookie = browser.cookies.get('gw_session')!.value
    expect(cookie).not.toBe(old)
    expect([await sessionStatus(b, cookie, '/two/x'), await sessionStatus(b, cookie, '/app/x')]).toEqual([200, 200])
    // MAX_SESSIONS before, MAX_SESSIONS after (one renamed): every other one still answers.
    const others = all.filter((value) => value !== old)
    expect(await Promise.all(others.map(async (value) => await sessionStatus(b, value, '/app/x')))).toEqual(others.map(() => 200))
  })
})
