// An agent's open answers (MCP's SSE answers and long-held GET streams) end at the grant's
// session.maxAge, as its websocket does, even with a token that lives longer (an outside tester's
// finding: a stream outlived both the grant's lifetime and the token it was opened with; the token's
// end is a row of test/agents/attacks.test.ts), and the grant's maxAge counts from the sign-in it is
// made of, not from the Allow up to state.ttl later. The gateway's clock and timers are the test's.
import { describe, expect } from 'vitest'
import { agentGrant } from '../helpers/agent-grant.js'
import type { TestGateway } from '../helpers/gateway.js'
import { ManualTimers } from '../helpers/manual-timers.js'
import { test as it } from '../helpers/stack.js'

const MAX_AGE_MS = 30 * 60_000
const clock = { offset: 0, now: () => Date.now() + clock.offset }
const timers = new ManualTimers()
let gateway: TestGateway

it.beforeAll(async ({ startStack, upstream }) => {
  gateway = await startStack({
    // Tokens of an hour, a grant of half an hour: the grant's end comes first.
    agents: { accessTokenTtl: '1h' },
    session: { maxAge: '30m' },
    routes: [{ path: '/other/', upstream: upstream.url, provider: 'demo', agents: true }],
  }, { deps: { clock, timers } })
})

describe('an agent\'s long-held GET stream', () => {
  it('is cut when its grant passes session.maxAge, and not before', async ({ upstream }) => {
    const started = Date.now()
    const { tokens } = await agentGrant(gateway.url, 'stream-max-age', `${gateway.url}/other`)
    const response = await fetch(`${gateway.url}/other/stream`, { headers: { authorization: `Bearer ${tokens.access_token}` } })
    expect(response.status).toBe(200)
    const reader = response.body!.getReader()
    expect(new TextDecoder().decode((await reader.read()).value)).toBe('first,')
    let cut = false
    const read = reader.read().then(() => 'went on', () => { cut = true; return 'cut' })
    try {
      // The stream's deadline, on the timers' own scale: the grant's start (at most now) plus maxAge.
      const due = timers.time + started + MAX_AGE_MS - Date.now()
      timers.advance(due - 5000)
      await new Promise((resolve) => setImmediate(resolve))
      expect(cut).toBe(false)
      clock.offset = MAX_AGE_MS + 1000
      timers.advance(due + 5000)
      expect(await read).toBe('cut')
      // The grant is over for every other request too.
      expect((await fetch(`${gateway.url}/other/x`, { headers: { authorization: `Bearer ${tokens.access_token}` } })).status).toBe(401)
    } finally {
      clock.offset = 0
      upstream.release()
    }
  })
})

describe('an agent\'s grant', () => {
  it('counts session.maxAge from the person\'s sign-in, not from the Allow that came later', async () => {
    // The consent page stays open four minutes (within state.ttl) before the Allow.
    const { tokens } = await agentGrant(gateway.url, 'grant-from-sign-in', `${gateway.url}/other`, () => { clock.offset = 4 * 60_000 })
    try {
      const bearer = { authorization: `Bearer ${tokens.access_token}` }
      clock.offset = MAX_AGE_MS - 60_000
      expect((await fetch(`${gateway.url}/other/x`, { headers: bearer })).status).toBe(200)
      // Past the sign-in's maxAge, still inside the Allow's: over.
      clock.offset = MAX_AGE_MS + 60_000
      expect((await fetch(`${gateway.url}/other/x`, { headers: bearer })).status).toBe(401)
    } finally {
      clock.offset = 0
    }
  })
})
