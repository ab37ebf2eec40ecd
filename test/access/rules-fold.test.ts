// A `deny` paths glob holds on every spelling of a path that a case-insensitive application reads as
// the same one: other letter case, trailing dots and `%20`s on any segment. A
// table of spellings, then properties over random paths and random spellings of them: a `deny` glob
// that matches the folded form refuses every spelling, and an `allow` glob never admits a path the
// exact glob does not match (the fold may refuse more, never admit more). The edge's route-prefix
// check and the rules read the one fold (src/config/path-fold.ts).
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { canonicalTarget } from '../../src/config/canonical.js'
import { folded, routedForms } from '../../src/config/path-fold.js'
import { compileRules } from '../../src/access/rules.js'
import { globMatcher } from '../../src/access/glob.js'
import { prefixSpelling } from '../../src/http/edge.js'
import { growth } from '../helpers/cost.js'
import { lists } from '../helpers/rules.js'

const denyOf = (glob: string) => compileRules(lists(undefined, [{ paths: [glob] }]))
const allowOf = (glob: string) => compileRules(lists([{ paths: [glob] }]))

describe('a deny glob and the spellings of a path', () => {
  it.each([
    ['/wiki/admin/*', '/wiki/ADMIN/users', false],
    ['/wiki/admin/*', '/wiki/Admin/Users', false],
    ['/wiki/admin/*', '/wiki/admin./users', false],
    ['/wiki/admin/*', '/wiki/admin%20/users', false],
    ['/wiki/admin/*', '/wiki/admin.%20.%20/users', false],
    ['/wiki/admin/*', '/wiki/ADMIN', false],
    ['/wiki/admin/*', '/wiki/ADMIN.?q=1', false],
    ['/wiki/admin/*', '/wiki/Admin?X=y.', false],
    ['/wiki/Admin/*', '/wiki/admin/x', false],
    ['/wiki/admin./*', '/wiki/admin/x', false],
    // A path a front controller takes from the query (CodeIgniter): after a directory or a script.
    ['/admin/*', '/?/admin/users', false],
    ['/admin/*', '/index.php?/admin/users', false],
    ['/admin/*', '/INDEX.PHP?/Admin/users&x=1', false],
    ['/app/admin/*', '/app/?/admin/users', false],
    ['/app/admin/*', '/app/index.php?/admin?x=1', false],
    ['/admin/*', '/?/x/../admin/users', false],
    ['/admin/*', '/?/%61dmin/users', false],
    ['/admin/*', '/pub?/admin/users', true],
    ['/admin/*', '/?admin/users', true],
    ['/admin/*', '/?x=/admin/users', true],
    ['/admin/*', '/?/../admin/users', false],
    ['/app/admin/*', '/app/?/../admin/users', false],
    ['/app/admin/*', '/app/?/x//admin', false],
    ['/admin/*', '/index.php?/admin/users/%00', false],
    ['/admin/*', '/?/admin/users/..x', false],
    ['/admin/*', '/?/x/%2F/admin', false],
    ['/admin/*', '/pub?/x/%2F/admin', true],
    // `%2B` is `+` to an application that decodes the path: a deny glob holds on both spellings.
    ['/c++/*', '/c%2B%2B/x', false],
    ['/c%2B%2B/*', '/c++/x', false],
    ['/c++/*', '/c%2Bx/y', true],
    ['/wiki/admin', '/wiki/ADMIN.', false],
    ['/wiki/admin/*', '/wiki/administrator', true],
    ['/wiki/admin/*', '/wiki/ADMINS/x', true],
    ['/wiki/admin/*', '/wiki/ad.min/x', true],
    ['/wiki/admin/*', '/wiki/page?path=/wiki/admin/x', true],
    // Non-ASCII letters in another case (IIS and .NET read É as é), and %2B as + (most upstreams decode it).
    ['/caf%C3%A9/*', '/CAF%C3%89/x', false],
    ['/caf%C3%A9/*', '/caf%C3%A8/x', true],
    ['/c++/admin/*', '/c%2B%2B/admin/x', false],
  ])('deny %s, path %s: admitted %s', (glob, path, admitted) => {
    expect(denyOf(glob)(undefined, 'GET', path, undefined).admit).toBe(admitted)
  })

  it('an allow glob matches only the exact path', () => {
    expect(allowOf('/wiki/public/*')(undefined, 'GET', '/wiki/public/x', undefined).admit).toBe(true)
    expect(allowOf('/wiki/public/*')(undefined, 'GET', '/wiki/PUBLIC/x', undefined).admit).toBe(false)
    expect(allowOf('/wiki/public/*')(undefined, 'GET', '/wiki/public./x', undefined).admit).toBe(false)
  })

  it('the edge folds a route prefix as the rules fold a deny glob', () => {
    expect(prefixSpelling('/wiki/ADMIN./x', ['/wiki/admin'])).toBeDefined()
    expect(denyOf('/wiki/admin/*')(undefined, 'GET', '/wiki/ADMIN./x', undefined).admit).toBe(false)
    expect(prefixSpelling('/CAF%C3%89/x', ['/café'])).toBeDefined()
    expect(denyOf('/caf%C3%A9/*')(undefined, 'GET', '/CAF%C3%89/x', undefined).admit).toBe(false)
    expect(prefixSpelling('/c%2B%2B/x', ['/c++'])).toBeDefined()
    expect(denyOf('/c++/*')(undefined, 'GET', '/c%2B%2B/x', undefined).admit).toBe(false)
  })
})

/** A segment as a canonical path may hold it, without dots at its ends. */
const segment = fc.stringMatching(/^[a-z0-9_~-][a-z0-9._~-]{0,5}$/).filter((text) => !text.endsWith('.'))
const pathSegments = fc.array(segment, { minLength: 1, maxLength: 5 })

/** A spelling of `segments` a case-insensitive application reads as them: each letter's case flipped at will, trailing dots and `%20`s added. */
function spelling (segments: string[]): fc.Arbitrary<string> {
  const one = (text: string) => fc.tuple(
    fc.array(fc.boolean(), { minLength: text.length, maxLength: text.length }),
    fc.array(fc.constantFrom('.', '%20'), { maxLength: 3 })
  ).map(([flips, tail]) => [...text].map((c, i) => flips[i] === true ? c.toUpperCase() : c).join('') + tail.join(''))
  return fc.tuple(...segments.map(one)).map((parts) => `/${parts.join('/')}`)
}

/** A glob over the first segments of a path, each letter's case flipped at will, with or without a trailing `/*`. */
function globOf (segments: string[]): fc.Arbitrary<string> {
  return fc.tuple(fc.integer({ min: 1, max: segments.length }), fc.boolean(), fc.boolean())
    .map(([count, star, upper]) => {
      const head = `/${segments.slice(0, count).join('/')}`
      return `${upper ? head.toUpperCase() : head}${star ? '/*' : ''}`
    })
}

/** Whether `glob` matches `path` exactly, as a `paths` glob does (`/a/*` covers `/a`). */
function exactly (glob: string, path: string): boolean {
  return globMatcher(glob)(path) || (glob.endsWith('/*') && globMatcher(glob.slice(0, -2))(path))
}

describe('properties over random paths and spellings', () => {
  const cases = pathSegments.chain((segments) => fc.tuple(globOf(segments), spelling(segments), fc.constant(segments)))

  it('a deny glob whose folded form matches the folded path refuses every canonical spelling of it', () => {
    fc.assert(fc.property(cases, ([glob, spelt, segments]) => {
      const canonical = canonicalTarget(spelt)
      fc.pre(canonical.ok && canonical.url === spelt)
      const path = `/${segments.join('/')}`
      fc.pre(exactly(folded(glob), folded(path)))
      expect(denyOf(glob)(undefined, 'GET', spelt, undefined).admit).toBe(false)
    }), { numRuns: 500 })
  })

  it('an allow glob never admits a path its exact glob does not match', () => {
    fc.assert(fc.property(cases, ([glob, spelt]) => {
      if (allowOf(glob)(undefined, 'GET', spelt, undefined).admit) expect(exactly(glob, spelt)).toBe(true)
    }), { numRuns: 500 })
  })
})

describe('a deny glob and the paths routers dispatch to the same action', () => {
  it.each([
    ['/', []],
    ['/admin', []],
    ['/admin/', ['/admin']],
    ['/admin.json', ['/admin']],
    ['/app/index.php/admin/users', ['/app/admin/users']],
    ['/app/index.php/admin.xml/', ['/app/admin.xml', '/app/admin']],
    ['/app/index.php', ['/app/index']],
    ['/a.php/b.cgi/c', ['/c']],
    ['/report.tar.gz', ['/report.tar']],
    ['/.well-known', []],
    ['/v1.2/x', []],
    // Rails' format is any run but `/`, `.` and `?` (an outside tester's finding: `.a-b` and long ones were kept).
    ['/name.with-dash', ['/name']],
    ['/app/admin.abcdefghijk', ['/app/admin']],
    // FastCGI, mod_wsgi and ISAPI scripts route the rest of the path too.
    ['/app/mysite.fcgi/admin/users', ['/app/admin/users']],
    ['/app/site.wsgi/admin/users', ['/app/admin/users']],
    ['/app/isapi.dll/admin/users', ['/app/admin/users']],
  ])('routedForms(%s) is %j', (path, forms) => {
    expect(routedForms(path)).toEqual(forms)
  })

  it.each([
    // A glob naming a script's PATH_INFO is read as its router reads it, like the path (fast-check found it).
    ['/~.pl/a', '/~.pl/a.json/', false],
    ['/app/index.php/admin/*', '/app/admin/x', false],
    // A format in a glob's starred last segment stays: /api/*.json denies JSON, not all of /api/.
    ['/api/*.json', '/api/x.json', false],
    ['/api/*.json', '/api/x', true],
    ['/api/*.json', '/api/x.xml', true],
  ])('deny %s, path %s: admitted %s', (glob, path, admitted) => {
    expect(denyOf(glob)(undefined, 'GET', path, undefined).admit).toBe(admitted)
  })

  it('a deny glob holds on the trailing-/ and format-suffix spellings of what it denies, and an allow never widens', () => {
    fc.assert(fc.property(pathSegments, fc.constantFrom('', '/', '.json', '.XML', '.json/'), fc.boolean(), (segments, tail, star) => {
      const path = `/${segments.join('/')}`
      const glob = star ? `${path}/*` : path
      const spelt = `${path}${tail}`
      fc.pre(canonicalTarget(spelt).ok)
      expect(denyOf(glob)(undefined, 'GET', spelt, undefined).admit).toBe(false)
      if (allowOf(glob)(undefined, 'GET', spelt, undefined).admit) expect(exactly(glob, spelt)).toBe(true)
    }), { numRuns: 300 })
  })
})

// An outside tester's findings: a script followed by more segments runs that script (Apache's
// mod_php, php-fpm's usual split, IIS, CGI), which a deny naming the script did not hold on, and an
// allow on static files admitted.
describe('a script with PATH_INFO after it', () => {
  const scripts = fc.tuple(fc.constantFrom('xmlrpc', 'x', 'index'), fc.constantFrom('.php', '.PHP', '.aspx', '.cgi', '.php.'))
  it('a deny glob naming the script holds on it with any PATH_INFO; an allow glob on other files never admits it', () => {
    fc.assert(fc.property(pathSegments, scripts, pathSegments, ([dir], [name, suffix], info) => {
      const script = `/${dir ?? 'd'}/${name}${suffix}`
      const spelt = `${script}/${info.join('/')}.css`
      fc.pre(canonicalTarget(spelt).ok)
      expect(denyOf(`/${dir ?? 'd'}/${name}${suffix.toLowerCase().replace(/\.$/, '')}`)(undefined, 'GET', spelt, undefined).admit).toBe(false)
      expect(allowOf(`/${dir ?? 'd'}/*.css`)(undefined, 'GET', spelt, undefined).admit).toBe(false)
    }), { numRuns: 300 })
  })
})

// A re-reading's finding: every `q=` copy was read as a path repeating the request's directory, so
// a long directory times many copies cost quadratic work within an 8 KiB target. Only the last copy
// of each route parameter is read now (the one PHP reads).
describe('a deny glob\'s query readings cost', () => {
  const judge = compileRules(lists(undefined, [{ paths: ['/app/admin/*', '/app/*/edit', '/app/*/secret*'] }]))
  const target = (n: number) => `/app/${'x.php/'.repeat(n)}?${'q=x&'.repeat(n)}`
  it('grows linearly with the directory and the copies of q (8 KiB)', () => {
    expect(growth((path) => judge({ sub: 'alice', groups: [] }, 'GET', path, '127.0.0.1'), target(166), target(664))).toBeLessThan(8)
  })
})
