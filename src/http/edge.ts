// The edge: every request (and every upgrade request) is made canonical before Fastify routes it,
// through Fastify's `rewriteUrl`, so routing, the access decision and the proxy all read one string
// (see src/config/canonical.ts). A target that cannot be made canonical, or a request with more
// than one Host header or a transfer coding besides chunked, is routed nowhere and answered 400
// `invalid_request` by the first onRequest hook; a target longer than 8 KiB is answered 414
// `uri_too_long` the same way, before anything reads it.
// Everything here is a scan of the client's bytes, never a regular expression: the edge's cost
// is linear in what the client sends.
import type { FastifyInstance, RawRequestDefaultExpression } from 'fastify'
import { GatewayError } from '../errors.js'
import { canonicalTarget, requestSpelling } from '../config/canonical.js'
import { foldable, folded, queryReadings, routedForms } from '../config/path-fold.js'

/**
 * The longest request target the gateway reads, in bytes (Node refuses a raw byte above 0x7F in
 * the target, so its characters are its bytes). Node's own limit is on the whole head (16 KiB by
 * default), so a longer target reaches the edge and is answered 414 there.
 */
export const MAX_TARGET_BYTES = 8192

/** Why the raw request was refused at the edge, kept on it between rewriteUrl and the first hook. */
const REFUSED = Symbol('refused at the edge')

/** What the first hook answers: the catalogue code and the reason in its message. */
interface Refusal { code: 'invalid_request' | 'uri_too_long', reason: string }

type EdgeRequest = RawRequestDefaultExpression & { [REFUSED]?: Refusal, originalUrl?: string }

/** Routed in place of a refused target: the onRequest hook answers before any route runs. */
const REFUSED_PLACEHOLDER = '/'

const TOO_LONG: Refusal = Object.freeze({ code: 'uri_too_long', reason: `the request target is longer than ${MAX_TARGET_BYTES} bytes` })

/**
 * A transfer coding besides `chunked` (`Transfer-Encoding: gzip, chunked`), which Node accepts and
 * hands on chunk-decoded but still coded: forwarded, the upstream would read the coded bytes as the
 * body, since Transfer-Encoding is hop-by-hop. Returns the coding, or undefined.
 */
function otherTransferCoding (header: string | undefined): string | undefined {
  if (header === undefined) return undefined
  for (const coding of header.split(',')) {
    const name = coding.trim().toLowerCase()
    if (name !== 'chunked') return name === '' ? '(an empty one)' : name
  }
  return undefined
}

function hostHeaders (rawHeaders: string[]): number {
  let count = 0
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!
    if (name.length === 4 && name.toLowerCase() === 'host') count++
  }
  return count
}

/** Whether `path` is `prefix` or below it, as a route's prefix matches (`/app` and `/app/...`). */
function under (path: string, prefix: string): boolean {
  return prefix === '' || path === prefix || (path.startsWith(prefix) && path[prefix.length] === '/')
}

/**
 * Routes' prefixes a path may be read as by a case-insensitive upstream, though the router (which
 * compares exactly) does not match it: `/ADMIN/x` and `/admin./x` are `/admin/x` to IIS or Express,
 * and `/reportserver/x` is a route `/ReportServer/`'s. Judging such a path by the route that does
 * match it (a public `/` route, say) would let it past a protected prefix, so it is refused.
 * Returns why, or undefined.
 */
export function prefixSpelling (path: string, prefixes: readonly string[], mayPass?: MayPass, query = ''): string | undefined {
  return spellingCheck(prefixes, mayPass)(path, query)
}

/**
 * Whether a request the router gives to the route at prefix `routed` may go on though it reads as a
 * path under the route at `loose`: that route is no better protected than the router's (the same
 * sign-in, rules, step-up...), so reading the path either way admits the same people.
 */
export type MayPass = (routed: string, loose: string) => boolean

const NEVER: MayPass = () => false

/**
 * prefixSpelling over `prefixes`, each read once: in the edge's spelling (`/café` is the request
 * path `/caf%C3%A9`) and folded. A path with nothing to fold (most) is checked only against the
 * prefixes that have: against the others, reading both folded changes nothing.
 */
function spellingCheck (prefixes: readonly string[], mayPass: MayPass = NEVER): (path: string, query: string) => string | undefined {
  const read = prefixes.map((name) => {
    const prefix = requestSpelling(name)
    return { name, prefix, loose: folded(prefix), foldable: foldable(prefix) }
  })
  const foldablePrefixes = read.filter((prefix) => prefix.foldable)
  return (path, query) => {
    const pathFoldable = foldable(path)
    const list = pathFoldable ? read : foldablePrefixes
    const loose = pathFoldable ? folded(path) : path
    for (const { name, prefix, loose: loosePrefix } of list) {
      if (!under(path, prefix) && under(loose, loosePrefix)) {
        const routed = routedPrefix(read, path)
        if (routed !== undefined && mayPass(routed, name)) continue
        return `the path is spelled like the route ${name || '/'}/ only in letter case, trailing dots and spaces, or an NTFS stream suffix`
      }
    }
    return read.length > 1 ? dispatchedElsewhere(read, path, loose, query, mayPass) : undefined
  }
}

/**
 * Whether routers that dispatch a path to another action's read `path` as one under another route's
 * prefix than the router gives it: PATH_INFO and a format suffix (routedForms: `/index.php/admin/x`
 * and `/admin.json` are `/admin/...` to Laravel and Rails), a front controller's route in the query
 * starting with `/` (queryReadings: `/?/admin/x`). A public `/` beside a protected `/admin/` on one
 * upstream would pass them (an outside tester's finding), so they are refused as a case spelling
 * is, unless that route is no better protected (`mayPass`). The reason names no part of the query.
 * Only a path with a dot, or a query, is read.
 */
function dispatchedElsewhere (read: ReadonlyArray<{ name: string, prefix: string, loose: string }>, path: string, loose: string, query: string, mayPass: MayPass): string | undefined {
  if (!path.includes('.') && query === '') return undefined
  const queried = query === '' ? [] : queryReadings(`${path}?${query}`, false)
  // A `?/` path the edge cannot tell (dot or empty segments, which CodeIgniter drops, an encoded
  // `/`) could be any route's: refused, as the rules refuse it (a re-reading's finding).
  if (queried === undefined) return 'the query names a path under the route a front controller would read in its own way'
  const readings = [...routedForms(loose), ...queried.flatMap((reading) => { const again = folded(reading); return [again, ...routedForms(again)] })]
  for (const reading of readings) {
    for (const { name, prefix, loose: loosePrefix } of read) {
      if (under(path, prefix) || under(loose, loosePrefix) || !under(reading, loosePrefix)) continue
      const routed = routedPrefix(read, path)
      if (routed !== undefined && mayPass(routed, name)) continue
      return `the path reads as one under the route ${name || '/'}/ to applications that route by a script's path, a format suffix or the query`
    }
  }
  return undefined
}

/** The prefix (as named) the router gives `path` to: the longest that `path` is under as it is spelled. */
function routedPrefix (read: ReadonlyArray<{ name: string, prefix: string }>, path: string): string | undefined {
  let found: { name: string, prefix: string } | undefined
  for (const entry of read) {
    if (under(path, entry.prefix) && (found === undefined || entry.prefix.length > found.prefix.length)) found = entry
  }
  return found?.name
}

/**
 * Fastify's `rewriteUrl`: the canonical target, or a placeholder with the refusal noted on the
 * request. `routePrefixes`: the configured routes' paths (without their trailing `/`), which a
 * target may not spell differently (see prefixSpelling).
 */
export function edgeRewriter (routePrefixes: readonly string[], mayPass?: MayPass): (raw: RawRequestDefaultExpression) => string {
  const spelling = spellingCheck(routePrefixes.map((path) => path.replace(/\/+$/, '')), mayPass)
  return (raw) => {
    const request = raw as EdgeRequest
    if (request[REFUSED] !== undefined) return REFUSED_PLACEHOLDER
    const sent = request.url ?? ''
    if (sent.length > MAX_TARGET_BYTES) {
      request[REFUSED] = TOO_LONG
      return REFUSED_PLACEHOLDER
    }
    const target = canonicalTarget(sent)
    let refusal = target.ok ? undefined : target.reason
    if (refusal === undefined && hostHeaders(request.rawHeaders) > 1) refusal = 'the request has more than one Host header'
    const coding = refusal === undefined ? otherTransferCoding(request.headers['transfer-encoding']) : undefined
    if (coding !== undefined) refusal = `its Transfer-Encoding names ${coding.slice(0, 64)}, which the gateway does not decode: send the body chunked or with a Content-Length`
    if (refusal === undefined) {
      const url = (target as { url: string }).url
      const queryAt = url.indexOf('?')
      refusal = queryAt === -1 ? spelling(url, '') : spelling(url.slice(0, queryAt), url.slice(queryAt + 1))
      if (refusal === undefined) return url
    }
    request[REFUSED] = { code: 'invalid_request', reason: refusal }
    return REFUSED_PLACEHOLDER
  }
}

/** Marks a request the edge cannot serve before it is routed (a malformed target, an upgrade with a body): answered 400 `invalid_request` with `reason`. */
export function rejectMalformed (raw: RawRequestDefaultExpression, reason: string): void {
  (raw as EdgeRequest)[REFUSED] = { code: 'invalid_request', reason }
}

/** The target as the client sent it, for the log line of a request the edge rejected as malformed (its query is dropped there). */
export function malformedTarget (raw: RawRequestDefaultExpression): string | undefined {
  const request = raw as EdgeRequest
  return request[REFUSED] === undefined ? undefined : request.originalUrl
}

/** The first onRequest hook, on every route and the 404 handler: answers what the edge refused (400, or 414 for a long target). */
export function registerEdge (app: FastifyInstance): void {
  app.addHook('onRequest', (request, _reply, done) => {
    const refusal = (request.raw as EdgeRequest)[REFUSED]
    if (refusal === undefined) return done()
    done(new GatewayError(refusal.code, `The request cannot be served: ${refusal.reason}.`))
  })
}
