// The linear-cost checks' own measure (test/helpers/cost.ts) tells quadratic code from linear
// code, with its early stop for a ratio that has settled. (Quadratic code is measured once: its
// loop allocates nothing, so no collection can inflate the small input's cost.)
import { describe, expect, it } from 'vitest'
import { growth } from './helpers/cost.js'

/** Where the functions' results go, so that the compiler cannot drop their loops as unused. */
let sink = 0

const linear = (input: string) => {
  for (let i = 0; i < input.length; i++) sink ^= input.charCodeAt(i)
}

const quadratic = (input: string) => {
  for (let i = 0; i < input.length; i++) {
    for (let j = i; j < input.length; j++) sink ^= input.charCodeAt(j)
  }
}

describe('growth', () => {
  it('puts linear code under the bound the checks use (8) and quadratic code over it', () => {
    expect(growth(linear, 'a'.repeat(2000), 'a'.repeat(8000))).toBeLessThan(8)
    expect(growth(quadratic, 'a'.repeat(200), 'a'.repeat(800), 1)).toBeGreaterThan(8)
    expect(sink).toBeTypeOf('number')
  })
})
