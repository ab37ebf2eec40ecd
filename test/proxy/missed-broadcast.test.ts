// An instance whose subscription to the sessions' broadcasts was lost for a while (its subscriber
// connection dropped and came back later than another instance's, as after a Redis restart) while
// a person signed out on the other instance. An outside tester's finding: its session cache was
// guarded (emptied when the subscription went), but a browser's event stream it held went on until
// session.maxAge, since only the `session-ended` broadcast it never got would have cut it. Heard
// again, it now looks for each held session in the store and cuts the streams of those gone.
import { createServer, connect, type Server, type Socket } from 'node:net'
import type { AddressInfo } from 'node:net'
import { Redis } from 'ioredis'
import { afterAll, describe, expect } from 'vitest'
import { signIn } from '../helpers/browser.js'
import { oidcClient, sessionStatus, startGateway, type TestGateway } from '../helpers/gateway.js'
import { waitFor } from '../helpers/net.js'
import { test as it } from '../helpers/stack.js'
import { ONE_ANSWER_MS } from '../helpers/bounds.js'

const ENDINGS = 'gw:session-ended'

/** A TCP proxy to Redis that, while `refusing`, drops every new connection (those made stay). */
async function refusingProxy (redisUrl: string): Promise<{ url: string, refusing: boolean, close: () => Promise<void> }> {
  const target = new URL(redisUrl)
  const sockets = new Set<Socket>()
  const state = { refusing: false }
  const server: Server = createServer((client) => {
    if (state.refusing) { client.destroy(); return }
    const upstream = connect(Number(target.port), target.hostname)
    sockets.add(client).add(upstream)
    client.pipe(upstream)
    upstream.pipe(client)
    const end = () => { client.destroy(); upstream.destroy() }
    client.on('error', end).on('close', end)
    upstream.on('error', end).on('close', end)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = new URL(redisUrl)
  url.hostname = '127.0.0.1'
  url.port = String((server.address() as AddressInfo).port)
  return {
    url: url.toString(),
    get refusing () { return state.refusing },
    set refusing (value: boolean) { state.refusing = value },
    close: async () => { for (const s of sockets) s.destroy(); await new Promise<void>((resolve) => server.close(() => resolve())) },
  }
}

let a: TestGateway
let b: TestGateway
let admin: Redis
let proxy: Awaited<ReturnType<typeof refusingProxy>>

async function subscribers (): Promise<number> {
  const [, n] = await admin.pubsub('NUMSUB', ENDINGS) as [string, number]
  return n
}

it.beforeAll(async ({ startStack, op, upstream, redis }) => {
  admin = new Redis(redis.url)
  proxy = await refusingProxy(redis.url)
  const raw = {
    session: { cacheTtl: '10s' },
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }],
  }
  a = await startStack(raw)
  b = await startGateway({ ...raw, store: { type: 'redis', url: proxy.url, timeout: '250ms' }, providers: { demo: oidcClient(op.issuer, 'c', 's') } })
})

afterAll(async () => {
  admin?.disconnect()
  await b?.close()
  await proxy?.close()
})

/** Opens an event stream on B with `cookie`; `cut()` says whether it has been cut since. */
async function streamOnB (cookie: string): Promise<() => boolean> {
  const response = await fetch(`${b.url}/app/events`, { headers: { cookie, accept: 'text/event-stream' } })
  expect(response.status).toBe(200)
  const reader = response.body!.getReader()
  expect(new TextDecoder().decode((await reader.read()).value)).toBe('data: first\n\n')
  let cut = false
  void (async () => { try { while (!(await reader.read()).done); } catch { } cut = true })()
  return () => cut
}

describe('control: an instance that heard the broadcast', () => {
  it('cuts the ended session\'s event stream within a second', async ({ upstream }) => {
    await waitFor(async () => await subscribers() === 2, 5000, 'both instances subscribed')
    const { cookie } = await signIn(`${a.url}/oauth/login/demo/?next=/oauth/`, 'heard-broadcast')
    const cut = await streamOnB(cookie)
    const out = await fetch(`${a.url}/oauth/logout/`, { method: 'POST', redirect: 'manual', headers: { accept: 'application/json', cookie } })
    await out.arrayBuffer()
    await waitFor(async () => cut(), ONE_ANSWER_MS, 'B to cut the stream').finally(() => upstream.release())
  })
})

describe('an instance that missed a sign-out broadcast', () => {
  it('still cuts the ended session\'s event stream within a second of hearing broadcasts again', async ({ upstream }) => {
    await waitFor(async () => await subscribers() === 2, 5000, 'both instances subscribed')
    const { cookie } = await signIn(`${a.url}/oauth/login/demo/?next=/oauth/`, 'missed-broadcast')
    // The person's page, served by B, holds an event stream.
    const cut = await streamOnB(cookie)

    // B's subscriber connection drops and cannot come back for a moment; A's comes back at once.
    proxy.refusing = true
    await admin.client('KILL', 'TYPE', 'pubsub')
    await waitFor(async () => await subscribers() === 1, 5000, 'A subscribed again, B not')

    // The person signs out on A.
    const out = await fetch(`${a.url}/oauth/logout/`, { method: 'POST', redirect: 'manual', headers: { accept: 'application/json', cookie } })
    await out.arrayBuffer()
    expect(out.status).toBeLessThan(400)

    // B hears broadcasts again.
    proxy.refusing = false
    await waitFor(async () => await subscribers() === 2, 5000, 'B subscribed again')
    // B's cache is guarded: the session is no longer served there.
    expect(await sessionStatus(b, cookie.replace(/^gw_session=/, ''))).toBe(401)
    // And the ended session's stream on B is cut within the second (SPEC: streams end with their session on every instance).
    await waitFor(async () => cut(), ONE_ANSWER_MS, 'B to cut the ended session\'s event stream').finally(() => upstream.release())
  })
})
