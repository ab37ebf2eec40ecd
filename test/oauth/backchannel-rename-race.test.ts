// An outside tester's finding (fixed: each ended session's renames are followed): a provider's
// back-channel logout (by sub) read the index (SMEMBERS) and is about to DEL the session when a sign-in in that browser renames it (GETDEL of the old id, the new id listed
// under the same sub). The DEL hits the old id; the provider is answered 200 and never resends;
// the renamed session goes on though the provider logged the person out.
import { afterAll, expect } from 'vitest'
import { signIn } from '../helpers/browser.js'
import { reachCallback } from '../helpers/callback.js'
import { oidcClient, sessionStatus, type TestGateway } from '../helpers/gateway.js'
import { heldInstance, type HoldProxy } from '../helpers/hold-proxy.js'
import { logoutToken, type TestProvider } from '../helpers/oidc.js'
import { test as it } from '../helpers/stack.js'

let a: TestGateway
let b: TestGateway
let proxy: HoldProxy
let closeA: () => Promise<void>
let bcl: TestProvider

it.beforeAll(async ({ startStack, upstream, redis, op, bcl: provider }) => {
  bcl = provider
  const raw = {
    session: { cacheTtl: 0 },
    providers: { demo: oidcClient(op.issuer, 'c', 's', 'openid email'), bcl: oidcClient(bcl.issuer, 'c2', 's') },
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }, { path: '/bcl/', upstream: upstream.url, provider: 'bcl' }],
  }
  b = await startStack(raw)
  ;({ gateway: a, proxy, close: closeA } = await heldInstance(redis.url, raw))
})

afterAll(async () => { await closeA?.() })

it('a back-channel logout ends a session renamed between its index read and its delete', async () => {
  const phone = await signIn(`${b.url}/bcl/`, 'bcl-rename')
  expect(await sessionStatus(b, phone.value, '/bcl/x')).toBe(200)
  const callback = await reachCallback(phone.browser, `${b.url}/oauth/login/bcl/?next=/bcl/`, { login: 'bcl-rename' })
  const token = await logoutToken(bcl, 'c2', 'bcl-rename')

  const held = proxy.arm(['smembers'], ['del', 'session:'])
  const answered = fetch(`${a.url}/oauth/backchannel-logout/bcl/`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' }, body: `logout_token=${token}` })
  await held
  const landed = await phone.browser.fetch(callback.href)
  await landed.arrayBuffer()
  expect(landed.status).toBe(302)
  const renamed = phone.browser.cookies.get('gw_session')!.value
  expect(renamed).not.toBe(phone.value)
  proxy.release()
  expect((await answered).status).toBe(200)
  expect(await sessionStatus(b, renamed, '/bcl/x'), 'the renamed session after the provider\'s logout').toBe(401)
})
