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

/**
 * A GET the browser made for something a page embeds (Fetch Metadata's Sec-Fetch-Dest: an image, a
 * script, a style sheet, a frame...), not a page the person opened or a script's own request
 * (`document`, `empty`): an `<img src="/oauth/logout/">` in an application's user content signed
 * its every reader out (an outside tester's finding). Without the header, not known to be one.
 * @see https://www.w3.org/TR/fetch-metadata/#sec-fetch-dest-header
 */
export function embedded (request: FastifyRequest): boolean {
  const dest = request.headers['sec-fetch-dest']
  return dest !== undefined && dest !== 'document' && dest !== 'empty'
}
