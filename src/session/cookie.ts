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

/** The value of the first cookie called `name` in a Cookie header (RFC 6265 §5.4), undefined if none. */
export function cookieValue (header: string | undefined, name: string): string | undefined {
  if (!header) return undefined
  let start = 0
  while (start < header.length) {
    let end = header.indexOf(';', start)
    if (end === -1) end = header.length
    const eq = header.indexOf('=', start)
    if (eq !== -1 && eq < end && header.slice(start, eq).trim() === name) return header.slice(eq + 1, end).trim()
    start = end + 1
  }
  return undefined
}
