// A browser's event stream (an upstream's `text/event-stream` answer to a request a session let
// through) ends with that session, as its websockets do (proxy/session-streams.ts): sign-out and
// sign out everywhere cut it before their answer comes back, the session's maxAge and the route's
// reauth.maxAge when the injected clock reaches them. An outside tester's finding: a page's SSE
// went on streaming a person's data after they signed out everywhere. Another person's stream goes
// on. The gateway's clock and timers are the test's; the upstream holds each stream open until
// release(), so a stream that was not cut reads its last event instead of failing.
import { describe, expect } from 'vitest'
import { isEventStream } from '../../src/proxy/forward.js'
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

describe('isEventStream', () => {
  // What a browser's EventSource takes as a stream: the essence text/event-stream, in any case, with any parameters.
  const rows: Array<[string | undefined, boolean]> = [
    ['text/event-stream', true],
    ['TEXT/EVENT-STREAM', true],
    ['text/event-stream;charset=utf-8', true],
    ['text/event-stream ; charset=utf-8', true],
    ['text/event-stream\t;x=y', true],
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
