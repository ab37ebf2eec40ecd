// An agent on a route with `reauth` (step-up): its grant's sign-in is asked for the route's max_age,
// so a grant made moments ago passes, and one whose sign-in is older than reauth.maxAge is asked to
// step up (401 insufficient_user_authentication), as its person's browser would be. An outside
// tester's finding: the agent's sign-in named no route, the provider gave no auth_time, and every
// request of every agent on such a route was refused. The gateway's clock is the test's.
import { describe, expect } from 'vitest'
import { agentGrant } from '../helpers/agent-grant.js'
import type { TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'

const clock = { offset: 0, now: () => Date.now() + clock.offset }
let gateway: TestGateway

it.beforeAll(async ({ startStack, upstream }) => {
  gateway = await startStack({
    // Tokens of an hour: the step-up comes first.
    agents: { accessTokenTtl: '1h' },
    routes: [{ path: '/step/', upstream: upstream.url, provider: 'demo', agents: true, reauth: { maxAge: '15m' } }],
  }, { deps: { clock } })
})

async function call (token: string): Promise<{ status: number, error: string | undefined }> {
  const response = await fetch(`${gateway.url}/step/x`, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } })
  const body = await response.json() as { error?: string }
  return { status: response.status, error: body.error }
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
