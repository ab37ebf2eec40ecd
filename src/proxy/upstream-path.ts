// Where a route's request goes upstream, and where the upstream's relative Location points back to:
// one mapping, both ways. The path is the edge's canonical one (src/config/canonical.ts: no dot
// segments, no encoded `/`), under the route's path (routing saw to it): the route's path is
// replaced by its rewritePrefix (by default itself) and nothing else changes. The query is not
// read here at all: forward.ts sends the request target's own, so the upstream gets the query the
// gate judged, byte for byte. A Location under the rewritePrefix comes back under the route's
// path, as nginx's `proxy_redirect default` maps it; an absolute or protocol-relative one passes as
// the upstream wrote it.
// @see https://nginx.org/en/docs/http/ngx_http_proxy_module.html#proxy_redirect

import { requestSpelling } from '../config/canonical.js'

export interface UpstreamPaths {
  /** The upstream path of a canonical path under the route (no query). */
  path (canonicalPath: string): string
  /** An upstream's Location as the client gets it. */
  location (value: string): string
}

/** A prefix without its trailing slashes: `/` is the empty prefix. */
const bare = (prefix: string): string => prefix.replace(/\/+$/, '')

/** Whether `value` is `prefix`, or `prefix` followed by a path, query or fragment. */
function startsUnder (value: string, prefix: string): boolean {
  if (!value.startsWith(prefix)) return false
  const next = value[prefix.length]
  return next === undefined || next === '/' || next === '?' || next === '#'
}

/**
 * @param routePath the route's `path` (as the config holds it: `/app`, or `/`)
 * @param rewritePrefix the route's `rewritePrefix`; absent: the path is forwarded unchanged
 */
export function upstreamPaths (routePath: string, rewritePrefix: string | undefined): UpstreamPaths {
  // The route's path as the canonical paths under it spell it (`/ü` is `/%C3%BC`).
  const from = bare(requestSpelling(routePath))
  const to = bare(rewritePrefix ?? requestSpelling(routePath))
  if (from === to) return { path: (canonicalPath) => canonicalPath, location: (value) => value }
  return {
    path: (canonicalPath) => `${to}${canonicalPath.slice(from.length)}` || '/',
    location: (value) => {
      // Only a path on the upstream's own host is the upstream's to map (not `//host/...`).
      if (!value.startsWith('/') || value.startsWith('//') || !startsUnder(value, to)) return value
      const mapped = `${from}${value.slice(to.length)}` || '/'
      // `/app//evil.example/x` is a path on the upstream's host; cut to `//evil.example/x` it would
      // lead a browser to another host (`/\\` too: browsers read `\\` as `/`; and `/<TAB>/`, since
      // they remove tabs and line breaks from a URL before reading it). Such a one passes as written.
      const read = mapped.replace(/[\t\n\r]/g, '')
      return read.startsWith('//') || read.startsWith('/\\') ? value : mapped
    },
  }
}
