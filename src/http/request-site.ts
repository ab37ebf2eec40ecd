// Which site made the browser send a request (Fetch Metadata's Sec-Fetch-Site, else Origin), in
// the two strengths the gateway needs: `fromAnotherSite` for what a person's own click may do
// (sign out, revoke: a request with neither header counts as ours), and `fromOwnPage` for what must
// be proven ours (a form kept through a sign-in and later delivered as the person).
// @see https://www.w3.org/TR/fetch-metadata/#sec-fetch-site-header
import type { FastifyReply, FastifyRequest } from 'fastify'
import { GatewayError } from '../errors.js'

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
 * The device page's code entry, refused before the agents' authorization server reads it when it
 * comes from another site's page: it would spend the person's budget of guesses.
 */
export function checkCodeEntry (request: FastifyRequest, ownOrigin: string): void {
  if (!fromOwnPage(request, ownOrigin)) throw new GatewayError('forbidden', 'A device code is entered only on this gateway\'s own page.')
}

/** What a prefetch or a prerender says of itself: Sec-Purpose (Chromium's `<link rel=prefetch>` and speculation rules), Purpose, or Firefox's older X-Moz. */
const PREFETCH = /prefetch|prerender/i

/** A request the browser made ahead of the person (a prefetch or prerender a page asked for). */
export function ahead (request: FastifyRequest): boolean {
  const { headers } = request
  return [headers['sec-purpose'], headers.purpose, headers['x-moz']].some((purpose) => typeof purpose === 'string' && PREFETCH.test(purpose))
}

/**
 * The answer of a sign-in or sign-out address to a prefetch or prerender: 503, empty and not
 * stored, which a browser does not use, so that the person's click then asks itself. A page in its
 * place was shown for the click (speculation rules use a 2xx prefetch: a re-reader's finding).
 */
export async function refuseAhead (reply: FastifyReply): Promise<FastifyReply> {
  return await reply.code(503).header('cache-control', 'no-store').send()
}

/**
 * A GET the browser made for something a page embeds (Fetch Metadata's Sec-Fetch-Dest: an image, a
 * script, a style sheet, a frame...), or ahead of the person (a prefetch or prerender, which a
 * page's `<link rel=prefetch>` or speculation rules ask for: Sec-Purpose), not a page the person
 * opened or a script's own request (`document`, `empty`): an `<img src="/oauth/logout/">` in an
 * application's user content signed its every reader out, and a prefetch of it too (outside
 * testers' findings). From a browser that sends no Fetch Metadata (Safari before 16.4), an image
 * is told by its Accept; anything else, not known to be one. A prefetch is answered apart
 * ({@link ahead}).
 * @see https://www.w3.org/TR/fetch-metadata/#sec-fetch-dest-header
 * @see https://wicg.github.io/nav-speculation/prefetch.html#sec-purpose-header
 */
export function embedded (request: FastifyRequest): boolean {
  if (ahead(request)) return true
  const { headers } = request
  const dest = headers['sec-fetch-dest']
  if (dest === undefined) return /^image\//i.test(headers.accept ?? '')
  if (dest === 'document') return false
  // A script's own fetch: cors or same-origin mode, and no Origin on a same-origin GET. A page's
  // `<link rel=preload as=fetch>` is `empty` too, but no-cors, or cors with an Origin (a re-reader's
  // finding: it signed its reader out as the image did).
  const mode = headers['sec-fetch-mode']
  return dest !== 'empty' || !(mode === 'cors' || mode === 'same-origin') || headers.origin !== undefined
}
