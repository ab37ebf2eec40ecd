// GET and POST /oauth/logout/ (the session ends here, then at the providers that can sign out), and
// GET /oauth/logout/<provider>/, where a provider sends the browser back after its own sign-out.
// A sign-out another site asked for gets a confirmation page instead (login/logout CSRF). With
// `switch=<provider>` ("Use another account", offered by the 403 page) the sign-out ends with a new
// sign-in there that asks the person to choose the account (src/routes/sign-in-endpoints.ts). With
// `everywhere=1`, every other session of the same person ends too (src/routes/sessions.ts); that is
// only ever a POST: a GET naming `everywhere` gets the confirmation page.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { wantsHtml } from '../http/error-handler.js'
import { sendUnframed, signOutConfirmPage, signedOutPage, type SignedOut } from '../http/pages.js'
import { ahead, embedded, fromAnotherSite, refuseAhead } from '../http/request-site.js'
import { endSession } from '../http/session-cookie.js'
import { unknownProvider } from '../errors.js'
import { safeNext } from '../oauth/urls.js'
import type { Session } from '../session/record.js'
import type { OAuthContext } from './oauth-context.js'
import { beginSignIn } from './sign-in-endpoints.js'

/** The sign-out's parameters, from the form or the query: where to go, and "Use another account". */
interface SignOutParameters {
  next?: unknown
  switch?: unknown
  /** `1`: sign out everywhere (every other session of the same person too). */
  everywhere?: unknown
}

/**
 * Sign out everywhere: every other session of the person `session` signs in as (the same `sub` at
 * any of its providers) ends, on every instance; the caller ends `session` itself.
 */
async function endOthers ({ personIndex, sessions }: OAuthContext, session: Session, request: FastifyRequest): Promise<void> {
  const { others, gone } = await personIndex.othersOf(session.record, session.id)
  // A session may be renamed by a sign-in in its browser at any moment (listed but gone when read,
  // or after: an outside tester's finding, a rename between the check and the delete): its new id too.
  const skip = new Set([session.id, ...others])
  let renamed = 0
  for (const id of others) {
    await sessions.endById(id)
    renamed += await sessions.endRenamed(id, skip)
  }
  for (const id of gone) renamed += await sessions.endRenamed(id, skip)
  request.log.info({ ended: others.length + renamed }, 'signing out everywhere')
}

/**
 * Whether a query names `everywhere` in any spelling (any letter case, any value, repeated): on a
 * GET, none of them may be a side effect, whatever the parser would make of it.
 */
function namesEverywhere (query: object): boolean {
  return Object.keys(query).some((key) => key.toLowerCase() === 'everywhere')
}

/**
 * Whether a sign-out only gets the confirmation page: from another site, or a GET that asks for
 * what only a POST may (`postOnly`) or that something a page embeds made (an image, a frame).
 */
function confirmsFirst (request: FastifyRequest, ownOrigin: string, postOnly: boolean): boolean {
  return fromAnotherSite(request, ownOrigin) || (request.method !== 'POST' && (postOnly || embedded(request)))
}

export function signOutRoutes (app: FastifyInstance, context: OAuthContext): void {
  const { sessions, signOuts, redirectHosts, cookies, providers } = context
  const ownOrigin = new URL(context.config.server.baseUrl).origin

  /**
   * From another site: a confirmation page whose button POSTs here. Otherwise the session ends;
   * with `next` (form field or query): 302 there (docs/endpoints.md); without, a browser gets the
   * signed-out page and others 302 to /.
   */
  async function logout (request: FastifyRequest<{ Querystring: SignOutParameters, Body: SignOutParameters | undefined }>, reply: FastifyReply) {
    const next = request.body?.next ?? request.query.next
    const switchTo = switchProvider(request.body?.switch ?? request.query.switch)
    const everywhere = (request.body?.everywhere ?? request.query.everywhere) === '1'
    // "Use another account" and "sign out everywhere" come only as a form POST: a link or an <img>
    // asking for either, even on a page of the gateway's own origin, is asked first too. A plain
    // sign-out is a link's, never an embedded image's or frame's.
    const postOnly = switchTo !== undefined || namesEverywhere(request.query)
    if (request.method !== 'POST' && ahead(request)) return await refuseAhead(reply)
    if (confirmsFirst(request, ownOrigin, postOnly)) {
      return sendUnframed(reply, signOutConfirmPage(next === undefined ? undefined : safeNext(next, redirectHosts), switchTo, everywhere))
    }
    await chargeSwitch(request, reply, switchTo)
    // The gateway's session ends first, whatever the providers then do; everywhere: the person's others too.
    const session = await sessions.load(request.headers.cookie)
    if (everywhere && session) await endOthers(context, session, request)
    await endSession(sessions, request, reply, session)
    if (session) {
      await context.sessionIndex.remove(session.record.providerSessions, session.id)
      await signOuts.revoke(session.record)
      const walk = await signOuts.begin(session.record, next === undefined ? undefined : safeNext(next, redirectHosts), { switchTo, everywhere })
      if (walk) {
        request.log.info('signed out; signing out at the providers')
        reply.setCookie(cookies.signOut, walk.cookie, context.signOutCookie)
        return reply.redirect(walk.url, 302)
      }
    }
    return await finishSignOut(request, reply, next, switchTo, !everywhere ? 'here' : session ? 'everywhere' : 'not-everywhere')
  }

  /**
   * `switch` of "Use another account": a configured provider's name, else 404 unknown_provider
   * before anything ends (a name that is not a string counts as none).
   */
  function switchProvider (raw: unknown): string | undefined {
    if (raw === undefined) return undefined
    const name = typeof raw === 'string' ? raw : ''
    if (!providers.signsIn(name)) throw unknownProvider(name)
    return name
  }

  /**
   * "Use another account" begins a sign-in: charged to the sign-in budget as /oauth/login/ is (429
   * before anything ends), or it would start sign-ins past it (an outside tester's finding).
   */
  async function chargeSwitch (request: FastifyRequest, reply: FastifyReply, switchTo: string | undefined): Promise<void> {
    if (switchTo !== undefined) await context.signinLimit?.call(app, request, reply)
  }

  /**
   * The end of a sign-out: with `switchTo`, a sign-in there that asks who signs in, back to `next`;
   * else `next`, or (none given, a browser) the signed-out page, which after "sign out everywhere"
   * says what that did not end.
   */
  async function finishSignOut (request: FastifyRequest, reply: FastifyReply, next: unknown, switchTo: string | undefined, ended: SignedOut) {
    if (switchTo !== undefined) return await beginSignIn(context, request, reply, switchTo, safeNext(next, redirectHosts), true)
    if (next === undefined && wantsHtml(request)) {
      return sendUnframed(reply, signedOutPage(context.signInLinks, ended))
    }
    return reply.redirect(safeNext(next, redirectHosts), 302)
  }
  app.get('/oauth/logout/', logout)
  app.post('/oauth/logout/', logout)

  // A provider sends the browser back here after its own sign-out (post_logout_redirect_uri).
  app.get<{ Params: { provider: string }, Querystring: { state?: unknown } }>('/oauth/logout/:provider/', async (request, reply) => {
    const name = context.providerName(request)
    const state = typeof request.query.state === 'string' ? request.query.state : undefined
    const step = await signOuts.resume(name, state, request.cookies[cookies.signOut])
    if ('url' in step) return reply.redirect(step.url, 302)
    reply.clearCookie(cookies.signOut, context.signOutCookie)
    return await finishSignOut(request, reply, step.next, step.switchTo, step.everywhere ? 'everywhere' : 'here')
  })
}
