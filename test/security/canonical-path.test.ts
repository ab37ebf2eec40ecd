// One canonical path from the socket to the upstream: the table of hostile
// targets for canonicalTarget, the same targets sent over a real socket to a real gateway, and a
// property-based test (fast-check) that what the upstream receives is exactly the path that was
// authorised, and that a protected path never reaches the upstream without a session.
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { canonicalTarget } from '../../src/config/canonical.js'
import { prefixSpelling } from '../../src/http/edge.js'
import { startNestedRoutes, type NestedRoutes, type TestGateway } from '../helpers/gateway.js'
import { waitFor } from '../helpers/net.js'
import { rawRequest } from '../helpers/raw-http.js'
import type { Upstream } from '../helpers/upstream.js'

/** [raw target, canonical form] */
const CANONICAL: Array<[string, string]> = [
  ['/app/x', '/app/x'],
  ['/', '/'],
  ['/app/./x', '/app/x'],
  ['/app/../public/x', '/public/x'],
  ['/public/../app/x', '/app/x'],
  ['/public/%2e%2e/app/x', '/app/x'],
  ['/public/%2E%2e/app/x', '/app/x'],
  ['/public/.%2E/app/x', '/app/x'],
  ['/public/%2e/x', '/public/x'],
  ['/app//x', '/app/x'],
  ['//app/x', '/app/x'],
  ['/app/x/', '/app/x/'],
  ['/app/x/.', '/app/x/'],
  ['/app/x/..', '/app/'],
  ['/app/x/%2e%2e', '/app/'],
  ['/%61pp/x', '/app/x'],
  ['/app/%7e%41%5F', '/app/~A_'],
  // The sub-delims, `:` and `@` are carried as they are, so their encoding is decoded: one spelling each.
  ['/wiki/Special%3AVersion', '/wiki/Special:Version'],
  ['/wiki/Special%3aVersion', '/wiki/Special:Version'],
  ['/odata/%24batch', '/odata/$batch'],
  ['/%40admin/x', '/@admin/x'],
  ['/a%21b/%26%27%28%29%2A%2B%2C%3D', '/a!b/&\'()*%2B,='],
  // `%2B` stays: an application that reads `+` in a path as a space tells the two apart.
  ['/tags/c%2b%2b', '/tags/c%2B%2B'],
  ['/tags/c++', '/tags/c++'],
  ['/app/%3f%23', '/app/%3F%23'],
  ['/app/%c3%a9', '/app/%C3%A9'],
  ['/app/a"b', '/app/a%22b'],
  ['/app/a|b{c}', '/app/a%7Cb%7Bc%7D'],
  ['/app/.hidden', '/app/.hidden'],
  ['/app/x..y', '/app/x..y'],
  ['/app/x..', '/app/x..'],
  ['/app/x?a=1&a=2', '/app/x?a=1&a=2'],
  ['/app/x?q=%2F..%2F', '/app/x?q=%2F..%2F'],
  ['/app/x?q=a"b\'c', '/app/x?q=a%22b%27c'],
  ['/app/../x?q=/../', '/x?q=/../'],
]

/** [raw target, why it is refused] */
const REFUSED: Array<[string, RegExp]> = [
  ['/app/%2f..', /encoded \//],
  ['/app/%2F', /encoded \//],
  ['/app/%5c..%5cadmin', /encoded \//],
  ['/app/..\\admin', /\\/],
  ['/app\\..\\admin', /\\/],
  ['/app/x;jsessionid=1', /;/],
  ['/public/..;/app/x', /;/],
  ['/app/x#frag', /#/],
  ['/app/x?y#frag', /#/],
  ['/app/%00', /control/],
  ['/app/%0a', /control/],
  ['/app/%7f', /control/],
  ['/app/%zz', /percent-encoding/],
  ['/app/%3b', /encoded ;/],
  ['/app/static/%252e%252e/admin', /encoded %/],
  ['/oauth/authorized/demo/%ff?code=c&state=s', /UTF-8/],
  ['/app/static/%c0%ae%c0%ae/admin', /UTF-8/],
  ['/%ED%A0%80', /UTF-8/],
  ['/app/%2', /percent-encoding/],
  ['/app/x?q=%', /percent-encoding/],
  ['/..', /climbs above/],
  ['/app/../../etc/passwd', /climbs above/],
  ['/%2e%2e/x', /climbs above/],
  ['/app/...', /begins or ends with \.\./],
  ['/app/..x/y', /begins or ends with \.\./],
  ['/app/x../y', /begins or ends with \.\./],
  ['/app/%2e%2e%2e', /begins or ends with \.\./],
  ['http://evil.example/app/', /must be a path/],
  ['*', /must be a path/],
  ['app/x', /must be a path/],
]

describe('canonicalTarget', () => {
  it.each(CANONICAL)('makes %j canonical as %j', (raw, canonical) => {
    expect(canonicalTarget(raw)).toEqual({ ok: true, url: canonical })
  })

  it.each(REFUSED)('refuses %j', (raw, reason) => {
    const result = canonicalTarget(raw)
    expect(result.ok).toBe(false)
    expect(result.ok ? '' : result.reason).toMatch(reason)
  })

  it('is idempotent and a fixed point of WHATWG URL parsing (what the proxy does with it)', () => {
    fc.assert(fc.property(hostileTarget(), (raw) => {
      const first = canonicalTarget(raw)
      if (!first.ok) return
      expect(canonicalTarget(first.url)).toEqual(first)
      const parsed = new URL(first.url, 'http://upstream.invalid')
      const [path, query] = first.url.split(/\?(.*)/s, 2)
      expect(parsed.pathname).toBe(path)
      expect(parsed.search).toBe(query ? `?${query}` : '')
    }), { numRuns: 2000 })
  })
})

/**
 * What CodeIgniter routes `<directory>?/<path>` to (CI_URI: the query up to its next `?`, empty and
 * `..` segments dropped, never climbed), its escapes decoded; undefined when that is no plain path
 * (an escape that decodes to `/`, `\\`, `%`, NUL or is no escape at all).
 */
function frontControllerReading (directory: string, query: string): string | undefined {
  const end = query.indexOf('?')
  const raw = end === -1 ? query : query.slice(0, end)
  let decoded: string
  try {
    decoded = decodeURIComponent(raw.replaceAll('%2f', '\u0000').replaceAll('%2F', '\u0000'))
  } catch {
    return undefined
  }
  if (decoded.includes('\u0000') || /[\\%]/.test(decoded)) return undefined
  const kept = decoded.split('/').filter((segment) => segment !== '' && segment !== '.' && segment !== '..')
  return `${directory}${kept.join('/')}`
}

/** Paths from the alphabet attackers use: separators, dots and their encodings, `;`, `#`, `?`. */
function hostileTarget (): fc.Arbitrary<string> {
  const piece = fc.constantFrom('/', '/', '.', '..', '%2e', '%2E', '%2f', '%5c', '\\', ';', '#', '?', '%3b', '%00', '//',
    'app', 'public', 'admin', 'x', '1', '%61pp', 'a%62', '%', '~', '%3A', '%40', '@', '%2b')
  return fc.array(piece, { minLength: 1, maxLength: 12 }).map((pieces) => `/${pieces.join('')}`)
}

describe('a real gateway with a public outer route and a protected inner route', () => {
  let nested: NestedRoutes
  let upstream: Upstream
  let gateway: TestGateway
  let port: number

  beforeAll(async () => {
    nested = await startNestedRoutes(['GET /app/public/*'])
    gateway = nested.gateway
    upstream = nested.upstream
    port = nested.port
  })

  afterAll(async () => {
    await nested?.close()
  })

  it.each(REFUSED.filter(([raw]) => raw.startsWith('/')))('answers 400 invalid_request to %j and calls no upstream', async (raw) => {
    const before = upstream.seen.length
    const response = await rawRequest(port, raw)
    expect(response.status).toBe(400)
    expect(JSON.parse(response.body)).toMatchObject({ error: 'invalid_request' })
    expect(upstream.seen.length).toBe(before)
  })

  it('logs a refused request with the target the client sent, without its query values', async () => {
    await rawRequest(port, '/app/%2f..?token=s3cret')
    await waitFor(async () => gateway.logs.some((line) => line.includes('"url":"/app/%2f..?token"')), 2000, 'the log line')
    const line = JSON.parse(gateway.logs.find((l) => l.includes('"url":"/app/%2f..?token"'))!) as Record<string, unknown>
    expect(line).toMatchObject({ msg: 'request completed', statusCode: 400 })
    expect(gateway.logs.join('\n')).not.toContain('s3cret')
  })

  it('answers a target the router could not decode in its own format, without echoing it', async () => {
    const response = await rawRequest(port, '/oauth/authorized/demo/%ff?code=SECRETBADURL3&state=x', [], { accept: 'text/html' })
    expect(response.status).toBe(400)
    expect(response.headers['content-type']).toMatch(/^text\/html/)
    expect(response.body).toContain('invalid_request')
    expect(response.body).not.toContain('SECRETBADURL3')
  })

  it('answers 400 invalid_request to a request with two Host headers', async () => {
    const response = await rawRequest(port, '/x', [`Host: 127.0.0.1:${port}`])
    expect(response.status).toBe(400)
    expect(JSON.parse(response.body)).toMatchObject({ error: 'invalid_request' })
  })

  it.each([
    ['/app/public/../secret', '/app/secret'],
    ['/app/public/%2e%2e/secret', '/app/secret'],
    ['/app/public/.%2e/secret', '/app/secret'],
    ['/app/public/..%2fsecret', ''],
    ['/%61pp/secret', '/app/secret'],
    ['//app/secret', '/app/secret'],
    ['/x/../app/secret', '/app/secret'],
    ['/app/public/..;/secret', ''],
  ])('judges %j as the protected path it is (never forwarded without a session)', async (raw) => {
    const before = upstream.seen.length
    const response = await rawRequest(port, raw)
    expect([400, 401]).toContain(response.status)
    expect(upstream.seen.length).toBe(before)
  })

  it('forwards exactly the canonical path it authorised, for generated hostile paths', async () => {
    // A fixed 300 runs, no time limit: a limit would end the property early, and pass, with fewer
    // runs on a slower machine.
    await fc.assert(fc.asyncProperty(hostileTarget(), async (raw) => {
      const canonical = canonicalTarget(raw)
      const before = upstream.seen.length
      const response = await rawRequest(port, raw)
      const forwarded = upstream.seen.slice(before).map((seen) => seen.url)
      if (!canonical.ok) {
        expect(response.status).toBe(400)
        expect(forwarded).toEqual([])
        return
      }
      const path = canonical.url.split('?', 1)[0]!
      if (prefixSpelling(path, ['/app', '', '/oauth']) !== undefined) {
        // Spelled like a route only in letter case or trailing dots (`/APP`, `/app..`): refused.
        expect(response.status).toBe(400)
        expect(forwarded).toEqual([])
        return
      }
      const isProtected = path === '/app' || path.startsWith('/app/')
      const isPublic = path.startsWith('/app/public/')
      const query = canonical.url.slice(path.length + 1)
      if (path.endsWith('/') && query.startsWith('/')) {
        // A front controller's route in the query (CodeIgniter's `/?/app/x`): the edge may refuse
        // it (400), the gate asks for a session (401); what passes is the canonical target, and
        // neither it nor the path a front controller reads in its query is protected.
        if (response.status !== 200) {
          expect([400, 401]).toContain(response.status)
          expect(forwarded).toEqual([])
          return
        }
        const routed = frontControllerReading(path, query)
        expect(routed).toBeDefined()
        for (const reading of [path, routed!]) expect(reading === '/app' || (reading.startsWith('/app/') && !reading.startsWith('/app/public/'))).toBe(false)
        expect(forwarded).toEqual([canonical.url])
        return
      }
      if (isProtected && !isPublic) {
        // No session: never forwarded, whatever the raw form was.
        expect(response.status).toBe(401)
        expect(forwarded).toEqual([])
      } else {
        expect(response.status).toBe(200)
        expect(forwarded).toEqual([canonical.url])
      }
    }), { numRuns: 300 })
  })
})
