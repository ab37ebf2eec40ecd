// A route's upstream path and the upstream's Location back (src/proxy/upstream-path.ts): a table of
// the route shapes the config allows, and two properties (fast-check) where the two directions must
// agree: the upstream's own path for a request comes back as that request's path, and whatever the
// upstream answers, a mapped Location never leaves the route's path unless the upstream's did not
// start under its rewritePrefix (it then passes exactly as written).
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { canonicalTarget } from '../../src/config/canonical.js'
import { upstreamPaths } from '../../src/proxy/upstream-path.js'

describe('the upstream path of a route', () => {
  it.each([
    // route path, rewritePrefix, request path, upstream path
    ['/app', undefined, '/app/a/b', '/app/a/b'],
    ['/app', '/inner/', '/app/a/b', '/inner/a/b'],
    ['/app', '/inner/', '/app', '/inner'],
    ['/app', '/inner/', '/app/', '/inner/'],
    ['/app', '/', '/app/x', '/x'],
    ['/app', '/', '/app', '/'],
    ['/app', '/', '/app/', '/'],
    ['/', '/x/', '/a', '/x/a'],
    ['/', '/x', '/', '/x/'],
    ['/', undefined, '/a/b', '/a/b'],
    ['/a/b', '/c', '/a/b/d', '/c/d'],
  ])('route %s with rewritePrefix %s sends %s as %s', (routePath, rewritePrefix, path, upstream) => {
    expect(upstreamPaths(routePath, rewritePrefix).path(path)).toBe(upstream)
  })

  /** Canonical paths under the route: segments of what a client may spell, made canonical by the edge itself. */
  const segment = fc.stringMatching(/^[A-Za-z0-9._~!$&'()*+,=:@-]{0,8}$/)
  const under = (routePath: string) => fc.array(segment, { maxLength: 4 }).map((segments) => {
    const target = canonicalTarget(`${routePath === '/' ? '' : routePath}/${segments.join('/')}`)
    return target.ok ? target.url : undefined
  }).filter((path): path is string => path !== undefined && (routePath === '/' || path === routePath || path.startsWith(`${routePath}/`)))
  const shapes = fc.constantFrom<[string, string | undefined]>(['/app', undefined], ['/app', '/inner/'], ['/app', '/'], ['/', '/x/'], ['/a/b', '/c'], ['/', undefined])

  it('maps the upstream path of any request back to that request\'s path (a Location to itself)', () => {
    fc.assert(fc.property(shapes.chain(([routePath, rewrite]) => fc.tuple(fc.constant(routePath), fc.constant(rewrite), under(routePath))), ([routePath, rewrite, path]) => {
      const paths = upstreamPaths(routePath, rewrite)
      const back = paths.location(paths.path(path))
      // `/app` and `/app/` are one route target (the router ignores a trailing slash): so are their mappings.
      expect(back.replace(/\/$/, '') || '/').toBe(path.replace(/\/$/, '') || '/')
    }))
  })

  it('never maps a Location that stays on the upstream\'s origin to one that leaves the gateway\'s, as a browser reads both (WHATWG URL: tabs and line breaks removed, \\ read as /)', () => {
    const tail = fc.array(fc.constantFrom('/', '\\', '\t', '\n', '\r', ' ', 'e', '.', '?', '#', '@', ':', '%2F'), { maxLength: 8 }).map((parts) => parts.join(''))
    const upstreamOrigin = 'https://upstream.example'
    const gatewayOrigin = 'https://gateway.example'
    fc.assert(fc.property(fc.constantFrom<[string, string]>(['/', '/inner/'], ['/', '/inner'], ['/app', '/inner/'], ['/app', '/']), tail, ([routePath, rewrite], rest) => {
      const value = `${rewrite.replace(/\/$/, '')}${rest}`
      const mapped = upstreamPaths(routePath, rewrite).location(value)
      if (mapped === value || URL.parse(value, upstreamOrigin)?.origin !== upstreamOrigin) return
      expect(URL.parse(mapped, gatewayOrigin)?.origin, `${JSON.stringify(value)} mapped to ${JSON.stringify(mapped)}`).toBe(gatewayOrigin)
    }), { numRuns: 3000 })
  })

  it('leaves any Location that is not under the rewritePrefix as the upstream wrote it, and keeps the rest under the route', () => {
    const rest = fc.string({ maxLength: 20 })
    const location = fc.oneof(fc.string({ maxLength: 30 }), rest.map((r) => `https://host.example${r}`), rest.map((r) => `//${r}`), rest.map((r) => `/inner${r}`), rest.map((r) => `/${r}`))
    fc.assert(fc.property(shapes, location, ([routePath, rewrite], value) => {
      const mapped = upstreamPaths(routePath, rewrite).location(value)
      const from = routePath === '/' ? '' : routePath
      if (mapped !== value) {
        expect(value.startsWith('/') && !value.startsWith('//')).toBe(true)
        expect(mapped === from || mapped.startsWith(`${from}/`) || mapped.startsWith(`${from}?`) || mapped.startsWith(`${from}#`) || (from === '' && mapped.startsWith('/'))).toBe(true)
      }
    }))
  })
})
