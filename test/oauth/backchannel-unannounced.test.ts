// A logout token from a provider whose discovery document does not say
// backchannel_logout_supported. Its sign-ins are listed nowhere a logout token is looked up
// (sign-in.ts keeps no sid or sub for it), so the token could end nothing: it was answered 200, and
// the provider took the logout as done while the session went on. It is refused now, 400 naming
// why, after the token's verification (a stranger learns nothing new) and before its jti is taken
// (the provider may send it again once the operator has fixed the registration). The worker's `bcl`
// provider, which announces it, is the control: the same steps end its session.
import { expect } from 'vitest'
import { signIn } from '../helpers/browser.js'
import { oidcClient, sessionStatus, type TestGateway } from '../helpers/gateway.js'
import { logoutToken, type TestProvider } from '../helpers/oidc.js'
import { test as it } from '../helpers/stack.js'

let gateway: TestGateway
let op: TestProvider
let bcl: TestProvider

it.beforeAll(async ({ startStack, upstream, op: demo, bcl: announcing }) => {
  op = demo
  bcl = announcing
  gateway = await startStack({
    providers: { bcl: oidcClient(bcl.issuer, 'c2', 's') },
    routes: [
      { path: '/app/', upstream: upstream.url, provider: 'demo' },
      { path: '/bcl/', upstream: upstream.url, provider: 'bcl' },
    ],
  })
})

async function postLogout (provider: string, token: string): Promise<{ status: number, body: { error?: string, message?: string } | string }> {
  const answer = await fetch(`${gateway.url}/oauth/backchannel-logout/${provider}/`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
    body: new URLSearchParams({ logout_token: token }),
  })
  const text = await answer.text()
  return { status: answer.status, body: text === '' ? '' : JSON.parse(text) as { error?: string, message?: string } }
}

it('a provider that does not announce back-channel logout: its logout token is refused 400 naming why, the session goes on, and the same token is refused alike again (its jti not taken)', async () => {
  const discovery = await (await fetch(`${op.issuer}/.well-known/openid-configuration`)).json() as Record<string, unknown>
  expect(discovery.backchannel_logout_supported).toBeUndefined()
  const person = await signIn(`${gateway.url}/app/`, 'unannounced-alice')
  const token = await logoutToken(op, 'c', 'unannounced-alice')
  const from = gateway.logs.length

  for (let i = 0; i < 2; i++) {
    const answer = await postLogout('demo', token)
    expect(answer.status).toBe(400)
    expect(answer.body).toMatchObject({ error: 'invalid_request' })
    expect((answer.body as { message: string }).message).toContain('does not offer back-channel logout (its discovery document does not say backchannel_logout_supported)')
  }
  expect(await sessionStatus(gateway, person.value, '/app/x')).toBe(200)
  const warnings = gateway.logs.slice(from).map((line) => JSON.parse(line) as { level: number, msg: string, provider?: string })
    .filter((line) => line.msg.startsWith('back-channel logout refused'))
  expect(warnings).toHaveLength(2)
  expect(warnings.every((line) => line.level === 40 && line.provider === 'demo')).toBe(true)
  // Nothing of the token in the log.
  expect(gateway.logs.slice(from).join('\n')).not.toContain(token.split('.')[2]!)
})

it('a token that fails the verification gets the verification\'s answer, not the provider\'s setting', async () => {
  // The provider's own key, for another client.
  const answer = await postLogout('demo', await logoutToken(op, 'c2', 'unannounced-alice'))
  expect(answer).toMatchObject({ status: 400, body: { error: 'invalid_request', message: 'The logout token is meant for another client (aud).' } })
})

it('the control: the same steps at a provider that announces it end the session (200)', async () => {
  const person = await signIn(`${gateway.url}/bcl/`, 'announced-bob')
  expect(await sessionStatus(gateway, person.value, '/bcl/x')).toBe(200)
  expect(await postLogout('bcl', await logoutToken(bcl, 'c2', 'announced-bob'))).toEqual({ status: 200, body: '' })
  expect(await sessionStatus(gateway, person.value, '/bcl/x')).toBe(401)
})
