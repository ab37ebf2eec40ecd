// Which site made the browser send a request (Fetch Metadata's Sec-Fetch-Site, else Origin), in
// the two strengths the gateway needs: `fromAnotherSite` for what a person's own click may do
// (sign out, revoke: a request with neither header counts as ours), and `fromOwnPage` for what must
// be proven ours (a form kept through a sign-in and later delivered as the person).
// @see https://www.w3.org/TR/fetch-metadata/#sec-fetch-site-header
import type { FastifyRequest } from 'fastify'

/**
 * A request another site made the browser send (login/logout CSRF): Sec-Fetch-Site other than
 * same-origin or none, or an Origin that is not `ownOrigin` ({base_url}'s). Neither header counts
 * as our own. The rule of sign-out and of revoking a session.
 */
export function fromAnotherSite (request: FastifyRequest, ownOrigin: string): boolean {
  const site = request.headers['sec-fetch-site']
  if (site !== undefined && site !== 'same-origin' && site !== 'none') return true
  const origin = request.headers.origin
  return origin !== undefined && origin !== ownOrigin
}

/**
 * A request of one of the gateway's own pages, proven: `Sec-Fetch-Site: same-origin`, or, from a
 * browser that does not send it, an `Origin` that is `ownOrigin`. Another site's form (which
 * arrives without the SameSite=Lax session cookie, so as "no session") must never be kept: after
 * the person's sign-in it would be delivered as theirs (cross-site request forgery).
 */
export function fromOwnPage (request: FastifyRequest, ownOrigin: string): boolean {
  const site = request.headers['sec-fetch-site']
  return site === undefined ? request.headers.origin === ownOrigin : site === 'same-origin'
}

/** What a prefetch or a prerender says of itself: Sec-Purpose (Chromium's `<link rel=prefetch>` and speculation rules), Purpose, or Firefox's older X-Moz. */
const PREFETCH = /prefetch|prerender/i

/**
 * A GET the browser made for something a page embeds (Fetch Metadata's Sec-Fetch-Dest: an image, a
 * script, a style sheet, a frame...), or ahead of the person (a prefetch or prerender, which a
 * page's `<link rel=prefetch>` or speculation rules ask for: Sec-Purpose), not a page the person
 * opened or a script's own request (`document`, `empty`): an `<img src="/oauth/logout/">` in an
 * application's user content signed its every reader out, and a prefetch of it too (outside
 * testers' findings). From a browser that sends no Fetch Metadata (Safari before 16.4), an image
 * is told by its Accept; anything else, not known to be one.
 * @see https://www.w3.org/TR/fetch-metadata/#sec-fetch-dest-header
 * @see https://wicg.github.io/nav-speculation/prefetch.html#sec-purpose-header
 */
export function embedded (request: FastifyRequest): boolean {
  const { headers } = request
  for (const purpose of [headers['sec-purpose'], headers.purpose, headers['x-moz']]) {
    if (typeof purpose === 'string' && PREFETCH.test(purpose)) return true
  }
  const dest = headers['sec-fetch-dest']
  if (dest === undefined) return /^image\//i.test(headers.accept ?? '')
  return dest !== 'document' && dest !== 'empty'
}
