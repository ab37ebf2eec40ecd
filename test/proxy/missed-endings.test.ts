// The looks for held sessions after a gap in the endings' broadcast (src/proxy/missed-endings.ts),
// with the test's timers: one look per held session however many gaps come while the store fails (a
// re-reading's finding: each gap started another chain of looks, 6 every 5 s after 3 gaps for 2
// sessions), again 5 s after one the store did not answer, none once the session is no longer held;
// and once more after a look a later gap overtook (a re-reading's finding: it had read the store
// before that gap's missed ending, and the session was never looked for again).
import { describe, expect, it } from 'vitest'
import { LOOK_AGAIN_MS, lookForEnded, type HeldSessions } from '../../src/proxy/missed-endings.js'
import { ManualTimers } from '../helpers/manual-timers.js'

const settle = () => new Promise((resolve) => setImmediate(resolve))

function registry (answer: () => Promise<boolean>) {
  const timers = new ManualTimers()
  timers.time = 1_000_000
  const held = new Set(['s1', 's2'])
  const counted = { looks: 0, ended: [] as string[] }
  const sessions: HeldSessions = {
    exists: async () => { counted.looks++; return await answer() },
    holds: (id) => held.has(id),
    end: (id) => { held.delete(id); counted.ended.push(id) },
    timers,
    looking: new Map(),
  }
  return { timers, held, counted, sessions }
}

describe('looks for held sessions after gaps in the endings\' broadcast', () => {
  it('three gaps while the store fails: one look per held session every 5 s, not one per gap', async () => {
    const { timers, held, counted, sessions } = registry(async () => { throw new Error('store unreachable') })
    for (let gap = 0; gap < 3; gap++) {
      lookForEnded(held, sessions)
      await settle()
    }
    counted.looks = 0
    timers.advance(timers.time + LOOK_AGAIN_MS)
    await settle()
    expect({ looks: counted.looks, live: timers.live().length }).toEqual({ looks: 2, live: 2 })
  })

  it('a session no longer held is looked for no more; one the store says is gone ends', async () => {
    let gone = false
    const { timers, held, counted, sessions } = registry(async () => {
      if (!gone) throw new Error('store unreachable')
      return false
    })
    lookForEnded(held, sessions)
    await settle()
    held.delete('s2')
    gone = true
    timers.advance(timers.time + LOOK_AGAIN_MS)
    await settle()
    expect(counted.ended).toEqual(['s1'])
    expect(timers.live()).toEqual([])
    expect(sessions.looking.size).toBe(0)
  })

  it('a gap while a look is under way: that look answers "there" from before the gap, and the session is looked for once more', async () => {
    let inStore = true
    let answerFirst: (there: boolean) => void = () => {}
    const { held, counted, sessions } = registry(async () => {
      if (counted.looks === 1) return await new Promise<boolean>((resolve) => { answerFirst = resolve })
      return inStore
    })
    held.delete('s2')
    lookForEnded(held, sessions)
    await settle()
    inStore = false
    lookForEnded(held, sessions)
    await settle()
    answerFirst(true)
    await settle()
    expect({ ended: counted.ended, looks: counted.looks, looking: sessions.looking.size }).toEqual({ ended: ['s1'], looks: 2, looking: 0 })
  })
})
