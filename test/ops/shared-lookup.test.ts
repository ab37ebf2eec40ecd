// SharedLookups (src/ops/shared-lookup.ts) as pure logic: its clock and its lookup are the test's,
// so a lookup that never returns is one whose callback the test never calls, and the bound passes
// by moving the clock. test/faults/shared-lookup.test.ts runs the same rules through the gateway.
import type dns from 'node:dns'
import { describe, expect, it } from 'vitest'
import { SharedLookups } from '../../src/ops/shared-lookup.js'

type Answer = [NodeJS.ErrnoException | null, string | dns.LookupAddress[], number | undefined]
type Callback = (error: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void

/** A resolver whose lookups the test ends (or never ends), on a clock the test moves. */
function setUp () {
  const clock = { ms: 0, now: () => clock.ms }
  const held: Callback[] = []
  const lookups = new SharedLookups(clock, (_hostname, _options, callback) => { held.push(callback) })
  /** A connection asking for `name` with this connect timeout; what it was told, each time. */
  const ask = (timeoutMs: number, name = 'idp.example', options: dns.LookupOptions = { all: true }) => {
    const told: Answer[] = []
    lookups.for(timeoutMs)(name, options, (error, address, family) => { told.push([error, address, family]) })
    return told
  }
  return { clock, held, ask }
}

const ADDRESSES = [{ address: '192.0.2.1', family: 4 }]

describe('SharedLookups', () => {
  it('gives connections asking at once one lookup, and each its own copy of the addresses', () => {
    const { held, ask } = setUp()
    const first = ask(500)
    const second = ask(500)
    const otherName = ask(500, 'app.example')
    expect(held).toHaveLength(2)
    held[0]!(null, ADDRESSES)
    expect(first).toEqual([[null, ADDRESSES, undefined]])
    expect(second).toEqual(first)
    expect(first[0]![1]).not.toBe(second[0]![1])
    expect(otherName).toEqual([])
  })

  it('starts a fresh lookup once the longest caller\'s timeout has passed since a lookup that never returns began: one more per period, shared by that period\'s callers', () => {
    const { clock, held, ask } = setUp()
    ask(500)
    clock.ms = 499
    ask(500)
    expect(held).toHaveLength(1)

    clock.ms = 500
    ask(500)
    ask(500)
    expect(held).toHaveLength(2)

    // Ten more periods (1000 to 5999 ms), a connection every 100 ms: ten more lookups, not a hundred.
    for (let ms = 600; ms < 6000; ms += 100) {
      clock.ms = ms
      ask(500)
    }
    expect(held).toHaveLength(2 + 10)
  })

  it('answers the connections still waiting on a stale lookup with the fresh one\'s answer, and never twice when the stale one answers late', () => {
    const { clock, held, ask } = setUp()
    ask(500)
    clock.ms = 400
    const stillWaiting = ask(500)
    clock.ms = 500
    const fresh = ask(500)
    expect(held).toHaveLength(2)

    held[1]!(null, ADDRESSES)
    expect(fresh).toEqual([[null, ADDRESSES, undefined]])
    expect(stillWaiting).toEqual([[null, ADDRESSES, undefined]])

    // The stuck lookup gives up at last: nobody it had is told again.
    held[0]!(Object.assign(new Error('getaddrinfo EAI_AGAIN idp.example'), { code: 'EAI_AGAIN' }), [])
    expect(stillWaiting).toHaveLength(1)
    expect(fresh).toHaveLength(1)
  })

  it('leaves the fresh lookup shared when the stale one answers late', () => {
    const { clock, held, ask } = setUp()
    const early = ask(500)
    clock.ms = 500
    ask(500)
    held[0]!(null, ADDRESSES)
    expect(early).toEqual([[null, ADDRESSES, undefined]])
    // The fresh lookup is still under way: the next connection joins it, it does not start a third.
    ask(500)
    expect(held).toHaveLength(2)
  })

  it('forgets an answered lookup: the next connection looks the name up again', () => {
    const { held, ask } = setUp()
    ask(500)
    held[0]!(null, ADDRESSES)
    ask(500)
    expect(held).toHaveLength(2)
  })

  it('bounds a lookup by the longest timeout of its callers, counted from its start, not from the last join', () => {
    const { clock, held, ask } = setUp()
    ask(500)
    clock.ms = 100
    ask(2000)
    clock.ms = 1999
    ask(500)
    expect(held).toHaveLength(1)
    clock.ms = 2000
    ask(500)
    expect(held).toHaveLength(2)
  })

  it('keeps lookups with different options apart, as node:dns would answer them differently', () => {
    const { held, ask } = setUp()
    ask(500, 'idp.example', { all: true })
    ask(500, 'idp.example', { all: false })
    ask(500, 'idp.example', { all: true, family: 6 })
    expect(held).toHaveLength(3)
  })
})
