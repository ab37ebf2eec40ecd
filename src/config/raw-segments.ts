// Whether a raw path (forward-auth's X-Forwarded-Uri, a path a front controller takes from the
// query: access/rules.ts) has the segments of its canonical form (canonical.ts). The proxy in front passes the raw target to the application, which
// resolves dot and empty segments its own way or not at all (Express serves
// /admin/users/../../pub from the router at /admin), so where canonicalisation would move a
// segment, the canonical path is not what the application reads: forward-auth cannot tell the path.

/**
 * Whether making the raw path canonical would change its segments: a `.` or `..` segment (raw or
 * percent-encoded, in either case) or an empty one (`//`). Encoded unreserved characters (`%61`)
 * and characters outside `pchar` (`{`, encoded as `%7B`) are not counted: they leave every segment
 * where it is, with the same decoded text.
 */
export function resolvesSegments (uri: string): boolean {
  const query = uri.indexOf('?')
  const segments = (query === -1 ? uri : uri.slice(0, query)).split('/')
  // segments[0] is the empty string before the leading `/`; the last may be empty (a trailing `/`).
  return segments.some((segment, i) => {
    if (i === 0) return false
    const dots = segment.replace(/%2e/gi, '.')
    return dots === '.' || dots === '..' || (segment === '' && i < segments.length - 1)
  })
}
