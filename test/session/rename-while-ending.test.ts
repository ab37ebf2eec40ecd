// An outside tester's finding (fixed: each ended session's renames are followed): a sign-in
// renames one of the person's sessions (another tab signing in again) AFTER
// "sign out everywhere" / a revoke on the sessions page has checked it is live (PTTL) but BEFORE
// its DEL reaches the store. The DEL then hits the old id, already taken by the rename, and the
// renamed session is never ended: the phone stays signed in though the page says "signed out
// everywhere" (the read-vs-check race of sign-out-everywhere-race.test.ts, one step later).
import { afterAll, expect } from 'vitest'
import { signIn } from '../helpers/browser.js'
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
  b = await startStack(raw)
  ;({ gateway: a, proxy, close: closeA } = await heldInstance(redis.url, raw))
})

afterAll(async () => { await closeA?.() })

it('"sign out everywhere" ends a session renamed between its live check and its delete', async () => {
  const laptop = await signIn(`${b.url}/app/`, 'late-rename-alice')
  const phone = await signIn(`${b.url}/app/`, 'late-rename-alice')
  const oldPhone = phone.value
  const callback = await reachCallback(phone.browser, `${b.url}/oauth/login/demo/?next=/app/`, { login: 'late-rename-alice' })

  // A has read the list and checked each session (PTTL); its DEL of the phone's session is held.
  const held = proxy.arm(['pttl'], ['del', 'session:'])
  const answered = laptop.browser.fetch(a.url + '/oauth/logout/?everywhere=1', { method: 'POST', body: '', headers: { accept: 'text/html', 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' } })
  await held
  const landed = await phone.browser.fetch(callback.href)
  await landed.arrayBuffer()
  expect(landed.status).toBe(302)
  const newPhone = phone.browser.cookies.get('gw_session')!.value
  expect(newPhone).not.toBe(oldPhone)
  proxy.release()
  const page = await (await answered).text()

  expect(page).toContain('You are signed out everywhere')
  expect(await sessionStatus(b, laptop.value)).toBe(401)
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
