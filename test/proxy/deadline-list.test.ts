// The deadline list under the upstream pool and the body reads (src/proxy/deadline-list.ts), on a
// clock and a timer this test moves itself: no wall-clock wait, no real timer.
import { describe, expect, it } from 'vitest'
import { DeadlineList, type Timed } from '../../src/proxy/deadline-list.js'
import { ManualTimers } from '../helpers/manual-timers.js'

class Wait implements Timed<Wait> {
  prev: Wait | null = null
  next: Wait | null = null
  constructor (readonly name: string, readonly deadline: number) {}
}

function list (earlyMs: number): { timers: ManualTimers, expired: string[], deadlines: DeadlineList<Wait> } {
  const timers = new ManualTimers()
  const expired: string[] = []
  const deadlines = new DeadlineList<Wait>((wait) => expired.push(wait.name), earlyMs, timers)
  return { timers, expired, deadlines }
}

describe('DeadlineList', () => {
  it('expires waits in the order of their deadlines, each when its deadline comes, with one timer at a time', () => {
    const { timers, expired, deadlines } = list(0)
    deadlines.append(new Wait('a', 100))
    timers.advance(10)
    deadlines.append(new Wait('b', 110))
    deadlines.append(new Wait('c', 110))
    timers.advance(20)
    deadlines.append(new Wait('d', 120))
    expect(timers.live()).toEqual([100])
    timers.advance(99)
    expect(expired).toEqual([])
    timers.advance(100)
    expect(expired).toEqual(['a'])
    expect(timers.live()).toEqual([110])
    timers.advance(110)
    expect(expired).toEqual(['a', 'b', 'c'])
    timers.advance(1000)
    expect(expired).toEqual(['a', 'b', 'c', 'd'])
    expect(timers.live()).toEqual([])
  })

  it('counts a deadline as come up to earlyMs before it, and with earlyMs 0 never before it', () => {
    // Timers fire on whole milliseconds: one set for 100.5 ms may fire at 100.
    const early = list(1)
    early.deadlines.append(new Wait('answer', 100.5))
    early.timers.set[0]!.at = 100
    early.timers.advance(100)
    expect(early.expired).toEqual(['answer'])

    const never = list(0)
    never.deadlines.append(new Wait('body', 100.5))
    never.timers.set[0]!.at = 100
    never.timers.advance(100)
    expect(never.expired).toEqual([])
    // Set again for the fraction that remains.
    expect(never.timers.live()).toEqual([100.5])
    never.timers.advance(100.5)
    expect(never.expired).toEqual(['body'])

    // earlyMs 1 does not reach 1 ms and more ahead.
    const notYet = list(1)
    notYet.deadlines.append(new Wait('later', 101.5))
    notYet.timers.set[0]!.at = 100
    notYet.timers.advance(100)
    expect(notYet.expired).toEqual([])
    expect(notYet.timers.live()).toEqual([101.5])
  })

  it('never expires a wait taken out of the list, from its head, middle or tail, and unlinks it', () => {
    const { timers, expired, deadlines } = list(0)
    const waits = ['a', 'b', 'c', 'd', 'e'].map((name, i) => new Wait(name, 100 + i))
    for (const wait of waits) deadlines.append(wait)
    deadlines.remove(waits[0]!)
    deadlines.remove(waits[2]!)
    deadlines.remove(waits[4]!)
    for (const wait of [waits[0]!, waits[2]!, waits[4]!]) expect([wait.prev, wait.next]).toEqual([null, null])
    timers.advance(1000)
    expect(expired).toEqual(['b', 'd'])
  })

  it('sets its timer again when the list empties and fills', () => {
    const { timers, expired, deadlines } = list(0)
    const only = new Wait('only', 100)
    deadlines.append(only)
    deadlines.remove(only)
    // The timer for the removed head fires with nothing due and sets no other.
    timers.advance(100)
    expect(timers.live()).toEqual([])
    deadlines.append(new Wait('next', 200))
    expect(timers.live()).toEqual([200])
    timers.advance(200)
    expect(expired).toEqual(['next'])
  })

  it('keeps no timer after close, and expires nothing more', () => {
    const { timers, expired, deadlines } = list(0)
    deadlines.append(new Wait('a', 100))
    deadlines.append(new Wait('b', 200))
    deadlines.close()
    expect(timers.live()).toEqual([])
    timers.advance(1000)
    expect(expired).toEqual([])
  })

  it('still expires the waits behind one whose expiry threw', () => {
    const timers = new ManualTimers()
    const expired: string[] = []
    const deadlines = new DeadlineList<Wait>((wait) => {
      expired.push(wait.name)
      if (wait.name === 'a') throw new Error('expiry failed')
    }, 0, timers)
    deadlines.append(new Wait('a', 100))
    deadlines.append(new Wait('b', 100))
    deadlines.append(new Wait('c', 150))
    expect(() => timers.advance(100)).toThrow('expiry failed')
    expect(expired).toEqual(['a'])
    expect(timers.live()).toEqual([100])
    timers.advance(150)
    expect(expired).toEqual(['a', 'b', 'c'])
  })
})
