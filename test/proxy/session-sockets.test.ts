// The registry of sessions' open websockets (src/proxy/session-sockets.ts) on its own, with stand-in
// sockets and sessions and the test's timers: one timer per session however many sockets; an ending
// heard before a socket is kept still closes it (the check when a session's first socket is kept);
// a store that cannot be read keeps the sockets open and asks again; only the sockets of the
// provider whose token is refused close; what is handed over for an upgrade the registry did not
// admit (a machine client's, a public route's) is never kept.
import { EventEmitter } from 'node:events'
import type { WebSocket } from 'ws'
import { describe, expect, it } from 'vitest'
import { GatewayError } from '../../src/errors.js'
import { SESSION_ENDED_CODE, SessionSockets } from '../../src/proxy/session-sockets.js'
import type { Session, TokenSet } from '../../src/session/session.js'
import { ManualTimers } from '../helpers/manual-timers.js'

const MINUTE = 60_000
const silent = { fatal () {}, error () {}, warn () {}, info () {}, debug () {}, trace () {}, level: 'silent' }

/** A leg as the registry sees one: open until closed, then 'close' a moment later (as ws does after the handshake). */
class Leg extends EventEmitter {
  readyState = 1
  closedWith: number | undefined
  close (code: number): void {
    this.readyState = 2
    this.closedWith = code
    setImmediate(() => {
      this.readyState = 3
      this.emit('close', code)
    })
  }

  resume (): void {}
  terminate (): void {}

  get ws (): WebSocket { return this as unknown as WebSocket }
}

/** A store of sessions by id, as peek reads it (null: gone), and the ending listener the registry gave. */
function setUp (options: { tokens?: (provider: string) => TokenSet | undefined, maxAgeMs?: number } = {}) {
  const timers = new ManualTimers()
  timers.time = 1_000_000_000
  const stored = new Map<string, { idleMs: number } | 'unreachable'>()
  const ended: Array<(id: string) => void> = []
  const missed: Array<() => void> = []
  const capped: Array<[string, number]> = []
  const sessions = {
    cached: (cookie: string | undefined) => cookie === undefined ? undefined : sessionOf(cookie),
    load: async () => null,
    peek: async (session: Session) => {
      const entry = stored.get(session.id)
      if (entry === 'unreachable') throw new GatewayError('session_store_unavailable', 'The session store is unreachable.')
      return entry === undefined ? null : { record: session.record, idleMs: entry.idleMs }
    },
    capIdle: async (session: Session, idleMs: number) => { capped.push([session.id, idleMs]) },
    onEnded: (listener: (id: string) => void, gap?: () => void) => {
      ended.push(listener)
      if (gap !== undefined) missed.push(gap)
    },
    exists: async (id: string) => {
      if (stored.get(id) === 'unreachable') throw new GatewayError('session_store_unavailable', 'The session store is unreachable.')
      return stored.has(id)
    },
  }
  const sessionOf = (id: string): Session => ({ id, cookie: id, record: { createdAt: timers.time, tokens: { a: { access_token: 'a' }, b: { access_token: 'b' } } } })
  const registry = new SessionSockets({
    sessions,
    usableToken: async (session, provider) => options.tokens === undefined ? session.record.tokens[provider] : options.tokens(provider),
    maxAgeMs: options.maxAgeMs ?? 60 * MINUTE,
    clock: timers,
    timers,
    log: silent,
  })
  /** Admits an upgrade of session `id` on a route of `provider` and opens both legs. */
  const connect = (id: string, provider = 'a'): { source: Leg, target: Leg } => {
    const request = {}
    stored.set(id, stored.get(id) ?? { idleMs: 10 * MINUTE })
    expect(registry.admit(request, id, provider)).toBeUndefined()
    const source = new Leg()
    const target = new Leg()
    registry.handing(request)
    registry.opening(target.ws)
    registry.connected(source.ws, target.ws)
    return { source, target }
  }
  return { timers, stored, registry, connect, capped, end: (id: string) => { for (const listener of ended) listener(id) }, gap: () => { for (const lookAgain of missed) lookAgain() } }
}

/** Lets the registry's checks (promises) run. */
const settle = () => new Promise((resolve) => setImmediate(resolve))

describe('the registry of sessions\' websockets', () => {
  it('keeps one timer per session, at its idle deadline, whatever the number of its sockets; none once they close', async () => {
    const { timers, registry, connect } = setUp()
    const sockets = [connect('s1'), connect('s1'), connect('s1'), connect('s2')]
    await settle()
    expect(registry.size).toEqual({ sessions: 2, sockets: 4 })
    expect(timers.live()).toEqual([timers.time + 10 * MINUTE, timers.time + 10 * MINUTE])
    for (const { source } of sockets) source.close(1000)
    await settle()
    expect(registry.size).toEqual({ sessions: 0, sockets: 0 })
    expect(timers.live()).toEqual([])
  })

  it('an ending heard before the socket was kept still closes it: the first check finds the session gone', async () => {
    const { stored, registry, end } = setUp()
    stored.set('s1', { idleMs: MINUTE })
    const request = {}
    expect(registry.admit(request, 's1', 'a')).toBeUndefined()
    const source = new Leg()
    const target = new Leg()
    registry.handing(request)
    registry.opening(target.ws)
    // Signed out between the upgrade's admission and the upstream's answer: nothing was kept yet.
    stored.delete('s1')
    end('s1')
    registry.connected(source.ws, target.ws)
    await settle()
    expect([source.closedWith, target.closedWith]).toEqual([SESSION_ENDED_CODE, SESSION_ENDED_CODE])
    await settle()
    expect(registry.size).toEqual({ sessions: 0, sockets: 0 })
  })

  // An outside tester's finding (for event streams; websockets waited for their next check, maxAge at worst).
  it('after a gap in the endings\' broadcast, the sockets of a session no longer in the store close; the others go on', async () => {
    const { stored, registry, connect, gap } = setUp()
    const gone = connect('s1')
    const kept = connect('s2')
    await settle()
    // Signed out on another instance while this one heard nothing.
    stored.delete('s1')
    gap()
    await settle()
    expect([gone.source.closedWith, kept.source.closedWith]).toEqual([SESSION_ENDED_CODE, undefined])
    await settle()
    expect(registry.size).toEqual({ sessions: 1, sockets: 1 })
  })

  // A re-reading's finding: a look the store did not answer (slow just after a restart) was never made again.
  it('after a gap, a look the store does not answer is made again 5 s later', async () => {
    const { timers, stored, connect, gap } = setUp()
    const { source } = connect('s1')
    await settle()
    stored.set('s1', 'unreachable')
    gap()
    await settle()
    expect(source.closedWith).toBeUndefined()
    expect(timers.live()).toContain(timers.time + 5000)
    stored.delete('s1')
    timers.advance(timers.time + 5000)
    await settle()
    expect(source.closedWith).toBe(SESSION_ENDED_CODE)
  })

  it('a store that cannot be read keeps the sockets open and is asked again 5 s later', async () => {
    const { timers, stored, registry, connect } = setUp()
    const { source } = connect('s1')
    await settle()
    stored.set('s1', 'unreachable')
    timers.advance(timers.live()[0]!)
    await settle()
    expect(source.closedWith).toBeUndefined()
    expect(timers.live()).toEqual([timers.time + 5000])
    stored.delete('s1')
    timers.advance(timers.time + 5000)
    await settle()
    expect(source.closedWith).toBe(SESSION_ENDED_CODE)
    await settle()
    expect(registry.size).toEqual({ sessions: 0, sockets: 0 })
  })

  it('only the sockets of the provider whose token is refused close; the others go on', async () => {
    let refuse = false
    const { timers, registry, connect } = setUp({ tokens: (provider) => refuse && provider === 'b' ? undefined : { access_token: provider, expires_at: (1_000_000_000 + MINUTE) / 1000 } })
    const onA = connect('s1', 'a')
    const onB = connect('s1', 'b')
    await settle()
    // The tokens' expiry comes before the idle deadline.
    expect(timers.live()).toEqual([1_000_000_000 + MINUTE])
    refuse = true
    timers.advance(timers.live()[0]!)
    await settle()
    expect(onB.source.closedWith).toBe(SESSION_ENDED_CODE)
    expect(onA.source.closedWith).toBeUndefined()
    await settle()
    expect(registry.size).toEqual({ sessions: 1, sockets: 1 })
    expect(timers.live()).toHaveLength(1)
  })

  it('a refresh made by a check puts the idle timeout back where the store had it', async () => {
    const { timers, capped, connect } = setUp({ tokens: () => ({ access_token: 'new', expires_at: (1_000_000_000 + 2 * MINUTE) / 1000 }) })
    connect('s1')
    await settle()
    expect(capped).toEqual([['s1', 10 * MINUTE]])
    expect(timers.live()).toEqual([1_000_000_000 + 2 * MINUTE])
  })

  it('a deadline already past is looked at again no sooner than a second later', async () => {
    const { timers, connect } = setUp({ tokens: () => ({ access_token: 'a', expires_at: 1 }) })
    connect('s1')
    await settle()
    expect(timers.live()).toEqual([timers.time + 1000])
  })

  it('a deadline further than Node\'s timers reach (24.8 days) is looked at in a day, then again', async () => {
    const { timers, stored, connect } = setUp({ maxAgeMs: 400 * 24 * 60 * MINUTE })
    stored.set('s1', { idleMs: 30 * 24 * 60 * MINUTE })
    const { source } = connect('s1')
    await settle()
    expect(timers.live()).toEqual([timers.time + 24 * 60 * MINUTE])
    timers.advance(timers.time + 24 * 60 * MINUTE)
    await settle()
    expect(source.closedWith).toBeUndefined()
    expect(timers.live()).toEqual([timers.time + 24 * 60 * MINUTE])
  })

  // Legs the registry did not admit: a machine client's (its token decides, no session), a public
  // route's, an upstream leg created for another upgrade, a client leg that closed before the upstream's opened.
  it.each([
    ['an upgrade never admitted (a machine client\'s token)', false, true],
    ['an upstream leg created without being handed an upgrade', 'unhanded', true],
    ['a client leg closed before the upstream\'s opened', true, false],
  ] as const)('keeps nothing for %s', async (_name, admitted, sourceOpen) => {
    const { registry } = setUp()
    const request = {}
    if (admitted === true) expect(registry.admit(request, 's1', 'a')).toBeUndefined()
    const source = new Leg()
    const target = new Leg()
    if (!sourceOpen) source.readyState = 3
    if (admitted !== 'unhanded') registry.handing(request)
    registry.opening(target.ws)
    registry.connected(source.ws, target.ws)
    await settle()
    expect(registry.size).toEqual({ sessions: 0, sockets: 0 })
  })

  it('refuses the upgrade (401) when the session is neither cached nor in the store any more', async () => {
    const { registry } = setUp()
    const admitted = registry.admit({}, undefined, 'a')
    await expect(admitted).rejects.toMatchObject({ code: 'unauthenticated', statusCode: 401 })
  })
})
