// One issuer behind two provider entries (two clients of one Keycloak realm, say `corp` and
// `corp-admin`) is one person: a session signed in through either is listed, revoked and ended by
// sign out everywhere from the other (SPEC: people are keyed on the provider's `iss` + `sub`). An
// outside tester's finding: the index keyed people on the provider's name too, so a stolen session
// signed in through the second entry survived the victim's sign out everywhere, unlisted.
import { describe, expect } from 'vitest'
import { signIn } from '../helpers/browser.js'
import { oidcClient, type TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'

let gateway: TestGateway

it.beforeAll(async ({ startStack, upstream, op }) => {
  gateway = await startStack({
    session: { cacheTtl: 0 },
    // The shared provider's client under a second name (its redirect URIs name both).
    providers: { 'demo-twin': oidcClient(op.issuer, 'c', 's') },
    routes: [
      { path: '/app/', upstream: upstream.url, provider: 'demo' },
      { path: '/twin/', upstream: upstream.url, provider: 'demo-twin' },
    ],
  })
})

async function status (cookie: string, path: string): Promise<number> {
  const response = await fetch(`${gateway.url}${path}`, { headers: { accept: 'application/json', cookie } })
  await response.arrayBuffer()
  return response.status
}

interface Listed { id: string, providers: string[], current: boolean }

async function listed (cookie: string): Promise<Listed[]> {
  const response = await fetch(`${gateway.url}/oauth/sessions/`, { headers: { accept: 'application/json', cookie } })
  return (await response.json() as { sessions: Listed[] }).sessions
}

describe('one issuer behind two provider entries is one person', () => {
  it('lists the session signed in through the other entry, under that entry\'s name, and sign out everywhere ends it', async () => {
    const own = await signIn(`${gateway.url}/oauth/login/demo/?next=/oauth/`, 'alice')
    const other = await signIn(`${gateway.url}/oauth/login/demo-twin/?next=/oauth/`, 'alice')
    expect(await status(other.cookie, '/twin/x')).toBe(200)
    const seen = await listed(own.cookie)
    expect(seen.map((session) => [session.current, session.providers])).toEqual([[false, ['demo-twin']], [true, ['demo']]])
    expect((await listed(other.cookie)).map((session) => [session.current, session.providers])).toEqual([[true, ['demo-twin']], [false, ['demo']]])

    const out = await fetch(`${gateway.url}/oauth/logout/?everywhere=1`, { method: 'POST', redirect: 'manual', headers: { accept: 'application/json', cookie: own.cookie } })
    await out.arrayBuffer()
    expect(await status(own.cookie, '/app/x')).toBe(401)
    expect(await status(other.cookie, '/twin/x')).toBe(401)
  })

  it('another person through the other entry is not listed, nor ended', async () => {
    const own = await signIn(`${gateway.url}/oauth/login/demo/?next=/oauth/`, 'bob')
    const someoneElse = await signIn(`${gateway.url}/oauth/login/demo-twin/?next=/oauth/`, 'carol')
    expect((await listed(own.cookie)).map((session) => session.providers)).toEqual([['demo']])
    const out = await fetch(`${gateway.url}/oauth/logout/?everywhere=1`, { method: 'POST', redirect: 'manual', headers: { accept: 'application/json', cookie: own.cookie } })
    await out.arrayBuffer()
    expect(await status(someoneElse.cookie, '/twin/x')).toBe(200)
  })
})
