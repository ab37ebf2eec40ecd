// Forms that survive a sign-in (`routes[].preserveBody`), on the wire: where a protected route would
// send a browser to sign in, its form POST is kept (oauth/preserved-body.ts) under a random token in
// the form cookie; the callback answers with a same-origin page whose script re-submits an empty
// form (one marker field) to the form's own path; that POST, now signed in, takes the kept body and
// the upstream receives it, with its content type, instead of the marker.
//
// Why a self-submitting page and a server-side body: a page that re-posted the fields could not
// bring back a multipart file or the exact bytes, and a replay from the callback itself would leave
// the browser on the callback's URL. This way the browser ends on the form's URL with the
// upstream's own answer, and the bytes sent are the bytes typed. A reload re-posts the marker, finds
// nothing, and gets a 400 page: never an empty POST upstream, never a second delivery.
import { randomBytes } from 'node:crypto'
import { Readable } from 'node:stream'
import { fastifyCookie } from '@fastify/cookie'
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestAsyncHookHandler, preParsingAsyncHookHandler } from 'fastify'
import type { GatewayConfig } from '../config/types.js'
import { formatSize } from '../config/units.js'
import { GatewayError } from '../errors.js'
import { escapeHtml, PAGE_HEADERS } from '../http/pages.js'
import { fromOwnPage } from '../http/request-site.js'
import { formOwner, parseFormToken, type FormOwner, type PreservedBodies } from '../oauth/preserved-body.js'
import type { Sessions } from '../session/session.js'
import { cookieNames } from '../oauth/urls.js'
import type { Logger } from '../ops/logger.js'
import { nodeTimers, type Timers } from '../ops/clock.js'
import { mustArrive } from '../proxy/request-body.js'

/** The self-submitted form's one field: what the replay POST carries instead of the kept body. */
export const REPLAY_BODY = Buffer.from('gateway-preserved-form=1')

const FORM_TYPES = new Set(['application/x-www-form-urlencoded', 'multipart/form-data'])

/** A Content-Type longer than this is no browser form's (a multipart boundary is at most 70 characters). */
const CONTENT_TYPE_MAX = 256

/** The form's media type, lower case, when it is one a browser form sends; else undefined. */
export function formMediaType (contentType: string | undefined): string | undefined {
  if (contentType === undefined || contentType.length > CONTENT_TYPE_MAX) return undefined
  const type = contentType.split(';', 1)[0]!.trim().toLowerCase()
  return FORM_TYPES.has(type) ? type : undefined
}

/** The request's whole body (the edge has bounded it by its Content-Length). */
async function readBody (stream: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of stream) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk)
  return Buffer.concat(chunks)
}

/**
 * The body's first bytes, at least `count` of them unless it is shorter (then all of it), and the
 * whole body as a stream to send on: those bytes, then the rest as it comes. Those bytes must
 * arrive within `timeoutMs` (the route's timeout, as the upstream would have waited for them), else
 * 400 and the connection closed: a client that stalls does not hold its socket until Node's own
 * requestTimeout.
 */
async function firstBytes (stream: NodeJS.ReadableStream, count: number, timeoutMs: number, timers: Timers): Promise<{ head: Buffer, whole: NodeJS.ReadableStream }> {
  const chunks = stream[Symbol.asyncIterator]()
  const read: Buffer[] = []
  let length = 0
  let ended = false
  let cancel = (): void => {}
  const late = new Promise<never>((_resolve, reject) => { cancel = timers.setTimeout(() => { reject(new Error('late')) }, timeoutMs) })
  try {
    while (length < count && !ended) {
      const next = await Promise.race([chunks.next(), late])
      if (next.done === true) {
        ended = true
      } else {
        const chunk: Buffer = typeof next.value === 'string' ? Buffer.from(next.value) : next.value
        read.push(chunk)
        length += chunk.length
      }
    }
  } catch (error) {
    throw new GatewayError('invalid_request', `The request cannot be served: its body did not arrive within ${timeoutMs} ms, or ended before it was whole.`, { cause: error })
  } finally {
    cancel()
  }
  const head = Buffer.concat(read)
  if (ended) return { head, whole: Readable.from([head]) }
  return { head, whole: Readable.from((async function * () { yield head; yield * { [Symbol.asyncIterator]: () => chunks } })()) }
}

/** A browser navigation of one of the gateway's pages (a form submitted in the page, not XHR or fetch) with a form's body. */
function formNavigation (request: FastifyRequest, ownOrigin: string): boolean {
  const { headers } = request
  const mode = headers['sec-fetch-mode']
  if (request.method !== 'POST' || (mode !== undefined && mode !== 'navigate') || !fromOwnPage(request, ownOrigin)) return false
  return formMediaType(headers['content-type']) !== undefined
}

/** Such a form whose body may be kept: its length given, and within `limit`. */
function keepable (request: FastifyRequest, limit: number): boolean {
  const { headers } = request
  if (headers['transfer-encoding'] !== undefined) return false
  const length = headers['content-length']
  return length !== undefined && /^\d{1,9}$/.test(length) && Number(length) <= limit
}

function formTooLarge (limit: number): string {
  return `Your session had ended, and this form is larger than the ${formatSize(limit)} this application keeps through a sign-in, so it was not sent. Go back to copy what you typed, sign in, then send it again.`
}

const ALREADY_DELIVERED = 'This form was already delivered after your sign-in (or waited longer than a sign-in may take): it is not sent again. Open the page again to fill in a new one.'

/** The page the callback answers with: it submits the marker to the form's path at once. */
function replayPage (path: string, nonce: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Sending your form</title></head><body>
<form method="post" action="${escapeHtml(path)}"><input type="hidden" name="gateway-preserved-form" value="1">
<p>You are signed in. Sending the form you filled in before…</p>
<noscript><button type="submit">Send the form</button></noscript></form>
<script nonce="${nonce}">document.forms[0].submit()</script>
</body></html>
`
}

/**
 * What keeping a body costs of the sign-in budget: one sign-in request per 64 KiB begun. The bytes
 * one client address can keep waiting are then bounded by its budget (at the default 600/min and
 * a 5 minute `state.ttl`, about 190 MiB), whatever a route's `preserveBody` size.
 */
const CHARGE_BYTES = 64 * 1024

/** What the proxy's routes and the sign-in callback call to keep, offer and deliver a form. */
export class FormReplay {
  private readonly cookieName: string
  private readonly ownOrigin: string
  private readonly cookie: { path: string, httpOnly: true, sameSite: 'lax', secure: boolean, maxAge: number }

  constructor (
    private readonly bodies: PreservedBodies,
    /** The sessions: which one a marker POST comes in (its cookie's store id). */
    private readonly sessions: Pick<Sessions, 'idOf'>,
    config: Pick<GatewayConfig, 'session' | 'server'>,
    private readonly log: Logger,
    /** The sign-in endpoints' budget: each kept body is charged to it. */
    private readonly signinLimit?: onRequestAsyncHookHandler,
    /** The timers of the deadline on a body read to tell the marker. */
    private readonly timers: Timers = nodeTimers
  ) {
    this.cookieName = cookieNames(config).form
    this.ownOrigin = new URL(config.server.baseUrl).origin
    // The flow cookie's attributes, but Path=/: the replay POST goes to the route's own path.
    this.cookie = { path: '/', httpOnly: true, sameSite: 'lax', secure: config.session.cookieSecure, maxAge: Math.ceil(bodies.ttlMs / 1000) }
  }

  private token (request: FastifyRequest): string | undefined {
    const header = request.headers.cookie
    return header === undefined ? undefined : parseFormToken(fastifyCookie.parse(header)[this.cookieName])
  }

  /**
   * Before the redirect to sign in (to `loginUrl`): keeps the body of a browser's form POST within
   * `limit` and sets the form cookie; such a form over `limit` (or of no stated length) is a 401
   * page that says it was not sent; anything else is left as it is (the body is not read). Resolves
   * with the binding of the sign-in flow the kept body waits for (the login address carries it), if one was kept.
   */
  async keep (app: FastifyInstance, request: FastifyRequest, reply: FastifyReply, limit: number, loginUrl: string): Promise<string | undefined> {
    if (!formNavigation(request, this.ownOrigin)) return undefined
    // Sent to sign in, the person would lose what they typed without a word: the page says so, and
    // Back still has it (an outside tester's finding).
    if (!keepable(request, limit)) throw new GatewayError('unauthenticated', formTooLarge(limit), { details: { loginUrl: new URL(loginUrl, this.ownOrigin).href } })
    await this.charge(app, request, reply)
    const body = await readBody(request.raw)
    // The marker met an ended session: the body kept before still waits, under the same cookie and binding.
    if (body.equals(REPLAY_BODY)) {
      const token = this.token(request)
      return token === undefined ? undefined : await this.bodies.binding(token, request.url)
    }
    const { token, flow } = await this.bodies.keep({ method: request.method, path: request.url, contentType: request.headers['content-type']!, body })
    reply.header('set-cookie', fastifyCookie.serialize(this.cookieName, token, this.cookie))
    request.log.info({ bytes: body.length }, 'form kept through the sign-in')
    return flow
  }

  /**
   * Charges the sign-in budget one request per {@link CHARGE_BYTES} begun of the body (429 once it
   * is spent). @fastify/rate-limit counts a request once however often its hook runs (a mark on
   * the request), so each further charge is made for a view of the request of its own
   * (`Object.create`: the same address, headers and reply, without the mark); the preserve-body
   * tests check that a body over 64 KiB spends two.
   */
  private async charge (app: FastifyInstance, request: FastifyRequest, reply: FastifyReply): Promise<void> {
    if (this.signinLimit === undefined) return
    const charges = Math.max(1, Math.ceil(Number(request.headers['content-length']) / CHARGE_BYTES))
    // The views first: made after the request's own charge they would inherit its mark.
    for (let charged = 1; charged < charges; charged++) await this.signinLimit.call(app, Object.create(request) as FastifyRequest, reply)
    await this.signinLimit.call(app, request, reply)
  }

  /**
   * The sign-in callback's last step: when this browser's form cookie holds a body kept for `next`
   * that waits for this flow (`form`, the binding its signed state carried), answers with the page
   * that submits it, and true; else false (the caller redirects to `next`).
   */
  async offer (request: FastifyRequest, reply: FastifyReply, next: string, form: string | undefined, owner: FormOwner): Promise<boolean> {
    const token = this.token(request)
    if (token === undefined || form === undefined) return false
    try {
      if (!(await this.bodies.offer(token, next, form, owner))) return false
    } catch (error) {
      // The sign-in itself succeeded: the browser goes on to `next`, without the form.
      this.log.warn({ err: error }, 'a kept form could not be read after the sign-in')
      return false
    }
    const nonce = randomBytes(16).toString('base64')
    // A page of the gateway's own (PAGE_HEADERS) that runs its one script, by a nonce. No
    // form-action, as on the other pages: Chromium would also hold the application's answer to the
    // POST to it, and a redirect to another origin would be blocked (a re-reading's point).
    await reply.code(200)
      .header('content-type', 'text/html; charset=utf-8')
      .header('cache-control', 'no-store')
      .headers(PAGE_HEADERS)
      .header('content-security-policy', `${PAGE_HEADERS['content-security-policy']}; script-src 'nonce-${nonce}'`)
      // The form's POST carries the gateway's origin (`Origin`, and `Referer` without a path), as the
      // person's own submission did: an application's CSRF check of the origin accepts it, and the
      // callback's address (its code and state) is never sent on.
      .header('referrer-policy', 'origin')
      .send(replayPage(next, nonce))
    return true
  }

  /**
   * The preParsing hook of a preserveBody route whose sign-in provider is `provider`: an allowed POST
   * whose body is the marker takes the kept body (once, in the session it was offered to or another
   * of that person's) and sends it upstream in the marker's place, with its content type; without
   * one it is refused (400). Any other body streams on untouched, but its first bytes (a body as long
   * as the marker, or one of no stated length), read and given back.
   */
  deliverer (route: { provider: string | undefined, timeoutMs: number }): preParsingAsyncHookHandler {
    return async (request, reply, payload) => await this.deliver(request, reply, payload, route)
  }

  private async deliver (...[request, reply, payload, { provider, timeoutMs }]: [...Parameters<preParsingAsyncHookHandler>, { provider: string | undefined, timeoutMs: number }]): Promise<NodeJS.ReadableStream> {
    const { headers } = request
    // A body of no stated length (chunked) may be the marker too: its first bytes tell; and a length
    // is a number (Node takes `024` as 24 bytes). Both outside testers' findings.
    const length = headers['content-length']
    if (request.method !== 'POST' || request.audit?.decision !== 'allow' || (length !== undefined && Number(length) !== REPLAY_BODY.length) ||
      formMediaType(headers['content-type']) !== 'application/x-www-form-urlencoded') return payload
    const { head, whole } = await firstBytes(payload, REPLAY_BODY.length + 1, timeoutMs, this.timers).catch((error: unknown) => {
      reply.header('connection', 'close')
      throw error
    })
    if (!head.equals(REPLAY_BODY)) return whole
    // Only the gateway's own page submits the marker (a browser says so; a request without the header counts as same-origin).
    const site = headers['sec-fetch-site']
    const token = site === undefined || site === 'same-origin' ? this.token(request) : undefined
    const session = this.sessions.idOf(request.headers.cookie)
    const allowed = request.allowed
    const kept = token === undefined || session === undefined || allowed === undefined
      ? undefined
      : await this.bodies.take(token, request.url, formOwner(session, allowed.provider ?? provider ?? '', allowed.identity))
    // Cleared once the take has answered: a store that failed keeps the form for the reload.
    if (token !== undefined) reply.header('set-cookie', fastifyCookie.serialize(this.cookieName, '', { ...this.cookie, maxAge: 0 }))
    if (kept === undefined || kept.method !== request.method) throw new GatewayError('invalid_request', ALREADY_DELIVERED)
    // The forwarder copies the request's headers: the kept body's type and length replace the marker's.
    request.raw.headers['content-type'] = kept.contentType
    request.raw.headers['content-length'] = String(kept.body.length)
    delete request.raw.headers['transfer-encoding']
    request.log.info({ bytes: kept.body.length }, 'kept form delivered after the sign-in')
    // Taken once: a person who leaves before the answer has still sent it (a reload says so).
    mustArrive(request.raw)
    return Readable.from([kept.body])
  }
}
