// The Authorization (or Proxy-Authorization) value a stranger sends, read by bearerToken(): a table
// of hostile values, a property that holds for any value (the token is a b64token cut from the
// value, and the credential the gateway forwards, `Bearer <token>`, reads back as the same token),
// and the cost of a long hostile value growing linearly.
// @see https://www.rfc-editor.org/rfc/rfc6750#section-2.1
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { bearerToken } from '../../src/access/bearer.js'
import { growth } from '../helpers/cost.js'

const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/
const long = 'a'.repeat(16 * 1024)

describe('bearerToken on hostile values', () => {
  // undefined: no bearer credential (the session decides); '': the scheme and nothing after it (no
  // token was sent: refused); null: the Bearer scheme without one well-formed token (refused); a
  // string: the token.
  const rows: Array<[string, string | undefined, string | null | undefined]> = [
    ['no header', undefined, undefined],
    ['an empty value', '', undefined],
    ['the scheme alone', 'Bearer', ''],
    ['the scheme and one space', 'Bearer ', ''],
    ['the scheme and spaces only', 'Bearer      ', ''],
    ['lower case', 'bearer x', 'x'],
    ['upper case', 'BEARER x', 'x'],
    ['several spaces before the token', 'Bearer    x', 'x'],
    ['a tab after the scheme', 'Bearer\tx', null],
    ['a tab before the token', 'Bearer \tx', null],
    ['a comma after the scheme', 'Bearer,x', null],
    ['two tokens', 'Bearer a b', null],
    ['two credentials', 'Bearer a,Bearer b', null],
    ['a trailing space', 'Bearer abc ', null],
    ['a NUL', 'Bearer ab\u0000c', null],
    ['a control character at the end', 'Bearer abc\u001f', null],
    ['DEL', 'Bearer abc\u007f', null],
    ['non-ASCII', 'Bearer abcé', null],
    ['a non-ASCII token alone', 'Bearer ☃', null],
    ['another scheme', 'Basic dXNlcjpwYXNz', undefined],
    ['a scheme that starts like Bearer', 'Bearerx abc', undefined],
    ['a scheme that starts like Bearer, with a digit', 'Bearer2 abc', undefined],
    ['a scheme shorter than Bearer', 'Bear', undefined],
    ['trailing = padding', 'Bearer abc==', 'abc=='],
    ['= alone', 'Bearer =', null],
    ['= in the middle', 'Bearer ab=c', null],
    ['= then a space', 'Bearer ab= ', null],
    ['every b64token character', 'Bearer AZaz09-._~+/', 'AZaz09-._~+/'],
    ['a quoted token', 'Bearer "abc"', null],
    ['a 16 KB token', `Bearer ${long}`, long],
  ]
  it.each(rows)('%s', (_name, value, expected) => {
    expect(bearerToken(value)).toBe(expected)
  })
})

describe('bearerToken on any value', () => {
  it('gives undefined, null, \'\' for the scheme and spaces only, or a b64token cut from the value that reads back the same once forwarded as `Bearer <token>`', () => {
    // Any code point, the bytes a header can hold (latin1) as often as all the rest: fast-check's own
    // 'binary' unit first maps all 1.1 million code points, 0.7 s of CPU in each worker.
    const anyCharacter = fc.oneof(fc.integer({ min: 0, max: 0xff }), fc.integer({ min: 0x100, max: 0x10ffff })).map((point) => String.fromCodePoint(point))
    const value = fc.oneof(
      fc.string({ unit: anyCharacter }),
      fc.tuple(fc.constantFrom('Bearer', 'bearer', 'BEARER', 'BeArEr'), fc.stringMatching(/^[ \t]{0,3}$/), fc.stringMatching(/^[A-Za-z0-9\-._~+/= ,\t"]{0,40}$/))
        .map(([scheme, gap, rest]) => scheme + gap + rest)
    )
    fc.assert(fc.property(value, (header) => {
      const token = bearerToken(header)
      if (token === undefined || token === null) return
      if (token === '') {
        expect(header.slice(0, 6).toLowerCase()).toBe('bearer')
        expect(header.slice(6).replaceAll(' ', '')).toBe('')
        return
      }
      expect(token).toMatch(B64TOKEN)
      expect(header.endsWith(token)).toBe(true)
      expect(header.slice(0, 6).toLowerCase()).toBe('bearer')
      expect(header.slice(6, header.length - token.length).trim()).toBe('')
      expect(bearerToken(`Bearer ${token}`)).toBe(token)
    }), { numRuns: 2000 })
  })

  it('finds the token whatever the scheme\'s case and the spaces before it', () => {
    const spelling = fc.tuple(fc.array(fc.boolean(), { minLength: 6, maxLength: 6 }), fc.integer({ min: 1, max: 8 }), fc.stringMatching(/^[A-Za-z0-9\-._~+/]{1,60}=*$/))
    fc.assert(fc.property(spelling, ([upper, spaces, token]) => {
      const scheme = [...'bearer'].map((letter, i) => upper[i] ? letter.toUpperCase() : letter).join('')
      expect(bearerToken(`${scheme}${' '.repeat(spaces)}${token}`)).toBe(token)
    }))
  })
})

describe('bearerToken\'s cost', () => {
  // Each a value a regular expression with nested repetition would backtrack on.
  const hostile: Array<[string, (n: number) => string]> = [
    ['spaces, then no token', (n) => `Bearer${' '.repeat(n)}!`],
    ['a long token, then one bad character', (n) => `Bearer ${'a'.repeat(n)}!`],
    ['a long run of =, then a character', (n) => `Bearer a${'='.repeat(n)}a`],
    ['alternating token and =', (n) => `Bearer ${'a='.repeat(n / 2)}`],
  ]
  it.each(hostile)('grows linearly on %s (100 KB)', (_name, make) => {
    expect(growth(bearerToken, make(25_000), make(100_000))).toBeLessThan(8)
  })
})
