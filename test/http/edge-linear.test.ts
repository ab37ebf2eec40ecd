// The edge is linear in what the client sends, and refuses request targets over 8 KiB:
// prefixSpelling (a scan now, a backtracking regular expression before) agrees with the old
// function on generated paths; the edge's cost on the hostile target grows linearly (a
// ratio of two sizes measured in one run); and over a real socket, a table of hostile targets
// around 8 KiB gets 414 `uri_too_long` above it and its usual answer below, while /healthz answers.
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { canonicalTarget, requestSpelling } from '../../src/config/canonical.js'
import { MAX_TARGET_BYTES, prefixSpelling } from '../../src/http/edge.js'
import { growth } from '../helpers/cost.js'
import { startNestedRoutes, type NestedRoutes } from '../helpers/gateway.js'
import { rawRequest } from '../helpers/raw-http.js'
import type { Upstream } from '../helpers/upstream.js'

/**
 * The functions edge.ts had before (the reference; quadratic, so on short inputs only), with two
 * mends since: a path is checked whether it has anything to fold or not (a lower-case
 * `/reportserver/x` is a route `/ReportServer/`'s to IIS), prefixes are read in the request's
 * spelling (`/café` is `/caf%C3%A9`), and a segment's NTFS stream suffix is cut (`admin::$DATA`).
 */
const reference = {
  under (path: string, prefix: string): boolean {
    return prefix === '' || path === prefix || (path.startsWith(prefix) && path[prefix.length] === '/')
  },
  folded (path: string): string {
    const trim = (segment: string) => segment.replace(/(?:\.|%20)+$/, '')
    return path.toLowerCase().split('/').map((segment) => trim(trim(segment).replace(/^([^:]*):[^:]*:\$[a-z0-9_]+$/, '$1'))).join('/')
  },
  /** Script segments followed by more taken away, then the last segment's format suffix (src/config/path-fold.ts routedForms). */
  dispatched (loose: string): string[] {
    const segments = loose.split('/')
    if (segments.length > 2 && segments[segments.length - 1] === '') segments.pop()
    const kept = segments.filter((segment, i) => i === segments.length - 1 || !/^.+\.(php|phtml|cgi|fcgi|wsgi|pl|asp|aspx|asmx|ashx|svc|dll|exe)$/.test(segment))
    const joined = kept.join('/')
    return [joined, joined.replace(/([^/])\.[^/.]+$/, '$1')].filter((reading) => reading !== loose)
  },
  prefixSpelling (path: string, prefixes: readonly string[]): string | undefined {
    const loose = reference.folded(path)
    for (const prefix of prefixes) {
      const spelled = requestSpelling(prefix)
      if (!reference.under(path, spelled) && reference.under(loose, reference.folded(spelled))) {
        return `the path is spelled like the route ${prefix || '/'}/ only in letter case, trailing dots and spaces, or an NTFS stream suffix`
      }
    }
    if (prefixes.length < 2 || !path.includes('.')) return undefined
    for (const reading of reference.dispatched(loose)) {
      for (const prefix of prefixes) {
        const spelled = requestSpelling(prefix)
        if (!reference.under(path, spelled) && !reference.under(loose, reference.folded(spelled)) && reference.under(reading, reference.folded(spelled))) {
          return `the path reads as one under the route ${prefix || '/'}/ to applications that route by a script's path, a format suffix or the query`
        }
      }
    }
    return undefined
  },
}

/** The payload: `/A/a`, then `.%20` `count` times, then `x`. */
const dotsAndSpaces = (count: number): string => `/A/a${'.%20'.repeat(count)}x`

/** What the edge runs on every target before routing (edgeRewriter's work). */
function edgeWork (target: string): unknown {
  const canonical = canonicalTarget(target)
  return canonical.ok ? prefixSpelling(canonical.url.split('?', 1)[0]!, ['/app', '/admin', '', '/oauth']) : canonical.reason
}

describe('prefixSpelling as a scan', () => {
  const piece = fc.constantFrom('/', 'a', 'A', 'p', 'P', '.', '..', '%20', '%2', '%', '20', '0', 'x', '%20.', '.%20', ':', '$', '::$data', ':$I30:$INDEX_ALLOCATION', ':s:$x')
  const path = fc.array(piece, { maxLength: 12 }).map((parts) => `/${parts.join('')}`)
  const prefix = fc.oneof(fc.constantFrom('', '/app', '/APP', '/a.', '/admin'), fc.array(piece, { maxLength: 4 }).map((parts) => `/${parts.join('')}`))

  it('agrees with the reference, on generated paths and prefixes', () => {
    fc.assert(fc.property(path, fc.array(prefix, { maxLength: 4 }), (p, prefixes) => {
      expect(prefixSpelling(p, prefixes)).toBe(reference.prefixSpelling(p, prefixes))
    }), { numRuns: 2000 })
  })

  it.each([
    ['/APP/x', ['/app']],
    ['/app./x', ['/app']],
    ['/app%20/x', ['/app']],
    ['/app.%20.%20./x', ['/app']],
    ['/app%2/x', ['/app']],
    ['/app%20x/y', ['/app']],
    ['/a/b.', ['/a/b']],
    ['/a/b%20', ['/a/b']],
    ['/.%20', ['']],
    [dotsAndSpaces(50), ['/a/a']],
    [`/app${'.'.repeat(100)}`, ['/app']],
    ['/reportserver/x', ['/ReportServer', '']],
    ['/ReportServer/x', ['/ReportServer', '']],
    ['/CAF%C3%A9/x', ['/café', '']],
  ])('%j against %j answers as the reference', (p, prefixes) => {
    expect(prefixSpelling(p, prefixes)).toBe(reference.prefixSpelling(p, prefixes))
  })
})

describe('the edge\'s cost', () => {
  it.each([
    ['the issue\'s `.%20` run', dotsAndSpaces],
    ['a run of dots', (n: number) => `/A/a${'.'.repeat(3 * n)}x`],
    ['a run of encoded spaces', (n: number) => `/A/a${'%20'.repeat(n)}x`],
    ['many short segments', (n: number) => `/A${'/a.%20'.repeat(n)}`],
  ])('grows linearly with the target: %s (4 times longer costs under 8 times more)', (_name, target) => {
    expect(growth(edgeWork, target(1000), target(4000))).toBeLessThan(8)
  })
})

describe('a real gateway and long hostile targets', () => {
  let nested: NestedRoutes
  let upstream: Upstream
  let port: number

  beforeAll(async () => {
    nested = await startNestedRoutes(['GET /app/*/static/*.css'])
    upstream = nested.upstream
    port = nested.port
  })

  afterAll(async () => {
    await nested?.close()
  })

  /** A target of exactly `bytes` bytes: `head`, `a`s, then as many whole `fill`s as fit. */
  const sized = (head: string, fill: string, bytes: number): string => {
    const count = Math.floor((bytes - head.length) / fill.length)
    return `${head}${'a'.repeat(bytes - head.length - count * fill.length)}${fill.repeat(count)}`
  }

  /** [name, target, status, error code (or undefined: forwarded)] */
  const TABLE: Array<[string, string, number, string | undefined]> = [
    ['the issue\'s payload (15.6 KB)', dotsAndSpaces(3900), 414, 'uri_too_long'],
    ['`.` x 4000 in one segment', `/x/a${'.'.repeat(4000)}`, 200, undefined],
    ['`.` x 4000 then a climb', `/x/a${'.'.repeat(4000)}/..`, 200, undefined],
    ['`..` after `.` x 4000', `/x/${'.'.repeat(4000)}`, 400, 'invalid_request'],
    ['`%20` x 2000 in one segment', `/x/a${'%20'.repeat(2000)}`, 200, undefined],
    ['mixed, 8 KiB - 1', sized('/x/a', '.%20%20..', MAX_TARGET_BYTES - 1), 200, undefined],
    ['mixed, spelled like a route, 8 KiB - 1', sized('/APP/', '.%20%20..', MAX_TARGET_BYTES - 1), 400, 'invalid_request'],
    ['mixed, 8 KiB + 1', sized('/x/a', '.%20%20..', MAX_TARGET_BYTES + 1), 414, 'uri_too_long'],
    ['`.%20` x n, 8 KiB - 1', sized('/x/a', '.%20', MAX_TARGET_BYTES - 1), 200, undefined],
    ['`.%20` x n, 8 KiB + 1', sized('/x/a', '.%20', MAX_TARGET_BYTES + 1), 414, 'uri_too_long'],
    ['a plain path of exactly 8 KiB', sized('/x/', 'a', MAX_TARGET_BYTES), 200, undefined],
    ['a plain path of 8 KiB + 1', sized('/x/', 'a', MAX_TARGET_BYTES + 1), 414, 'uri_too_long'],
    ['a long query makes the target too long', sized('/x/?q=', 'a', MAX_TARGET_BYTES + 1), 414, 'uri_too_long'],
    ['9 KiB reaches the gateway (not Node\'s 431)', sized('/x/', 'a', 9 * 1024), 414, 'uri_too_long'],
    ['a protected path of 8 KiB + 1', sized('/app/', 'a', MAX_TARGET_BYTES + 1), 414, 'uri_too_long'],
    ['a two-`*` public glob on a long path that almost matches', sized('/app/a/static/', 'static/a.cs', MAX_TARGET_BYTES - 1), 401, 'unauthenticated'],
    ['a two-`*` public glob on a long path that matches', sized('/app/a/static/', 'static/a.css', MAX_TARGET_BYTES), 200, undefined],
  ]

  it.each(TABLE)('%s: %#', async (_name, target, status, error) => {
    const before = upstream.seen.length
    const response = await rawRequest(port, target)
    expect(response.status).toBe(status)
    if (error === undefined) {
      expect(upstream.seen.length).toBe(before + 1)
    } else {
      expect(JSON.parse(response.body)).toMatchObject({ error })
      expect(upstream.seen.length).toBe(before)
    }
  })

  it('answers 414 as an HTML page to a browser, without echoing the target', async () => {
    const response = await rawRequest(port, `/x/${'<b>'.repeat(3000)}`, [], { accept: 'text/html' })
    expect(response.status).toBe(414)
    expect(response.headers['content-type']).toMatch(/^text\/html/)
    expect(response.body).toContain('<code>uri_too_long</code>')
    expect(response.body).not.toContain('<b><b>')
  })

  it('answers 414 to an upgrade request with a long target, and closes its socket', async () => {
    const response = await rawRequest(port, sized('/x/', 'a', MAX_TARGET_BYTES + 1), ['Upgrade: websocket', 'Connection: Upgrade', 'Sec-WebSocket-Version: 13', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=='])
    expect(response.status).toBe(414)
    expect(JSON.parse(response.body)).toMatchObject({ error: 'uri_too_long' })
  })

  it('answers /healthz while 40 of the issue\'s payloads arrive at once', async () => {
    const hostile = Array.from({ length: 40 }, async () => await rawRequest(port, dotsAndSpaces(3900)))
    const health = await rawRequest(port, '/healthz')
    expect(health.status).toBe(200)
    expect((await Promise.all(hostile)).map((response) => response.status)).toEqual(Array(40).fill(414))
  })

  it('leaves a target longer than Node\'s header limit (16 KiB) to Node: 431, nothing forwarded', async () => {
    const before = upstream.seen.length
    const response = await rawRequest(port, sized('/x/', 'a', 17 * 1024))
    expect(response.status).toBe(431)
    expect(upstream.seen.length).toBe(before)
  })
})
