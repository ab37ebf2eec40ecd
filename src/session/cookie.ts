// The session cookie itself: its attributes, and its value read from a Cookie header (without
// parsing every cookie: proxied requests pay for this on every request).
import type { SessionConfig } from '../config/types.js'

/**
 * The attributes of the session cookie (RFC 6265 §4.1.2), in the shape cookie serializers take.
 * @see https://www.rfc-editor.org/rfc/rfc6265#section-4.1.2
 */
export interface CookieOptions {
  readonly path: string
  readonly httpOnly: boolean
  readonly sameSite: 'lax'
  readonly secure: boolean
  readonly domain?: string
}

/** The session cookie's attributes for `config`; the same object for every reply. */
export function sessionCookieOptions (config: SessionConfig): CookieOptions {
  return Object.freeze({
    path: '/',
    httpOnly: true,
    sameSite: 'lax',
    secure: config.cookieSecure,
    // session.cookieDomain: hosts under one parent domain share the sign-in (forward-auth).
    ...(config.cookieDomain ? { domain: config.cookieDomain } : {}),
  })
}

/**
 * The value of the cookie called `name` in a Cookie header (RFC 6265 §5.4): undefined if none, and
 * if the header names it twice with two values. Under a shared `session.cookieDomain` a sibling host
 * can plant its own session cookie with a longer Path, which browsers send first: read first-wins,
 * the person's requests there went on as the planter, with no sign of it (an outside tester's
 * finding). Which of the two is the person's cannot be told, so neither opens a session.
 */
export function cookieValue (header: string | undefined, name: string): string | undefined {
  if (!header) return undefined
  let found: string | undefined
  let start = 0
  // The next `=`, looked for again only once passed: pieces without one do not each scan the rest of
  // the header for it (an outside tester's finding: `a;a;...;x=1` cost the square of its length).
  let eq = -1
  while (start < header.length) {
    let end = header.indexOf(';', start)
    if (end === -1) end = header.length
    if (eq < start) eq = header.indexOf('=', start)
    if (eq === -1) break
    if (eq < end && header.slice(start, eq).trim() === name) {
      const value = header.slice(eq + 1, end).trim()
      if (found !== undefined && found !== value) return undefined
      found = value
    }
    start = end + 1
  }
  return found
}

/**
 * The session cookie's attributes without its Domain: where `session.cookieDomain` is set, the
 * cookie an earlier configuration left on the gateway's own host, cleared beside every cookie set
 * or cleared, so that it never stands beside the shared one as a second value (which opens nothing).
 */
export function hostOnly (options: CookieOptions): CookieOptions | undefined {
  if (options.domain === undefined) return undefined
  const { domain: _domain, ...rest } = options
  return rest
}
