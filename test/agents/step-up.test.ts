// An agent on a route with `reauth` (step-up): its grant's sign-in is asked for the route's max_age,
// so a grant made moments ago passes, and one whose sign-in is older than reauth.maxAge is asked to
// step up (401 insufficient_user_authentication), as its person's browser would be. An outside
// tester's finding: the agent's sign-in named no route, the provider gave no auth_time, and every
// request of every agent on such a route was refused. The gateway's clock is the test's.
import { describe, expect } from 'vitest'
import { agentGrant } from '../helpers/agent-grant.js'
import { ManualTimers } from '../helpers/manual-timers.js'
import type { TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'

/** The streams' deadline timers: they fire only as the test moves their time, which the gateway's clock reads too. */
const timers = new ManualTimers()
timers.time = Date.now()
const clock = { offset: 0, now: () => timers.time + clock.offset }
let gateway: TestGateway

it.beforeAll(async ({ startStack, upstream }) => {
  gateway = await startStack({
    // Tokens of an hour: the step-up comes first.
    agents: { accessTokenTtl: '1h' },
    routes: [{ path: '/step/', upstream: upstream.url, provider: 'demo', agents: true, reauth: { maxAge: '15m' } }],
  }, { deps: { clock, timers } })
})

/** The answer to an agent's call: its status, error, and any sign-in address offered (none: an agent authorizes again; an attacker's finding). */
async function call (token: string): Promise<{ status: number, error: string | undefined, loginUrl?: unknown }> {
  const response = await fetch(`${gateway.url}/step/x`, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } })
  const body = await response.json() as { error?: string, login_url?: unknown }
  return { status: response.status, error: body.error, ...(body.login_url === undefined ? {} : { loginUrl: body.login_url }) }
}

describe('an agent on a step-up route', () => {
  it('passes with a grant signed in moments ago, and is asked to step up once that sign-in is older than reauth.maxAge', async () => {
    const { tokens } = await agentGrant(gateway.url, 'step-agent', `${gateway.url}/step`)
    try {
      expect(await call(tokens.access_token)).toEqual({ status: 200, error: undefined })
      clock.offset = 20 * 60_000
      expect(await call(tokens.access_token)).toEqual({ status: 401, error: 'insufficient_user_authentication' })
    } finally {
      clock.offset = 0
    }
  })
})

// An outside tester's finding: an agent's stream was held only to its token's exp (an hour here) or
// the grant's session.maxAge, while its person's browser's stream on the route is cut once the
// sign-in is older than reauth.maxAge.
describe('an agent\'s stream on a step-up route', () => {
  it('is cut once the grant\'s sign-in is older than reauth.maxAge, as its person\'s browser\'s is', async ({ upstream }) => {
    const { tokens } = await agentGrant(gateway.url, 'step-agent-stream', `${gateway.url}/step`)
    const response = await fetch(`${gateway.url}/step/events`, { headers: { authorization: `Bearer ${tokens.access_token}`, accept: 'text/event-stream' } })
    expect(response.status).toBe(200)
    const reader = response.body!.getReader()
    expect(new TextDecoder().decode((await reader.read()).value)).toBe('data: first\n\n')
    const next = reader.read().then(({ done }) => done ? 'ended' : 'went on', () => 'cut')
    const logged = gateway.logs.length
    try {
      // Past the sign-in's auth_time, its minute of skew and 15 minutes; far before the token's exp.
      timers.advance(timers.time + 17 * 60_000)
      expect(await next).toBe('cut')
      // Its lines say why: reauth.maxAge, not its token or its grant (an attacker's finding).
      const lines = gateway.logs.slice(logged).map((text) => JSON.parse(text) as Record<string, unknown>)
      expect(lines).toContainEqual(expect.objectContaining({ msg: 'agent stream closed: its route\'s reauth.maxAge ended' }))
      expect(lines).toContainEqual(expect.objectContaining({ url: '/step/events', why: 'its route\'s reauth.maxAge ended', user: 'step-agent-stream', credential: 'agent' }))
    } finally {
      upstream.release()
    }
  })
})
