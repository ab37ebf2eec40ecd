// A sign-in the gateway acknowledged survives a failover (reliability round 3). A Sentinel master
// whose replica cannot acknowledge (the replica frozen with SIGSTOP: its replication link stays
// open, nothing is applied or acknowledged), as a master cut off from its replicas looks to the
// gateway: the sign-in's callback waits store.timeout for WAIT 1 and is answered 503
// session_store_unavailable, with no session cookie, on a page whose button starts the sign-in
// again; the cause is logged once. Once the replica is back that button signs in, and the session
// it gives survives a failover the sentinel is told to make (SENTINEL FAILOVER): the record was on
// the replica before the browser got its cookie. The same for an ending (a session deleted, a
// logout's mark): a sign-out, sign out everywhere and a back-channel logout are 503 until a replica
// has it, so a failover cannot bring back a session its person or provider was told had ended.
import type { FastifyBaseLogger } from 'fastify'
import { Redis } from 'ioredis'
import pino from 'pino'
import { stringify } from 'yaml'
import { parseConfig } from '../../src/config/config.js'
import { loggerOptions } from '../../src/ops/logger.js'
import { RedisStore } from '../../src/store/redis.js'
import { storeKeys, unacknowledgedByReplica } from '../../src/store/store.js'
import { emptyRecord, withSignIn, withTokens } from '../../src/session/record.js'
import { Sealer } from '../../src/session/seal.js'
import { Sessions } from '../../src/session/session.js'
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { logCollector, sessionStatus } from '../helpers/gateway.js'
import { logoutToken } from '../helpers/oidc.js'
import { startFaultStack, type FaultStack } from '../helpers/fault-stack.js'
import { waitFor } from '../helpers/net.js'
import { startSentinelSet, type TestSentinelSet } from '../helpers/redis-sentinel.js'

/**
 * store.timeout: one store command, and WAIT's own timeout. Above the default: the sign-ins after
 * the thaw need the replica's answer within it, and a machine busy with the rest of the suite can
 * starve the replica of the CPU for longer than 500 ms.
 */
const TIMEOUT_MS = 1000

let set: TestSentinelSet
let stack: FaultStack
let watcher: Redis
const announced: string[] = []

beforeAll(async () => {
  set = await startSentinelSet({ downAfterMs: 5000, failoverTimeoutMs: 2000 })
  watcher = set.client(set.sentinel.port, { retryStrategy: () => 100 })
  watcher.on('message', (channel: string) => announced.push(channel))
  await watcher.subscribe('+switch-master')
  stack = await startFaultStack({
    store: { type: 'redis', sentinel: { name: 'mymaster', nodes: set.nodes }, timeout: `${TIMEOUT_MS}ms` },
    session: { cacheTtl: '0s' },
    logout: true,
  })
})
afterAll(async () => {
  set?.replica.thaw()
  watcher?.disconnect()
  await stack?.close()
  await set?.stop()
})

const replication = (port: number) => set.ask(port, (redis) => redis.info('replication'))
const sessionCookie = (browser: Browser) => browser.cookies.get('gw_session')?.value
const logLines = () => stack.gateway.logs.map((line) => JSON.parse(line) as { level: number, msg: string, reason?: string })

const post = async (path: string, cookie: string, body: string): Promise<Response> => await fetch(`${stack.gateway.url}${path}`, {
  method: 'POST', redirect: 'manual', headers: { cookie, accept: 'application/json', 'content-type': 'application/x-www-form-urlencoded', origin: stack.gateway.url }, body,
})
async function status (cookie: string): Promise<number> {
  const response = await fetch(`${stack.gateway.url}/app/x`, { headers: { cookie, accept: 'application/json' } })
  await response.arrayBuffer()
  return response.status
}
const unacknowledged = 'no replica of the session store acknowledged'
const SECRET = 'sentinel-replica-ack-secret-0123456789-abc'
const SESSION = { cookieName: 'gw_session', secret: SECRET, ttlMs: 60_000, cookieSecure: true, cacheTtlMs: 0, maxAgeMs: 86_400_000, previousSecrets: [] }
const RECORD = withSignIn(emptyRecord(Date.now()), 'demo', { tokens: { access_token: 'at-1' }, identity: { sub: 'alice', groups: [] } })

describe('an ending', () => {
  it('is marked unsettled with its delete, in one transaction: whatever fails before its wait, a retry finishes it', async () => {
    const config = parseConfig(stringify({ store: { type: 'redis', sentinel: { name: 'mymaster', nodes: set.nodes }, timeout: `${TIMEOUT_MS}ms` } }), {}, 'test.yaml').store
    const store = new RedisStore(config, pino(loggerOptions('info'), logCollector().stream) as unknown as FastifyBaseLogger)
    try {
      expect(await store.ready(10_000)).toBe(true)
      await store.set('session:x', 'record', 60_000)
      await store.end('session:x')
      expect(await store.get('session:x')).toBeNull()
      // What a retry finds when the broadcast, the wait's connection or the instance failed here
      // (an attacker's finding: only the wait wrote the mark, and such a retry answered done).
      expect(await store.unsettled('session:x')).toBe(true)
      await store.settled('session:x')
      expect(await store.unsettled('session:x')).toBe(false)
      // A key already gone writes no mark (an attacker's finding: every sign-in's stale cookie was
      // marked, and each then waited for a replica).
      expect(await store.end('session:none')).toBe(false)
      expect(await store.unsettled('session:none')).toBe(false)
      // Where the wait is sent, the key is deleted again: after a Sentinel switch between the
      // delete (the store's connection, on the old master) and the wait (its own, on the new one),
      // the new master may still hold what the old one deleted (an attacker's reading): settled
      // answered done over it before.
      await store.set('session:y', 'record', 60_000)
      await store.end('session:y')
      await set.ask(set.master.port, (redis) => redis.set('gw:session:y', 'the promoted copy', 'PX', 60_000))
      await store.settled('session:y')
      expect(await set.ask(set.master.port, (redis) => redis.exists('gw:session:y'))).toBe(0)
      expect(await set.ask(set.replica.port, (redis) => redis.exists('gw:session:y'))).toBe(0)
    } finally {
      await store.close()
    }
  })

  it('of the session a sign-in in the same browser renames waits for a replica without failing the sign-in; a sign-out with the old cookie finishes it', async () => {
    const config = parseConfig(stringify({ store: { type: 'redis', sentinel: { name: 'mymaster', nodes: set.nodes }, timeout: `${TIMEOUT_MS}ms` } }), {}, 'test.yaml').store
    const store = new RedisStore(config, pino({ level: 'silent' }))
    const sessions = new Sessions(store, new Sealer(SECRET), SESSION)
    try {
      expect(await store.ready(10_000)).toBe(true)
      const old = await sessions.start(undefined, RECORD)
      const merged = withTokens(RECORD, 'github', { access_token: 'gh' })
      // The replica stops after it has the new record, before the old one's delete.
      const frozen = async () => { set.replica.freeze() }
      onTestFinished(() => { set.replica.thaw() })
      // The new record is on the replica: the sign-in stands, whatever becomes of the old one's
      // wait (an attacker's finding: a 503 there ended the new session, and a replica slower than
      // store.timeout signed the browser out).
      const started = await sessions.start(`gw_session=${old.cookie}`, merged, { indexed: frozen })
      expect(started.record).toEqual(merged)
      expect((await sessions.load(`gw_session=${started.cookie}`))?.record.tokens).toEqual(merged.tokens)
      expect(await sessions.load(`gw_session=${old.cookie}`)).toBeNull()
      // Its ending is not on a replica yet: marked, so that a sign-out with the old cookie (another
      // tab's) waits for one, as every ending does (without the mark it answered done over a delete
      // a failover would undo).
      expect(await store.unsettled(storeKeys.session(old.id))).toBe(true)
      await expect(sessions.end(null, `gw_session=${old.cookie}`)).rejects.toSatisfy(unacknowledgedByReplica)
      set.replica.thaw()
      await waitFor(async () => /master_link_status:up/.test(await replication(set.replica.port)), 10_000, 'the replica to follow its master again')
      await sessions.end(null, `gw_session=${old.cookie}`)
      expect(await store.unsettled(storeKeys.session(old.id))).toBe(false)
      expect(await set.ask(set.replica.port, (redis) => redis.exists(`gw:session:${old.id}`))).toBe(0)
      // A sign-in that fails after its record was written deletes it, with no ending to wait for:
      // no cookie ever named it (an attacker's finding: ended, its mark listed it on the person's
      // sessions page for session.ttl).
      let newId = ''
      const refusing = async ({ id }: { id: string }) => { newId = id; set.replica.freeze(); throw new Error('the index refused') }
      await expect(sessions.start(undefined, RECORD, { indexed: refusing })).rejects.toThrow('the index refused')
      expect(await store.getBytes(storeKeys.session(newId))).toBeNull()
      expect(await store.unsettled(storeKeys.session(newId))).toBe(false)
      set.replica.thaw()
      await waitFor(async () => /master_link_status:up/.test(await replication(set.replica.port)), 10_000, 'the replica to follow its master again')
    } finally {
      await store.close()
    }
  }, 30_000)
})

describe('a Sentinel master whose replica cannot acknowledge', () => {
  // First: the sign-in's test below counts the cause's line from its own freeze.
  it('answers a sign-out, sign out everywhere, a revoke and a back-channel logout 503 until a replica has the ending, tried again too', async () => {
    const signedOut = await stack.signIn('bob')
    const everywhere = [await stack.signIn('carol'), await stack.signIn('carol')]
    const revoking = await stack.signIn('erin')
    const revoked = await stack.signIn('erin')
    const loggedOut = await stack.signIn('dave')
    const token = await logoutToken(stack.op, 'c', 'dave')
    const listed = async () => {
      const sessions = await fetch(`${stack.gateway.url}/oauth/sessions/`, { headers: { cookie: revoking, accept: 'application/json' } })
      return (await sessions.json() as { sessions: Array<{ id: string, current: boolean }> }).sessions.filter((each) => !each.current).map((each) => each.id)
    }
    const [target] = await listed()
    // Anyone's made-up cookie, under the secret's id any cookie shows.
    const madeUp = `gw_session=${'A'.repeat(43)}.${signedOut.split('.').at(-1)!}`
    const steps = [
      () => post('/oauth/logout/', signedOut, ''),
      () => post('/oauth/logout/', everywhere[0]!, 'everywhere=1'),
      () => post(`/oauth/sessions/${target}/revoke`, revoking, ''),
      () => post('/oauth/backchannel-logout/demo/', '', `logout_token=${token}`),
    ]
    const ended: string[] = []
    const listener = set.client(set.master.port)
    listener.on('message', (_channel: string, id: string) => ended.push(id))
    await listener.subscribe('gw:session-ended')
    set.replica.freeze()
    onTestFinished(() => { set.replica.thaw() })
    for (const step of steps) expect((await step()).status).toBe(503)
    // A delete that reached the master is told to every instance at once, and what hangs off the
    // session ends (an attacker's finding: nothing was told, and a websocket outlived a sign-out):
    // bob's and erin's revoked. Sign out everywhere and the logout first write their mark, which
    // a replica must have before any session ends.
    await waitFor(async () => ended.length === 2, 5000, 'bob\'s and erin\'s revoked sessions to be told ended')
    listener.disconnect()
    // Still listed, its ending not on a replica (an attacker's finding: unlisted, and no retry could end it).
    expect(await listed()).toEqual([target])
    // A made-up cookie's sign-out waits for no replica, and writes nothing (an attacker's finding:
    // each wrote a key and waited, and a flood of them held up every sign-in).
    expect((await post('/oauth/logout/', madeUp, '')).status).toBe(302)
    // Tried again while no replica acknowledges: each ending's delete is on the master alone, and
    // a failover would bring it back (an attacker's finding: the retries found nothing left to end
    // and answered done, or 404 for the revoke).
    for (const step of steps) expect((await step()).status).toBe(503)
    set.replica.thaw()
    await waitFor(async () => /master_link_status:up/.test(await replication(set.replica.port)), 10_000, 'the replica to follow its master again')
    // Tried again (the provider sends its token again: its jti was given back), each is done.
    for (const step of steps) expect((await step()).status).toBeLessThan(400)
    expect(await Promise.all([signedOut, ...everywhere, revoked, loggedOut].map(status))).toEqual([401, 401, 401, 401, 401])
    expect(await listed()).toEqual([])
    await waitFor(async () => logLines().some((line) => line.msg.startsWith('a replica of the session store acknowledges writes again')), 5000, 'the end of the outage to be logged')
  }, 60_000)

  it('answers the sign-in 503 without a cookie, and a sign-in once the replica is back survives a failover', async () => {
    const from = logLines().length
    const sessionKeys = async () => await set.ask(set.replica.port, (redis) => redis.keys('gw:session:*'))
    const before = (await sessionKeys()).length
    set.replica.freeze()
    const browser = new Browser()
    const refused = await browser.navigate(`${stack.gateway.url}/app/x`, { login: 'alice' })
    const page = await refused.text()
    expect(refused.status).toBe(503)
    expect(sessionCookie(browser)).toBeUndefined()
    expect(page).toContain('session_store_unavailable')
    // The page's button starts the sign-in over, toward where it was going.
    const again = /<a class="button" href="([^"]+)">Try again<\/a>/.exec(page)?.[1]?.replaceAll('&#38;', '&')
    expect(again).toBe(`${stack.gateway.url}/oauth/login/demo/?next=${encodeURIComponent('/app/x')}`)
    // Logged once, naming the cause (after the outage log's hysteresis).
    const lines = () => logLines().slice(from).filter((line) => line.msg.startsWith(unacknowledged))
    await waitFor(async () => lines().length > 0, 5000, 'the cause to be logged')
    expect(lines()).toHaveLength(1)
    expect(lines()[0]!.reason).toMatch(/within 1000 ms/)

    set.replica.thaw()
    await waitFor(async () => /master_link_status:up/.test(await replication(set.replica.port)), 10_000, 'the replica to follow its master again')
    const signedIn = await browser.navigate(again!, { login: 'alice' })
    expect(signedIn.status).toBe(200)
    const cookie = sessionCookie(browser)!
    expect(cookie).toBeDefined()
    expect(await sessionKeys()).toHaveLength(before + 1)

    await set.ask(set.sentinel.port, (redis) => redis.call('SENTINEL', 'FAILOVER', 'mymaster'))
    await waitFor(async () => announced.includes('+switch-master'), 10_000, 'the sentinel to promote the replica')
    await waitFor(async () => /role:master/.test(await replication(set.replica.port)), 10_000, 'the replica to be master')
    await waitFor(async () => await sessionStatus(stack.gateway, cookie) !== 503, 10_000, 'the gateway to reach the promoted replica')
    expect(await sessionStatus(stack.gateway, cookie)).toBe(200)
    expect(logLines().filter((line) => line.level >= 50)).toEqual([])
  }, 60_000)
})
