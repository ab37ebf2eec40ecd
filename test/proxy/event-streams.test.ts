// A browser's event stream (an upstream's `text/event-stream` answer to a request a session let
// through) ends with that session, as its websockets do (proxy/session-streams.ts): sign-out and
// sign out everywhere cut it before their answer comes back, the session's maxAge and the route's
// reauth.maxAge when the injected clock reaches them. An outside tester's finding: a page's SSE
// went on streaming a person's data after they signed out everywhere. Another person's stream goes
// on. A re-reading's findings: a type list EventSource reads as a stream (`text/html,
// text/event-stream`) was not held; a response whose client left,
// or whose session's ending was heard, while its session was read from the store was held for good.
// The gateway's clock and timers are the test's; the upstream holds each stream open until
// release(), so a stream that was not cut reads its last event instead of failing.
import { createServer, request as httpRequest, type ServerResponse } from 'node:http'
import { describe, expect } from 'vitest'
import { isEventStream } from '../../src/proxy/forward.js'
import { SessionStreams } from '../../src/proxy/session-streams.js'
import type { Session } from '../../src/session/record.js'
import { signIn } from '../helpers/browser.js'
import type { TestGateway } from '../helpers/gateway.js'
import { ManualTimers } from '../helpers/manual-timers.js'
import { test as it } from '../helpers/stack.js'

const MINUTE = 60_000
const MAX_AGE_MS = 20 * MINUTE
let gateway: TestGateway
const timers = new ManualTimers()
timers.time = Date.now()

it.beforeAll(async ({ startStack, upstream }) => {
  gateway = await startStack({
    session: { maxAge: '20m' },
    routes: [
      { path: '/app/', upstream: upstream.url, provider: 'demo' },
      { path: '/admin/', upstream: upstream.url, provider: 'demo', reauth: { maxAge: '5m' } },
    ],
  }, { deps: { clock: timers, timers } })
})

/** Opens `path` with `cookie` and reads its first event; `next` settles with what came after: the last event, or `cut`. */
async function open (path: string, cookie: string): Promise<{ next: Promise<string> }> {
  const response = await fetch(`${gateway.url}${path}`, { headers: { cookie, accept: 'text/event-stream' } })
  expect(response.status).toBe(200)
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  expect(decoder.decode((await reader.read()).value)).toBe('data: first\n\n')
  const rest = async (): Promise<string> => {
    let text = ''
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) text += decoder.decode(chunk.value)
    return text
  }
  return { next: rest().catch(() => 'cut') }
}

async function signOut (cookie: string, everywhere = false): Promise<void> {
  const response = await fetch(`${gateway.url}/oauth/logout/${everywhere ? '?everywhere=1' : ''}`, { method: 'POST', redirect: 'manual', headers: { accept: 'application/json', cookie } })
  await response.arrayBuffer()
  expect(response.status).toBeLessThan(400)
}

describe('a browser\'s event stream', () => {
  it('is cut by its sign-out, whatever the case and parameters of its type', async ({ upstream }) => {
    const { cookie } = await signIn(`${gateway.url}/oauth/login/demo/?next=/oauth/`, 'sse-leaver')
    const stream = await open(`/app/events?type=${encodeURIComponent('Text/Event-Stream; charset=utf-8')}`, cookie)
    await signOut(cookie)
    upstream.release()
    expect(await stream.next).toBe('cut')
  })

  it('is cut by sign out everywhere from another browser; another person\'s goes on', async ({ upstream }) => {
    const mine = await signIn(`${gateway.url}/oauth/login/demo/?next=/oauth/`, 'sse-alice')
    const elsewhere = await signIn(`${gateway.url}/oauth/login/demo/?next=/oauth/`, 'sse-alice')
    const someoneElse = await signIn(`${gateway.url}/oauth/login/demo/?next=/oauth/`, 'sse-bob')
    const stream = await open('/app/events', mine.cookie)
    const other = await open('/app/events', someoneElse.cookie)
    await signOut(elsewhere.cookie, true)
    upstream.release()
    expect(await stream.next).toBe('cut')
    expect(await other.next).toBe('data: last\n\n')
  })

  it('is cut once the sign-in it was let through under is older than the route\'s reauth.maxAge', async ({ upstream }) => {
    const { cookie } = await signIn(`${gateway.url}/oauth/login/demo/?next=/admin/`, 'sse-stepper')
    const stream = await open('/admin/events', cookie)
    // The stream's one timer: the sign-in's auth_time, a minute of skew and 5 minutes on.
    expect(timers.live()).toHaveLength(1)
    const deadline = timers.live()[0]!
    expect(deadline - timers.time).toBeGreaterThan(5 * MINUTE)
    expect(deadline - timers.time).toBeLessThan(MAX_AGE_MS)
    let cut = false
    void stream.next.then((what) => { cut = what === 'cut' })
    timers.advance(deadline - 1000)
    await new Promise((resolve) => setImmediate(resolve))
    expect(cut).toBe(false)
    timers.advance(deadline)
    expect(await stream.next).toBe('cut')
    upstream.release()
  })

  it('is cut at its session\'s maxAge, and not before', async ({ upstream }) => {
    const start = timers.time
    const { cookie } = await signIn(`${gateway.url}/oauth/login/demo/?next=/oauth/`, 'sse-lasting')
    const stream = await open('/app/events', cookie)
    expect(timers.live()).toEqual([start + MAX_AGE_MS])
    let cut = false
    void stream.next.then((what) => { cut = what === 'cut' })
    timers.advance(start + MAX_AGE_MS - 1000)
    await new Promise((resolve) => setImmediate(resolve))
    expect(cut).toBe(false)
    timers.advance(start + MAX_AGE_MS)
    expect(await stream.next).toBe('cut')
    upstream.release()
  })
})

describe('a browser\'s event stream of another spelling', () => {
  // Each type: Chromium's EventSource reads it as a stream (Fetch takes a list's last type, */* passed over).
  it.for(['text/html, text/event-stream', 'text/event-stream,', 'text/event-stream, */*'])('%j is cut by sign out everywhere', async (type, { upstream }) => {
    const mine = await signIn(`${gateway.url}/oauth/login/demo/?next=/oauth/`, 'sse-list-type')
    const stolen = await signIn(`${gateway.url}/oauth/login/demo/?next=/oauth/`, 'sse-list-type')
    const stream = await open(`/app/events?type=${encodeURIComponent(type)}`, stolen.cookie)
    await signOut(mine.cookie, true)
    upstream.release()
    expect(await stream.next).toBe('cut')
  })
})

/** A SessionStreams whose store read the test settles itself, holding a real response. */
async function storePath (): Promise<{ streams: SessionStreams, settle: (session: Session | null) => void, ended: (id: string) => void, response: ServerResponse, closeClient: () => Promise<void>, stop: () => Promise<void> }> {
  let settle!: (session: Session | null) => void
  let endListener!: (id: string) => void
  const sessions = {
    onEnded: (listener: (id: string) => void) => { endListener = listener },
    cached: () => undefined,
    load: async () => await new Promise<Session | null>((resolve) => { settle = resolve }),
  }
  const log = { info: () => {}, warn: () => {} }
  // Only the parts SessionStreams calls; the casts say so.
  const streams = new SessionStreams(sessions as never, log as never, timers, timers)
  let response!: ServerResponse
  let gotIt!: () => void
  const got = new Promise<void>((resolve) => { gotIt = resolve })
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    res.write('data: first\n\n')
    response = res
    gotIt()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const client = httpRequest({ host: '127.0.0.1', port: (server.address() as { port: number }).port, path: '/events' })
  client.on('error', () => {})
  client.on('response', (res) => res.resume())
  client.end()
  await got
  const closeClient = async (): Promise<void> => {
    const closed = new Promise<void>((resolve) => response.once('close', resolve))
    client.destroy()
    await closed
  }
  const stop = async (): Promise<void> => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  }
  return { streams, settle: (session) => settle(session), ended: (id) => endListener(id), response, closeClient, stop }
}

const storedSession = (id: string): Session => ({ id, cookie: 'c', record: { createdAt: timers.time } } as unknown as Session)

describe('a browser\'s stream whose session is read from the store', () => {
  it('leaves the registry when its client went away during the read', async () => {
    const path = await storePath()
    try {
      path.streams.holdBrowser('gw_session=x', path.response, () => timers.time + 3_600_000)
      await path.closeClient()
      path.settle(storedSession('leaked-session'))
      await new Promise((resolve) => setImmediate(resolve))
      expect(path.streams.size).toBe(0)
    } finally {
      await path.stop()
    }
  })

  it('is cut when its session\'s ending was heard during the read', async () => {
    const path = await storePath()
    try {
      path.streams.holdBrowser('gw_session=x', path.response, () => timers.time + 3_600_000)
      path.ended('raced-session')
      path.settle(storedSession('raced-session'))
      await new Promise((resolve) => setImmediate(resolve))
      expect(path.response.destroyed).toBe(true)
    } finally {
      await path.stop()
    }
  })
})

describe('isEventStream', () => {
  // What a browser's EventSource takes as a stream: the essence text/event-stream, in any case, with any parameters.
  const rows: Array<[string | string[] | undefined, boolean]> = [
    ['text/event-stream', true],
    ['TEXT/EVENT-STREAM', true],
    ['text/event-stream;charset=utf-8', true],
    ['text/event-stream ; charset=utf-8', true],
    ['text/event-stream\t;x=y', true],
    ['text/html, text/event-stream', true],
    ['text/event-stream,', true],
    ['text/event-stream, */*', true],
    ['text/event-stream, not a type', true],
    // A re-reading's findings: a comma inside a quoted parameter splits nothing; two lines come as a list.
    ['text/event-stream; x="a,text/html;"', true],
    ['text/html; x="a,text/event-stream"', false],
    [['text/plain', 'text/event-stream'], true],
    [['text/event-stream', 'text/plain; charset=utf-8'], false],
    [undefined, false],
    ['', false],
    ['text/event', false],
    ['text/event-streams', false],
    ['text/event-stream-x', false],
    ['text/event-stream,text/html', false],
    ['text/plain; x=text/event-stream', false],
    ['application/json', false],
  ]
  it.each(rows)('%j: %s', (type, expected) => {
    expect(isEventStream(type)).toBe(expected)
  })
})
