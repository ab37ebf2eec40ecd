// A slow Redis: a real redis-server behind an order-preserving delaying TCP proxy whose delay is
// raised to four times the store's command timeout and dropped back to none while requests are in
// flight. The gateway runs with store.timeout 250ms so that each step takes a fraction of a second. A session read that fails
// for any store reason (command timeout, a reply that comes late) is a 503
// session_store_unavailable, answered within the store's bounds; never "no session": a valid
// session gets no 401 and no redirect to sign in at any point. The 503 offers a retry, not a sign-in.
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { emptyRecord, withSignIn } from '../../src/session/record.js'
import { Sealer } from '../../src/session/seal.js'
import { Sessions } from '../../src/session/session.js'
import { RedisStore } from '../../src/store/redis.js'
import { ONE_ANSWER_MS } from '../helpers/bounds.js'
import { TEST_SECRET } from '../helpers/gateway.js'
import { startDelayProxy, type DelayProxy } from '../helpers/delay-proxy.js'
import { waitFor } from '../helpers/net.js'
import { answersAfter, ask, hammer, startFaultStack, type FaultStack } from '../helpers/fault-stack.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'

/** The store's command timeout (store.timeout below). */
const COMMAND_TIMEOUT_MS = 250
/** The slow Redis's delay each way: four command timeouts, far beyond the one a command may take. */
const SLOW_MS = 4 * COMMAND_TIMEOUT_MS
/**
 * What a read the command timeout did not bound would take: the delay there and back (eight
 * command timeouts). Every answer comes before it.
 */
const UNBOUNDED_READ_MS = 2 * SLOW_MS
/** The delay back to 0: the commands sent while it was SLOW_MS are answered within that read, then one answer. */
const DRAINED_WITHIN_MS = UNBOUNDED_READ_MS + ONE_ANSWER_MS

let redis: TestRedis
let proxy: DelayProxy
let stack: FaultStack
/** Writes sessions straight to Redis, not through the delaying proxy nor under the 250 ms timeout. */
let direct: RedisStore

beforeAll(async () => {
  redis = await startRedis('spawn')
  const { hostname, port } = new URL(redis.url)
  proxy = await startDelayProxy({ host: hostname, port: Number(port) })
  // cacheTtl 0: every request reads the store, so none is answered from this instance's memory.
  stack = await startFaultStack({ store: { type: 'redis', url: `redis://${proxy.host}:${proxy.port}`, timeout: `${COMMAND_TIMEOUT_MS}ms` }, session: { cacheTtl: '0s' } })
  // The longest store.timeout the config allows: writing the set-up's session is not what is tested.
  direct = new RedisStore({ ...stack.gateway.config.store, url: redis.url, timeoutMs: 30_000 }, pino({ level: 'silent' }))
  if (!(await direct.ready(30_000))) throw new Error('the direct connection to Redis did not become ready')
})

/**
 * A signed-in session of `login` at `demo` with an access token valid for an hour, written as a
 * sign-in writes it, and its Cookie header. Set-up, not what these tests check: a sign-in through
 * the gateway would need every store command of it within the 250 ms store.timeout under test.
 */
async function signedIn (login: string): Promise<string> {
  const sessions = new Sessions(direct, new Sealer(TEST_SECRET), stack.gateway.config.session)
  const now = Date.now()
  const record = withSignIn(emptyRecord(now), 'demo', {
    tokens: { access_token: `token-of-${login}`, expires_at: Math.floor(now / 1000) + 3600 },
    identity: { sub: login, groups: [] },
  })
  const { cookie } = await sessions.start(undefined, record)
  return `${stack.gateway.config.session.cookieName}=${cookie}`
}

afterAll(async () => {
  await stack?.close()
  await direct?.close()
  await proxy?.close()
  await redis?.release()
})

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** No delay again, and the replies still held back drained: the store answers in time again. */
async function recover (): Promise<void> {
  proxy.setDelay(0)
  await waitFor(async () => (await fetch(`${stack.gateway.url}/readyz`)).status === 200, 10_000, 'the store to answer in time again')
}

describe('a slow session store', () => {
  it('answers a valid session only 200 or 503 while Redis slows to 4x the command timeout and recovers, never 401 or a sign-in redirect', async () => {
    const cookie = await signedIn('alice')
    const load = hammer(`${stack.gateway.url}/app/x`, cookie, 6)
    // Delays below the timeout, around it and far beyond it, each held until a dozen answers came.
    for (const delay of [0, 50, 150, 300, 500, SLOW_MS, 0]) {
      proxy.setDelay(delay)
      await answersAfter(load, load.answers.length, 12, () => true, `at a delay of ${delay} ms`)
    }
    // Back to no delay: late replies drain, then the store answers again, and keeps answering.
    const recovered = Date.now()
    while (Date.now() - recovered < DRAINED_WITHIN_MS && load.answers.at(-1)?.status !== 200) await pause(100)
    await answersAfter(load, load.answers.length, 10, (answer) => answer.status === 200, 'of 200 after the recovery')
    const answers = await load.stop()

    const statuses = new Set(answers.map((answer) => answer.status))
    expect([...statuses].sort()).toEqual([200, 503])
    for (const answer of answers) {
      expect(answer.location).toBeNull()
      if (answer.status === 503) expect(answer.body).toContain('session_store_unavailable')
    }
    // Every answer within the store's bound: an unbounded read would wait SLOW_MS each way.
    expect(Math.max(...answers.map((answer) => answer.ms))).toBeLessThan(UNBOUNDED_READ_MS)
    // That the store answers again is what the ten 200s after the recovery show. The very last
    // answer is not asked to be 200: with a 250 ms store.timeout, a machine busy with the rest of
    // the suite can still make one command late after the recovery, and its 503 is correct (seen
    // once).
  })

  it('answers 503 within the command timeout while Redis is slow, for every request of a burst', async () => {
    const cookie = await signedIn('alice')
    proxy.setDelay(SLOW_MS)
    try {
      const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => ask(`${stack.gateway.url}/app/burst`, cookie, i % 2 ? 'text/html' : 'application/json')))
      for (const answer of answers) {
        expect(answer.status).toBe(503)
        // Before any reply could have come (the delay there and back): no answer waited for one. Not
        // the one-way delay: a busy machine answered one at 1,001 ms, its timer late, no reply near.
        expect(answer.ms).toBeLessThan(UNBOUNDED_READ_MS)
      }
      // The bound is the command timeout, not the delay: no answer waited for the late reply.
      expect(Math.min(...answers.map((answer) => answer.ms))).toBeGreaterThanOrEqual(COMMAND_TIMEOUT_MS - 50)
    } finally {
      await recover()
    }
  })

  it('offers a retry, not a sign-in, on a 503 session_store_unavailable (no login_url; the page says "Try again")', async () => {
    const cookie = await signedIn('alice')
    proxy.setDelay(SLOW_MS)
    try {
      const json = await ask(`${stack.gateway.url}/app/page?x=1`, cookie, 'application/json')
      expect(json.status).toBe(503)
      const body = JSON.parse(json.body) as Record<string, unknown>
      expect(body.error).toBe('session_store_unavailable')
      expect(body).not.toHaveProperty('login_url')

      const html = await ask(`${stack.gateway.url}/app/page?x=1`, cookie, 'text/html')
      expect(html.status).toBe(503)
      expect(html.body).toContain('Try again')
      expect(html.body).not.toContain('Sign in again')
      expect(html.body).toContain('href="/app/page?x=1"')
    } finally {
      await recover()
    }
  })
})
