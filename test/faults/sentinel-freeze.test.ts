// A Sentinel master frozen (SIGSTOP: its process and sockets stay, nothing is answered), as a hung
// host or a partition looks: the sentinel promotes the replica after its down-after-milliseconds,
// and the gateway leaves the frozen master at the sentinel's +switch-master, not when the master
// wakes. A session signed in before the freeze, one signed in after the promotion and one signed in
// after the old master woke (when it still takes writes, until the sentinel demotes it a second or
// two later: 8-10 s with Sentinel's default periods) all survive the old master's demotion and resync. Meanwhile a valid session gets only 200
// or 503, never 401 or a sign-in redirect, and 503 only until the promotion: every request sent once
// the gateway's own bound after +switch-master has passed is answered 200.
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sessionStatus } from '../helpers/gateway.js'
import { answersAfter, hammer, startFaultStack, type Answer, type FaultStack } from '../helpers/fault-stack.js'
import { waitFor } from '../helpers/net.js'
import { startSentinelSet, type TestSentinelSet } from '../helpers/redis-sentinel.js'

/** store.timeout: one store command, and (ioredis's disconnectTimeout) how long the gateway waits for the old master's side to close. */
const TIMEOUT_MS = 500
/**
 * How soon after +switch-master the gateway serves from the promoted replica: the old connection
 * dropped (store.timeout), the first reconnection delay (100 ms, redis.ts's retryStrategy), then
 * asking the sentinel and connecting (connectTimeout, 2 x store.timeout).
 */
const AFTER_SWITCH_MS = TIMEOUT_MS + 100 + 2 * TIMEOUT_MS

let set: TestSentinelSet
let stack: FaultStack
let watcher: Redis
/** The sentinel's own announcements, with the time this process received each. */
const announced: Array<{ channel: string, message: string, at: number }> = []

beforeAll(async () => {
  set = await startSentinelSet({ downAfterMs: 500, failoverTimeoutMs: 2000 })
  watcher = set.client(Number(set.nodes[0]!.split(':')[1]), { retryStrategy: () => 100 })
  watcher.on('message', (channel: string, message: string) => announced.push({ channel, message, at: Date.now() }))
  await watcher.subscribe('+switch-master', '+convert-to-slave')
  stack = await startFaultStack({
    // Without waiting for a replica: once the replica is promoted it has none of its own until the
    // old master is demoted, so the sign-ins below would be 503 (sentinel-replica-ack.test.ts).
    store: { type: 'redis', sentinel: { name: 'mymaster', nodes: set.nodes }, timeout: `${TIMEOUT_MS}ms`, waitForReplica: false },
    session: { cacheTtl: '0s' },
  })
})
afterAll(async () => {
  // A test that failed with the master frozen: woken, the gateway's connection to it can close.
  set?.master.thaw()
  watcher?.disconnect()
  await stack?.close()
  await set?.stop()
})

/** What `ask` gets from the Redis on `port`, on a connection of its own. */
async function query<T> (port: number, ask: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = set.client(port)
  try {
    return await ask(redis)
  } finally {
    redis.disconnect()
  }
}
const sessionKeys = async (port: number) => (await query(port, (redis) => redis.keys('gw:session:*'))).sort()
const replication = (port: number) => query(port, (redis) => redis.info('replication'))

/** Replication is asynchronous: a write the replica has not received is lost with its master (Redis's doing, not the gateway's). */
async function replicated (from: number, to: number): Promise<void> {
  const keys = await sessionKeys(from)
  await waitFor(async () => (await sessionKeys(to)).join() === keys.join(), 5000, `the replica ${to} to hold ${keys.length} sessions`)
}

/** Answers as runs of one status: "503 x12 (sent 5-1600 ms), 200 x40 (sent 1610-2400 ms)", times after `since`. */
function runs (answers: Answer[], since: number): string {
  const out: Array<{ status: number, count: number, first: number, last: number }> = []
  for (const answer of answers) {
    const at = answer.startedAt - since
    const run = out.at(-1)
    if (run?.status === answer.status) Object.assign(run, { count: run.count + 1, last: at })
    else out.push({ status: answer.status, count: 1, first: at, last: at })
  }
  return out.map((run) => `${run.status} x${run.count} (sent ${run.first}-${run.last} ms)`).join(', ')
}

const cookieValue = (header: string) => /gw_session=([^;]+)/.exec(header)![1]!

describe('a Sentinel master frozen with SIGSTOP, then woken', () => {
  it('is left at +switch-master: 503 only until then, and every session survives its demotion', async () => {
    const before = await stack.signIn('alice')
    await replicated(set.master.port, set.replica.port)

    const load = hammer(`${stack.gateway.url}/app/x`, before, 2)
    await answersAfter(load, 0, 5, (answer) => answer.status === 200, 'of 200 before the freeze')
    const frozenAt = Date.now()
    set.master.freeze()
    const switched = async () => announced.some((a) => a.channel === '+switch-master')
    // Sentinel's own timings bound this wait: down-after 500 ms, then its failover (timeout 2 s).
    await waitFor(switched, 10_000, 'the sentinel to promote the replica')
    const switchedAt = announced.find((a) => a.channel === '+switch-master')!.at
    expect(announced.find((a) => a.channel === '+switch-master')!.message).toContain(` ${set.replica.port}`)
    // Requests sent after the gateway's bound: the old code kept the frozen master (503 until it woke).
    const sentAfterBound = (answers: Answer[]) => answers.filter((answer) => answer.startedAt >= switchedAt + AFTER_SWITCH_MS)
    await waitFor(async () => sentAfterBound(load.answers).length >= 10, AFTER_SWITCH_MS + 5000, '10 answers to requests sent after the bound')
    // The rest waits on Sentinel (its demotion comes one to two seconds after the wake, with the
    // periods test/helpers/redis-sentinel.ts sets): no load meanwhile.
    const answers = await load.stop()
    const late = sentAfterBound(answers).filter((answer) => answer.status !== 200).map((answer) => `${answer.status} to a request sent ${answer.startedAt - switchedAt} ms after +switch-master`)
    expect(late, `answers since +switch-master: ${runs(answers.filter((answer) => answer.startedAt >= switchedAt), switchedAt)}`).toEqual([])

    const during = await stack.signIn('bob')

    set.master.thaw()
    // Awake, the old master still calls itself master and takes writes until the sentinel demotes it.
    const woken = await stack.signIn('carol')
    await waitFor(async () => announced.some((a) => a.channel === '+convert-to-slave'), 20_000, 'the sentinel to demote the old master')
    await waitFor(async () => {
      const info = await replication(set.master.port)
      return /role:slave/.test(info) && /master_link_status:up/.test(info) && /master_sync_in_progress:0/.test(info)
    }, 10_000, 'the old master to resync from the promoted replica')

    for (const cookie of [before, during, woken]) expect(await sessionStatus(stack.gateway, cookieValue(cookie))).toBe(200)
    expect((await sessionKeys(set.master.port)).length).toBe(3)

    expect(new Set(answers.map((answer) => answer.status))).toEqual(new Set([200, 503]))
    expect(answers.some((answer) => answer.location !== null)).toBe(false)
    const failed = answers.filter((answer) => answer.status === 503)
    expect(failed.every((answer) => answer.startedAt + answer.ms >= frozenAt)).toBe(true)
    expect(stack.gateway.logs.map((line) => JSON.parse(line) as { level: number, msg: string }).filter((line) => line.level >= 50)).toEqual([])
  }, 60_000)
})
