// The suite's own order (test/helpers/suite-order.ts, used by vitest.config.ts): every file once,
// each kind in its order, and the waiting files spread evenly, so that no stretch of the run is
// mostly waiting files while another has none.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { spread } from './helpers/suite-order.js'

interface File { name: string, weight: number, waits: boolean }
const files = fc.array(fc.record({ weight: fc.integer({ min: 1, max: 20_000 }), waits: fc.boolean() }), { maxLength: 80 })
  .map((list) => list.map((file, index): File => ({ ...file, name: `f${index}` })))
const order = (list: File[]) => spread(list, (file) => file.weight, (file) => file.waits)

describe('the order of the suite\'s files', () => {
  it('has every file once, and each kind in the order it came in', () => {
    fc.assert(fc.property(files, (list) => {
      const ordered = order(list)
      expect([...ordered].sort((a, b) => a.name.localeCompare(b.name))).toEqual([...list].sort((a, b) => a.name.localeCompare(b.name)))
      for (const waits of [true, false]) expect(ordered.filter((file) => file.waits === waits)).toEqual(list.filter((file) => file.waits === waits))
    }), { numRuns: 300 })
  })

  it('keeps the waiting files\' part of every stretch from the start within one file of their share of the whole', () => {
    fc.assert(fc.property(files, (list) => {
      const ordered = order(list)
      const sum = (of: File[]) => of.reduce((total, file) => total + file.weight, 0)
      const share = sum(list.filter((file) => file.waits)) / Math.max(1, sum(list))
      const largest = Math.max(0, ...list.map((file) => file.weight))
      let waited = 0
      let elapsed = 0
      for (const file of ordered) {
        if (file.waits) waited += file.weight
        elapsed += file.weight
        // Neither kind runs ahead of its share by more than one file.
        expect(waited).toBeLessThanOrEqual(share * elapsed + largest)
        expect(elapsed - waited).toBeLessThanOrEqual((1 - share) * elapsed + largest)
      }
    }), { numRuns: 300 })
  })

  it('starts the four waiting files of twelve at the 1st, 4th, 7th and 10th places when all weigh the same', () => {
    const list = Array.from({ length: 12 }, (_, index): File => ({ name: `f${index}`, weight: 1, waits: index < 4 }))
    expect(order(list).map((file, place) => file.waits ? place + 1 : 0).filter(Boolean)).toEqual([1, 4, 7, 10])
  })
})
