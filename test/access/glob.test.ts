// Path globs without regular expressions: a table of hostile globs and targets, a
// fast-check property that the linear matcher means exactly what the regular expression it
// replaced meant, and the cost on long hostile paths growing linearly (a ratio measured in one run).
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { globMatcher } from '../../src/access/glob.js'
import { growth } from '../helpers/cost.js'

/** The regular expression `public` globs compiled to before (the reference, on short inputs only). */
function regexGlob (glob: string): RegExp {
  if (glob === '*') return /^/
  if (glob.includes('?')) return /(?!)/
  const body = glob.split('*').map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('[^?]*')
  return new RegExp(`^${body}(?:\\?|$)`)
}

/** [glob, target, matches] */
const CASES: Array<[string, string, boolean]> = [
  ['*', '/anything/at/all?q=1', true],
  ['*', '', true],
  ['/app/static/*', '/app/static/a/b.css?v=2', true],
  ['/app/static/*', '/app/static', false],
  ['/app/static/*', '/app/staticx/a', false],
  ['/app/*/health', '/app/a/b/health', true],
  ['/app/*/health', '/app/health', false],
  ['/app/*/health', '/app/x/health/more', false],
  ['/app/*/health', '/app/x/health?x=/health', true],
  ['/app/a?b', '/app/a?b', false],
  ['/app/open', '/app/open', true],
  ['/app/open', '/app/open?', true],
  ['/app/open', '/app/opened', false],
  ['/a*a', '/a', false],
  ['/a*a', '/aa', true],
  ['/*ab*ba', '/aba', false],
  ['/*ab*ba', '/abba', true],
  ['/**', '/', true],
  ['/x/*.*', '/x/.', true],
  ['/x/*.(json)', '/x/a.(json)', true],
  ['/x/*.json', '/x/ajson', false],
  ['/x/*[a]*', '/x/[a]', true],
  ['/x/*', '/y/x/', false],
  ['/x/*y', '/x/?y', false],
  // Hostile: many stars and a path that almost matches.
  ['/*a*a*a*a*a*a*a*b', `/${'a'.repeat(200)}`, false],
  ['/*a*a*a*a*a*a*a*b', `/${'a'.repeat(200)}b`, true],
  ['/a/*x*y', `/a/${'x'.repeat(5000)}z`, false],
  ['/a/*x*y', `/a/${'x'.repeat(5000)}?y`, false],
  ['/*.%20*.%20x', `/${'.%20'.repeat(3900)}`, false],
]

describe('globMatcher', () => {
  it.each(CASES)('%j against %j is %j', (glob, target, matches) => {
    expect(globMatcher(glob)(target)).toBe(matches)
    if (target.length < 64) expect(regexGlob(glob).test(target)).toBe(matches)
  })

  it('agrees with the regular expression it replaced, on generated globs and targets', () => {
    const glob = fc.oneof(
      fc.constant('*'),
      fc.array(fc.constantFrom('/', 'a', 'b', '.', '*', '**', '?', '%20', 'ab'), { maxLength: 8 }).map((parts) => `/${parts.join('')}`)
    )
    const target = fc.array(fc.constantFrom('/', 'a', 'b', '.', '?', '%20', 'ab', 'ba'), { maxLength: 14 }).map((parts) => `/${parts.join('')}`)
    fc.assert(fc.property(glob, target, (g, t) => {
      expect(globMatcher(g)(t)).toBe(regexGlob(g).test(t))
    }), { numRuns: 1000 })
  })

  it.each([
    ['two stars, a path of one repeated letter and no tail', '/a/*x*y', (n: number) => `/a/${'x'.repeat(n)}z`],
    ['many stars, a path that almost matches', '/*a*ab*b', (n: number) => `/${'a'.repeat(n)}b`],
    ['the issue\'s dots and spaces', '/A/*.%20*x', (n: number) => `/A/a${'.%20'.repeat(n)}`],
  ])('costs linearly in the path: %s (4 times longer costs under 8 times more)', (_name, glob, path) => {
    const matcher = globMatcher(glob)
    const ratio = growth(matcher, path(2000), path(8000))
    expect(ratio).toBeLessThan(8)
  })
})
