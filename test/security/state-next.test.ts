// The state seals where the sign-in goes back to (`next`, whose query may hold an application's own
// code or a password-reset token), so that whoever sees the state (the provider's logs and
// analytics, the history of its pages, anyone who copies the authorize URL) cannot read it. An
// outside tester's finding: the callback opened the seal for anyone who sent the state, in its 400
// invalid_state's "Start again" login_url, from another browser, after it was used, or after it
// expired. Only the browser whose flow cookie started the sign-in is sent back toward its `next`.
import { describe, expect } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { reachCallback } from '../helpers/callback.js'
import type { TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'

let gateway: TestGateway
/** How far the gateway's clock is ahead of the wall clock (moved, never waited on). */
let offsetMs = 0

it.beforeAll(async ({ startStack, upstream }) => {
  gateway = await startStack({ routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }] }, { deps: { clock: { now: () => Date.now() + offsetMs } } })
})

const SECRET = 'PasswordResetToken5c4b3a2f1e'

/** The victim's sign-in toward a page whose query holds a secret: the state the provider sees, and the callback URL. */
async function victimState (): Promise<{ state: string, callback: URL, victim: Browser }> {
  // Its clock is the gateway's: the flow cookie's Max-Age runs out as the state's lifetime does.
  const victim = new Browser(() => Date.now() + offsetMs)
  const callback = await reachCallback(victim, `${gateway.url}/oauth/login/demo/?next=${encodeURIComponent(`/app/reset?token=${SECRET}`)}`)
  return { state: callback.searchParams.get('state')!, callback, victim }
}

describe('the sealed next and the callback\'s error answer', () => {
  it('a stranger holding only the state (from the provider\'s logs) cannot read the victim\'s next by sending it to the callback', async () => {
    const { state } = await victimState()
    // Sanity: the state itself does not show it (the seal works).
    expect(Buffer.from(state.split('.')[1]!, 'base64url').toString('utf8')).not.toContain(SECRET)
    // The stranger: another browser, no cookie at all, JSON and HTML.
    for (const accept of ['application/json', 'text/html']) {
      const answer = await fetch(`${gateway.url}/oauth/authorized/demo/?code=x&state=${encodeURIComponent(state)}`, { headers: { accept }, redirect: 'manual' })
      const body = await answer.text()
      expect(answer.status).toBe(400)
      expect(decodeURIComponent(body), `${accept}: ${body.slice(0, 400)}`).not.toContain(SECRET)
    }
  })

  it('nor with an error= callback (no code needed), from a browser that has a flow cookie of its own', async () => {
    const { state } = await victimState()
    const stranger = new Browser()
    // The stranger's browser has a binding of its own (any sign-in it started).
    await (await stranger.fetch(`${gateway.url}/oauth/login/demo/?next=/app/`)).arrayBuffer()
    const answer = await stranger.fetch(`${gateway.url}/oauth/authorized/demo/?error=access_denied&state=${encodeURIComponent(state)}`, { headers: { accept: 'application/json' } })
    const body = await answer.text()
    expect(answer.status).toBe(400)
    expect(decodeURIComponent(body), body.slice(0, 400)).not.toContain(SECRET)
  })

  it('nor after the victim used it (a replay of the leaked callback URL)', async () => {
    const { callback, victim } = await victimState()
    const done = await victim.fetch(callback.href)
    await done.arrayBuffer()
    expect(done.status).toBe(302)
    const replay = await fetch(callback.href, { headers: { accept: 'application/json' }, redirect: 'manual' })
    const body = await replay.text()
    expect(replay.status).toBe(400)
    expect(decodeURIComponent(body), body.slice(0, 400)).not.toContain(SECRET)
  })

  it('held: the victim\'s own browser, on a failure, may be sent back toward its own next', async () => {
    const { state, victim } = await victimState()
    const answer = await victim.fetch(`${gateway.url}/oauth/authorized/demo/?error=access_denied&state=${encodeURIComponent(state)}`, { headers: { accept: 'application/json' } })
    const body = await answer.text()
    expect(answer.status).toBeGreaterThanOrEqual(400)
    expect(decodeURIComponent(body)).toContain(SECRET)
  })

  it('held: a stranger\'s callback with the victim\'s state does not use it up: the victim still completes', async () => {
    const { state, callback, victim } = await victimState()
    const stranger = await fetch(`${gateway.url}/oauth/authorized/demo/?code=x&state=${encodeURIComponent(state)}`, { headers: { accept: 'application/json' }, redirect: 'manual' })
    await stranger.arrayBuffer()
    expect(stranger.status).toBe(400)
    const done = await victim.fetch(callback.href)
    await done.arrayBuffer()
    expect(done.status).toBe(302)
    expect(done.headers.get('location')).toBe(`/app/reset?token=${SECRET}`)
  })

  it('held: the victim\'s own browser with its expired state is sent back toward its own next', async () => {
    const { callback, victim } = await victimState()
    offsetMs = 10 * 60 * 1000
    try {
      const answer = await victim.fetch(callback.href, { headers: { accept: 'application/json' } })
      const body = await answer.text()
      expect(answer.status).toBe(400)
      expect(decodeURIComponent(body)).toContain(SECRET)
    } finally {
      offsetMs = 0
    }
  })

  it('nor once the state has expired (the gateway\'s clock moved past state.ttl)', async () => {
    const { state } = await victimState()
    offsetMs = 10 * 60 * 1000
    try {
      const answer = await fetch(`${gateway.url}/oauth/authorized/demo/?code=x&state=${encodeURIComponent(state)}`, { headers: { accept: 'application/json' }, redirect: 'manual' })
      const body = await answer.text()
      expect(answer.status).toBe(400)
      expect(decodeURIComponent(body), body.slice(0, 400)).not.toContain(SECRET)
    } finally {
      offsetMs = 0
    }
  })
})
