// Redis restarted under steady requests. With persistence (append-only file) sessions survive: a
// valid session gets 200, then 503 while Redis is away, then 200 again, never 401 or a sign-in
// redirect. Without persistence the session is gone: a clean 401 / redirect to sign in, and signing
// in again works; never a 500. Either way the log has exactly one "unreachable" and one "reachable
// again" line for the outage, and no error line per failed request.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MAX_RECONNECT_DELAY_MS } from '../../src/store/redis-connection.js'
import { ONE_ANSWER_MS } from '../helpers/bounds.js'
import { Browser } from '../helpers/browser.js'
import { answersAfter, ask, hammer, startFaultStack, type Answer, type FaultStack } from '../helpers/fault-stack.js'
import { waitFor } from '../helpers/net.js'
import { exclusively } from '../helpers/processes.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'

/** A short command timeout and outage hysteresis: the outage is logged within a fraction of a second. */
const STORE_TIMEOUT_MS = 250
const STORE = { timeout: `${STORE_TIMEOUT_MS}ms` }
/** Redis back: the next reconnection attempt, its connect (2 x store.timeout) and ready check, and one answer. */
const RECONNECTED_WITHIN_MS = MAX_RECONNECT_DELAY_MS + 3 * STORE_TIMEOUT_MS + ONE_ANSWER_MS
const HYSTERESIS = { downAfterMs: 300, upAfterMs: 300 }
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

interface LogLine { level: number, msg: string, store?: string }
const parsed = (stack: FaultStack) => stack.gateway.logs.map((line) => JSON.parse(line) as LogLine)
/** Lines whose message starts with `msg`. */
const count = (stack: FaultStack, msg: string) => parsed(stack).filter((line) => line.msg.startsWith(msg)).length

const settled = (answer: Answer) => [200, 401, 302].includes(answer.status)

// Every command after the restart must answer within store.timeout (250 ms): never beside a file
// that loads the machine (vitest.config.ts, QUIET), where a worker starved of the CPU for longer
// runs a command's timer before it reads the reply waiting on its socket.
let unlock: (() => Promise<void>) | undefined
beforeAll(async () => { unlock = await exclusively('machine-load') })
afterAll(async () => { await unlock?.() })

/**
 * Restarts Redis under steady requests with the session cookie; every answer, in order. Redis stays
 * away until the gateway has logged the outage and a dozen requests failed, and the load goes on
 * until a few requests after the restart were answered.
 */
async function restartUnderLoad (redis: TestRedis, stack: FaultStack, cookie: string) {
  const load = hammer(`${stack.gateway.url}/app/x`, cookie, 4)
  await answersAfter(load, 0, 8, (answer) => answer.status === 200, 'of 200 before the restart')
  await redis.stop()
  const down = load.answers.length
  await waitFor(async () => count(stack, 'session store unreachable') > 0, 10_000, 'the "unreachable" line')
  await answersAfter(load, down, 12, (answer) => answer.status === 503, 'of 503 while Redis is away')
  await redis.restart!()
  const back = Date.now()
  while (Date.now() - back < RECONNECTED_WITHIN_MS && !settled(load.answers.at(-1) ?? { status: 0 } as Answer)) await pause(100)
  await answersAfter(load, load.answers.length, 8, settled, 'after the restart')
  const answers = await load.stop()
  await waitFor(async () => count(stack, 'session store reachable again') > 0, 5000, 'the "reachable again" line')
  return answers
}

function expectOneOutageLogged (stack: FaultStack, answers: Array<{ status: number }>): void {
  expect(count(stack, 'session store unreachable')).toBe(1)
  expect(count(stack, 'session store reachable again')).toBe(1)
  // Failed requests are at debug level, one each; nothing at error level.
  const failed = answers.filter((answer) => answer.status === 503).length
  expect(failed).toBeGreaterThan(10)
  expect(parsed(stack).filter((line) => line.level >= 50).map((line) => line.msg)).toEqual([])
  expect(count(stack, 'request failed: session store unavailable')).toBe(failed)
}

describe('Redis restarted with persistence', () => {
  let redis: TestRedis
  let stack: FaultStack

  beforeAll(async () => {
    redis = await startRedis('spawn', { persistent: true })
    stack = await startFaultStack({ store: { type: 'redis', url: redis.url, ...STORE }, session: { cacheTtl: '0s' } }, { storeHysteresis: HYSTERESIS })
  })
  afterAll(async () => {
    await stack?.close()
    await redis?.release()
  })

  it('keeps sessions: 200, then 503 while Redis is away, then 200 again, with one outage logged', async () => {
    const cookie = await stack.signIn()
    const answers = await restartUnderLoad(redis, stack, cookie)

    expect(new Set(answers.map((answer) => answer.status))).toEqual(new Set([200, 503]))
    expect(answers.some((answer) => answer.location !== null)).toBe(false)
    expect(answers.at(-1)!.status).toBe(200)
    expect((await ask(`${stack.gateway.url}/app/after`, cookie, 'application/json')).status).toBe(200)
    expectOneOutageLogged(stack, answers)
  })
})

describe('Redis restarted without persistence', () => {
  let redis: TestRedis
  let stack: FaultStack

  beforeAll(async () => {
    redis = await startRedis('spawn')
    stack = await startFaultStack({ store: { type: 'redis', url: redis.url, ...STORE }, session: { cacheTtl: '0s' } }, { storeHysteresis: HYSTERESIS })
  })
  afterAll(async () => {
    await stack?.close()
    await redis?.release()
  })

  it('loses the session cleanly: 503 while away, then 401 or a sign-in redirect, never a 500; signing in again works', async () => {
    const cookie = await stack.signIn()
    const answers = await restartUnderLoad(redis, stack, cookie)

    expect(answers.filter((answer) => answer.status >= 500 && answer.status !== 503)).toEqual([])
    const after = answers.slice(answers.findLastIndex((answer) => answer.status !== 401 && answer.status !== 302) + 1)
    expect(after.length).toBeGreaterThan(0)
    for (const answer of after) {
      if (answer.status === 302) expect(answer.location).toContain('/oauth/login/demo/')
      else expect(JSON.parse(answer.body)).toMatchObject({ error: 'unauthenticated', login_url: expect.stringContaining('/oauth/login/demo/') })
    }
    expectOneOutageLogged(stack, answers)

    const browser = new Browser()
    expect((await browser.navigate(`${stack.gateway.url}/app/`, { login: 'alice' })).status).toBe(200)
  })
})
