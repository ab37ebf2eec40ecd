// A sign-in is built on the browser's session only when that session is of the same person
// (PersonIndex.samePerson: the same iss + subject at the provider and at those of its issuer). An
// outside tester's finding: with session.cookieDomain set, a sibling host can plant its own session
// cookie in a person's browser (`Domain=example.com; Path=/` replaces theirs); the person's own
// sign-in was then built on the planted session, so their browser stayed the planter at the
// planter's provider (a second client of the same issuer here), and the new session, with the
// person's browser and address, was listed on the planter's sessions page, which could end it. The
// planting is simulated by putting the planter's cookie in the person's jar: what the browser holds
// after the sibling's Set-Cookie (the gateway cannot tell the two apart).
import { describe, expect } from 'vitest'
import { Browser, signIn } from '../helpers/browser.js'
import { oidcClient, type TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'

let gateway: TestGateway

it.beforeAll(async ({ startStack, op }) => {
  gateway = await startStack({
    server: { trustProxy: ['127.0.0.1'] },
    providers: { 'demo-twin': oidcClient(op.issuer, 'c', 's') },
    routes: [],
  })
})

/** alice's browser holding mallory's planted session cookie signs in as alice at `demo`; alice's new cookie. */
async function aliceSignsInOverPlantedCookie (planted: string): Promise<string> {
  const browser = new Browser()
  browser.cookies.set('gw_session', { value: planted, path: '/' })
  const landed = await browser.navigate(`${gateway.url}/oauth/login/demo/?next=/oauth/`, { login: 'alice' })
  expect(landed.status).toBe(200)
  const cookie = browser.cookies.get('gw_session')?.value
  expect(cookie).toBeDefined()
  expect(cookie).not.toBe(planted)
  return `gw_session=${cookie!}`
}

async function forwardAuth (provider: string, cookie: string): Promise<{ status: number, user: string | null }> {
  const response = await fetch(`${gateway.url}/oauth/auth/${provider}/`, { headers: { cookie, accept: 'application/json' } })
  await response.arrayBuffer()
  return { status: response.status, user: response.headers.get('x-forwarded-user') }
}

describe('a sign-in over another person\'s session', () => {
  it('starts a session of its own: the planter\'s identity at another provider of the issuer is not kept', async () => {
    const mallory = await signIn(`${gateway.url}/oauth/login/demo-twin/?next=/oauth/`, 'mallory')
    const alice = await aliceSignsInOverPlantedCookie(mallory.value)
    // alice is alice where she signed in...
    expect(await forwardAuth('demo', alice)).toEqual({ status: 200, user: 'alice' })
    // ...and nobody at the planter's provider: an application behind /oauth/auth/demo-twin/ asks her to sign in.
    expect(await forwardAuth('demo-twin', alice)).toEqual({ status: 401, user: null })
  })

  it('is not listed on the planter\'s sessions page, which cannot end it', async () => {
    const planted = await signIn(`${gateway.url}/oauth/login/demo-twin/?next=/oauth/`, 'mallory2')
    const alice = await aliceSignsInOverPlantedCookie(planted.value)
    // mallory, later, in her own browser: her sessions page.
    const mallory = await signIn(`${gateway.url}/oauth/login/demo-twin/?next=/oauth/`, 'mallory2')
    const listed = await fetch(`${gateway.url}/oauth/sessions/`, { headers: { cookie: mallory.cookie, accept: 'application/json' } })
    expect(listed.status).toBe(200)
    const { sessions } = await listed.json() as { sessions: Array<{ id: string, current: boolean, address?: string, browser: string, providers: string[] }> }
    const others = sessions.filter((session) => !session.current)
    // Whatever the list shows besides her current session, mallory revokes (an API client's POST, same origin).
    for (const other of others) {
      const revoked = await fetch(`${gateway.url}/oauth/sessions/${other.id}/revoke`, { method: 'POST', headers: { cookie: mallory.cookie, accept: 'application/json', origin: gateway.url } })
      await revoked.arrayBuffer()
    }
    expect(await forwardAuth('demo', alice)).toEqual({ status: 200, user: 'alice' })
    // Her own planted session only (it stays hers: the sign-in neither built on it nor renamed it).
    expect(others.map((session) => session.providers)).toEqual([['demo-twin']])
  })
})

describe('a sign-in of the same person', () => {
  it('adds its provider to the browser\'s session: both answer as that person', async () => {
    const first = await signIn(`${gateway.url}/oauth/login/demo-twin/?next=/oauth/`, 'twin-dora')
    const landed = await first.browser.navigate(`${gateway.url}/oauth/login/demo/?next=/oauth/`, { login: 'twin-dora' })
    expect(landed.status).toBe(200)
    const cookie = `gw_session=${first.browser.cookies.get('gw_session')!.value}`
    expect(await forwardAuth('demo', cookie)).toEqual({ status: 200, user: 'twin-dora' })
    expect(await forwardAuth('demo-twin', cookie)).toEqual({ status: 200, user: 'twin-dora' })
  })
})

describe('the other person\'s session a sign-in did not build on', () => {
  // A re-reading's finding: the sign-in still renamed it, so for a minute its cookie's holder could
  // end the new person's session through the rename's pointer.
  async function logout (cookie: string, everywhere: boolean): Promise<void> {
    const response = await fetch(`${gateway.url}/oauth/logout/${everywhere ? '?everywhere=1' : ''}`, { method: 'POST', redirect: 'manual', headers: { accept: 'application/json', cookie } })
    await response.arrayBuffer()
    expect(response.status).toBeLessThan(400)
  }

  it('stays as it is: the planter\'s session still opens', async () => {
    const planted = await signIn(`${gateway.url}/oauth/login/demo-twin/?next=/oauth/`, 'mallory-r3')
    await aliceSignsInOverPlantedCookie(planted.value)
    expect(await forwardAuth('demo-twin', planted.cookie)).toEqual({ status: 200, user: 'mallory-r3' })
  })

  it('cannot end the new person\'s session: not by its own sign-out, nor by sign out everywhere from another of its person\'s', async () => {
    const planted = await signIn(`${gateway.url}/oauth/login/demo-twin/?next=/oauth/`, 'mallory-r1')
    const elsewhere = await signIn(`${gateway.url}/oauth/login/demo-twin/?next=/oauth/`, 'mallory-r1')
    const alice = await aliceSignsInOverPlantedCookie(planted.value)
    await logout(elsewhere.cookie, true)
    expect(await forwardAuth('demo', alice)).toEqual({ status: 200, user: 'alice' })
    const again = await signIn(`${gateway.url}/oauth/login/demo-twin/?next=/oauth/`, 'mallory-r2')
    const bob = await aliceSignsInOverPlantedCookie(again.value)
    await logout(again.cookie, false)
    expect(await forwardAuth('demo', bob)).toEqual({ status: 200, user: 'alice' })
  })
})
