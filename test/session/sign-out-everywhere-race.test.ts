// "Sign out everywhere" while another of the person's browsers is being renamed by a sign-in (adding
// a provider, stepping up, signing in again): instance A has read the person's list (ZRANGE) but
// not yet asked whether each session is there (PTTL); the rename completes meanwhile on instance B,
// listing the new id after A's read and taking the old record before A's check. An outside
// tester's finding: A ended neither, said "You are signed out everywhere", and the renamed session
// went on. A now follows an entry whose session is gone to where a sign-in renamed it in the last
// minute (src/session/renames.ts), as a sign-out with the old cookie does. The sign-in side of the
// race is test/session/sign-in-rename-race.test.ts's. Each moment is forced with the hold proxy.
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
  // B: where browsers sign in (the worker's address, which the provider's redirect URI names).
  b = await startStack(raw)
  // A: where "sign out everywhere" is handled; its Redis through a proxy that can hold its commands.
  ;({ gateway: a, proxy, close: closeA } = await heldInstance(redis.url, raw))
})

afterAll(async () => { await closeA?.() })

it('"sign out everywhere" ends a session renamed between its read of the person\'s list and its check of each entry', async () => {
  const laptop = await signIn(`${b.url}/app/`, 'race-alice')
  const phone = await signIn(`${b.url}/app/`, 'race-alice')
  const oldPhone = phone.value
  // The phone is signing in again (any sign-in in a browser with a session renames it): it has the
  // provider's answer in hand, the callback not yet sent.
  const callback = await reachCallback(phone.browser, `${b.url}/oauth/login/demo/?next=/app/`, { login: 'race-alice' })

  // The laptop signs out everywhere on A; A is held once it has read the person's list.
  const held = proxy.arm(['zrange', 'person:'], ['pttl'])
  const out = a.url + '/oauth/logout/?everywhere=1'
  const answered = laptop.browser.fetch(out, { method: 'POST', body: '', headers: { accept: 'text/html', 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' } })
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

it('without the race, a session renamed before "sign out everywhere" is ended by it', async () => {
  const laptop = await signIn(`${b.url}/app/`, 'race-bob')
  const phone = await signIn(`${b.url}/app/`, 'race-bob')
  const callback = await reachCallback(phone.browser, `${b.url}/oauth/login/demo/?next=/app/`, { login: 'race-bob' })
  expect((await phone.browser.fetch(callback.href)).status).toBe(302)
  const newPhone = phone.browser.cookies.get('gw_session')!.value
  const page = await (await laptop.browser.fetch(a.url + '/oauth/logout/?everywhere=1', { method: 'POST', body: '', headers: { accept: 'text/html', 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' } })).text()
  expect(page).toContain('You are signed out everywhere')
  expect(await sessionStatus(b, newPhone)).toBe(401)
})
