// "Sign out everywhere", and a revoke on the sessions page, while another of the person's browsers
// is being renamed by a sign-in (adding a provider, stepping up, signing in again), the rename
// completing on instance B at the worst moments of instance A's ending:
// - after A has read the person's list (ZRANGE) but before it asks whether each session is there
//   (PTTL): the new id is listed after A's read, and the old record taken before A's check;
// - after A has checked a session is live (PTTL) but before its DEL reaches the store: the DEL hits
//   the old id, already taken by the rename.
// Outside testers' findings: A ended neither, said "You are signed out everywhere", and the renamed
// session went on. A now follows an entry whose session is gone to where a sign-in renamed it in
// the last minute (src/session/renames.ts), as a sign-out with the old cookie does, and follows each
// ended session's renames. The sign-in side of the race is sign-in-rename-race.test.ts's. Each
// moment is forced with the hold proxy.
import { afterAll, expect } from 'vitest'
import { signIn, type SignedIn } from '../helpers/browser.js'
import { reachCallback } from '../helpers/callback.js'
import { oidcClient, sessionStatus, type TestGateway } from '../helpers/gateway.js'
import { heldInstance, type HoldProxy } from '../helpers/hold-proxy.js'
import { test as it } from '../helpers/stack.js'

let b: TestGateway
let a: TestGateway
let proxy: HoldProxy
let closeA: () => Promise<void>

it.beforeAll(async ({ startStack, op, redis, upstream }) => {
  // Neither instance keeps sessions in memory: what each answers is what the store holds, not
  // whether B has yet heard A's broadcast (pub/sub, milliseconds later; endedElsewhere's tests).
  const raw = {
    session: { cacheTtl: 0 },
    providers: { demo: oidcClient(op.issuer, 'c', 's', 'openid email') },
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }],
  }
  // B: where browsers sign in (the worker's address, which the provider's redirect URI names).
  b = await startStack(raw)
  // A: where "sign out everywhere" is handled; its Redis through a proxy that can hold its commands.
  ;({ gateway: a, proxy, close: closeA } = await heldInstance(redis.url, raw))
})

afterAll(async () => { await closeA?.() })

/** "Sign out everywhere" from `browser`'s session, on A. */
const signOutEverywhere = (browser: SignedIn['browser']) =>
  browser.fetch(a.url + '/oauth/logout/?everywhere=1', { method: 'POST', body: '', headers: { accept: 'text/html', 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' } })

it.each([
  ['its read of the person\'s list and its check of each entry', 'race-alice', [['zrange', 'person:'], ['pttl']]],
  ['its live check and its delete', 'late-rename-alice', [['pttl'], ['del', 'session:']]],
] as const)('"sign out everywhere" ends a session renamed between %s', async (_moment, login, [after, before]) => {
  const laptop = await signIn(`${b.url}/app/`, login)
  const phone = await signIn(`${b.url}/app/`, login)
  const oldPhone = phone.value
  // The phone is signing in again (any sign-in in a browser with a session renames it): it has the
  // provider's answer in hand, the callback not yet sent.
  const callback = await reachCallback(phone.browser, `${b.url}/oauth/login/demo/?next=/app/`, { login })

  // The laptop signs out everywhere on A; A is held at the moment named.
  const held = proxy.arm([...after], [...before])
  const answered = signOutEverywhere(laptop.browser)
  await held
  // Meanwhile the phone's sign-in completes on B: new id listed, old id taken.
  const landed = await phone.browser.fetch(callback.href)
  await landed.arrayBuffer()
  expect(landed.status).toBe(302)
  const newPhone = phone.browser.cookies.get('gw_session')!.value
  expect(newPhone).not.toBe(oldPhone)
  proxy.release()
  const page = await (await answered).text()

  expect(page).toContain('You are signed out everywhere')
  expect(await sessionStatus(a, laptop.value)).toBe(401)
  expect(await sessionStatus(b, oldPhone)).toBe(401)
  expect(await sessionStatus(b, newPhone), 'the phone\'s session under its new id').toBe(401)
})

it('a revoke on the sessions page ends a session renamed between its live check and its delete', async () => {
  const laptop = await signIn(`${b.url}/app/`, 'late-rename-bob')
  const phone = await signIn(`${b.url}/app/`, 'late-rename-bob')
  const listed = await (await fetch(`${a.url}/oauth/sessions/`, { headers: { cookie: `gw_session=${laptop.value}`, accept: 'application/json' } })).json() as { sessions: Array<{ id: string, current: boolean }> }
  const target = listed.sessions.find((entry) => !entry.current)!
  const callback = await reachCallback(phone.browser, `${b.url}/oauth/login/demo/?next=/app/`, { login: 'late-rename-bob' })

  const held = proxy.arm(['pttl'], ['del', 'session:'])
  const answered = fetch(`${a.url}/oauth/sessions/${target.id}/revoke`, { method: 'POST', headers: { cookie: `gw_session=${laptop.value}`, accept: 'application/json', origin: a.url } })
  await held
  const landed = await phone.browser.fetch(callback.href)
  await landed.arrayBuffer()
  expect(landed.status).toBe(302)
  const newPhone = phone.browser.cookies.get('gw_session')!.value
  proxy.release()
  const response = await answered
  expect(response.status).toBe(200)
  expect(await sessionStatus(b, newPhone), 'the revoked phone session under its new id').toBe(401)
})

it('without the race, a session renamed before "sign out everywhere" is ended by it', async () => {
  const laptop = await signIn(`${b.url}/app/`, 'race-bob')
  const phone = await signIn(`${b.url}/app/`, 'race-bob')
  const callback = await reachCallback(phone.browser, `${b.url}/oauth/login/demo/?next=/app/`, { login: 'race-bob' })
  expect((await phone.browser.fetch(callback.href)).status).toBe(302)
  const newPhone = phone.browser.cookies.get('gw_session')!.value
  const page = await (await signOutEverywhere(laptop.browser)).text()
  expect(page).toContain('You are signed out everywhere')
  expect(await sessionStatus(b, newPhone)).toBe(401)
})
