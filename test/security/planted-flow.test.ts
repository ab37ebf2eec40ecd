// A sign-in another browser began, completed in this one (login CSRF by a planted flow cookie: an
// outside tester's finding). Whoever can set a cookie for the gateway's host (a sibling host under a
// shared parent domain, another port of the host) begins a sign-in in their own browser, stops
// before the callback, plants their flow cookie in the person's browser with a longer Path (sent
// first) and sends the person to their callback. The callback replaced a signed-in person's session
// with the planter's (same provider), or added the planter's provider to it (another provider): the
// planter's sessions page then listed it, with its browser and address, and could revoke it. A
// sign-in now changes only the session it began with (or that session renamed since), or the same
// person's at a provider that session holds; any other answers 400 invalid_state and changes
// nothing. The controls: the person's own sign-ins, from one tab and from two at once, still work.
import { expect } from 'vitest'
import { Browser, signIn } from '../helpers/browser.js'
import { reachCallback } from '../helpers/callback.js'
import type { TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'
import { startTokenStub, type TokenStub } from '../helpers/token-stub.js'

let gateway: TestGateway
let stub: TokenStub

it.beforeAll(async ({ startStack, upstream }) => {
  stub = await startTokenStub()
  gateway = await startStack({
    providers: { partner: { clientId: 'gh', clientSecret: 's', authorizeUrl: `${stub.url}/authorize`, tokenUrl: `${stub.url}/token`, scope: 'x', userinfoUrl: `${stub.url}/userinfo`, claims: { user: 'login' } } },
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }, { path: '/p/', upstream: upstream.url, provider: 'partner' }],
  })
})
it.afterAll(async () => { await gateway?.close(); await stub?.close() })

/** Who the upstream is told the cookie's holder is at `path`, or the status when not let through. */
async function who (cookie: string, path = '/app/x'): Promise<string | number> {
  const answer = await fetch(`${gateway.url}${path}`, { headers: { accept: 'application/json', cookie } })
  return answer.status === 200 ? (await answer.json() as { headers: Record<string, string> }).headers['x-forwarded-user']! : answer.status
}

async function providersOf (cookie: string): Promise<string[]> {
  const info = await (await fetch(`${gateway.url}/oauth/userinfo/`, { headers: { accept: 'application/json', cookie } })).json() as { identities?: Record<string, unknown> }
  return Object.keys(info.identities ?? {}).sort()
}

/** The planter's partner sign-in, stopped before its callback: that callback and the flow cookie. */
async function partnerCallback (browser: Browser): Promise<string> {
  const login = await browser.fetch(`${gateway.url}/oauth/login/partner/?next=/p/`)
  const state = new URL(login.headers.get('location')!).searchParams.get('state')!
  return `${gateway.url}/oauth/authorized/partner/?code=c&state=${encodeURIComponent(state)}`
}

/** The callback sent from the person's browser, with the planted flow cookie ahead of its own cookies. */
async function inPersonsBrowser (callback: string, planted: string, cookies: string): Promise<Response> {
  return await fetch(callback, { redirect: 'manual', headers: { accept: 'application/json', cookie: `gw_session_flow=${planted}; ${cookies}` } })
}

it('the planter\'s sign-in at the same provider does not replace a signed-in person\'s session: 400 invalid_state, no cookie set', async () => {
  const person = await signIn(`${gateway.url}/app/`, 'planted-alice')
  const planter = new Browser()
  const callback = await reachCallback(planter, `${gateway.url}/oauth/login/demo/?next=/app/`, { login: 'mallory' })
  const answer = await inPersonsBrowser(callback.href, planter.cookies.get('gw_session_flow')!.value, person.cookie)
  expect({ status: answer.status, error: (await answer.json() as { error: string }).error }).toEqual({ status: 400, error: 'invalid_state' })
  expect(answer.headers.getSetCookie().filter((line) => line.startsWith('gw_session='))).toEqual([])
  expect(await who(person.cookie)).toBe('planted-alice')
})

it('the planter\'s sign-in at another provider is not added to the person\'s session, nor listed on the planter\'s sessions page', async () => {
  const person = await signIn(`${gateway.url}/app/`, 'planted-bob')
  stub.userinfo = { login: 'mallory' }
  const planter = new Browser()
  const callback = await partnerCallback(planter)
  const answer = await inPersonsBrowser(callback, planter.cookies.get('gw_session_flow')!.value, person.cookie)
  expect(answer.status).toBe(400)
  expect(await providersOf(person.cookie)).toEqual(['demo'])
  // The planter signs in at partner as mallory in their own browser: their list holds their session alone.
  const own = new Browser()
  expect((await own.fetch(await partnerCallback(own))).status).toBe(302)
  const list = await (await own.fetch(`${gateway.url}/oauth/sessions/`, { headers: { accept: 'application/json' } })).json() as { sessions: Array<{ current: boolean }> }
  expect(list.sessions).toHaveLength(1)
})

it('the control: the person\'s own sign-in at another provider, begun with their session, joins it', async () => {
  const person = await signIn(`${gateway.url}/app/`, 'planted-carol')
  stub.userinfo = { login: 'carol-p' }
  const answer = await person.browser.fetch(await partnerCallback(person.browser))
  expect(answer.status).toBe(302)
  const cookie = `gw_session=${person.browser.cookies.get('gw_session')!.value}`
  expect(await providersOf(cookie)).toEqual(['demo', 'partner'])
  expect(await who(cookie, '/p/x')).toBe('carol-p')
})

it('the control: two tabs that began signing in before the browser had a session, the same person at the same provider, both complete', async () => {
  const browser = new Browser()
  const first = await reachCallback(browser, `${gateway.url}/oauth/login/demo/?next=/app/`, { login: 'planted-dave' })
  const second = await reachCallback(browser, `${gateway.url}/oauth/login/demo/?next=/app/`, { login: 'planted-dave' })
  expect((await browser.fetch(first.href)).status).toBe(302)
  expect((await browser.fetch(second.href)).status).toBe(302)
  expect(await who(`gw_session=${browser.cookies.get('gw_session')!.value}`)).toBe('planted-dave')
})

it('planted before the person\'s next sign-in (their own, which then carries the planted binding): the planter\'s callback is still refused (a second look\'s finding)', async () => {
  const person = await signIn(`${gateway.url}/app/`, 'planted-eve')
  stub.userinfo = { login: 'mallory' }
  const planter = new Browser()
  const callback = await partnerCallback(planter)
  const planted = planter.cookies.get('gw_session_flow')!.value
  // Sent first from now on (the Browser helper keeps one per name: the planted one).
  person.browser.cookies.set('gw_session_flow', { value: planted, path: '/oauth/' })
  const own = await reachCallback(person.browser, `${gateway.url}/oauth/login/demo/?next=/app/`, { login: 'planted-eve' })
  expect((await person.browser.fetch(own.href)).status).toBe(302)
  const cookie = `gw_session=${person.browser.cookies.get('gw_session')!.value}`
  const answer = await inPersonsBrowser(callback, planted, cookie)
  expect(answer.status).toBe(400)
  expect(await providersOf(cookie)).toEqual(['demo'])
  expect(await who(cookie)).toBe('planted-eve')
})
