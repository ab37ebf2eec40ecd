// GET /oauth/sessions/ (the signed-in person's own sessions: a page for browsers, JSON for API
// clients), GET /oauth/sessions/<public id>/revoke (a browser's question before a revoke: which
// session, and a button) and POST /oauth/sessions/<public id>/revoke (ends one of them, on every
// instance). A session is named by its random public id (src/session/person-index.ts), which opens
// nothing: only the person whose index lists it can see or revoke it; any other id is 404. Revoking
// is same-origin only, by sign-out's rule: a POST another site made the browser send is refused and
// ends nothing. A browser's POST ends a session only from the question's button; without it, the
// question is asked.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { GatewayError } from '../errors.js'
import { wantsHtml } from '../http/error-handler.js'
import { sendUnframed } from '../http/pages.js'
import { fromAnotherSite } from '../http/request-site.js'
import { endSession } from '../http/session-cookie.js'
import { CONFIRMED, revokeConfirmPage, revokeUrl, sessionsPage, type ListedSession } from '../http/sessions-page.js'
import type { GatewayConfig } from '../config/types.js'
import { HOME, loginUrl } from '../oauth/urls.js'
import type { Session } from '../session/record.js'
import { AGENT_FAMILY } from '../session/browser-family.js'
import type { OAuthContext } from './oauth-context.js'

/** The list's address. */
export const SESSIONS = '/oauth/sessions/'

/** A session as the JSON list shows it (times in ISO 8601). */
interface SessionJson {
  id: string
  started: string
  lastSeen: string
  browser: string
  /** From the User-Agent at sign-in; absent for an agent's grant and sessions begun before it was kept. */
  os?: string
  /** The client address it signed in from (an IPv6 one as its /64); absent when not kept. */
  address?: string
  /** An agent's grant: its client's name and the route. */
  agent?: { client: string, route: string }
  providers: readonly string[]
  current: boolean
}

function toJson (session: ListedSession): SessionJson {
  const { origin, agent } = session
  return {
    id: session.publicId,
    started: new Date(session.started).toISOString(),
    lastSeen: new Date(session.lastSeen).toISOString(),
    browser: session.browser,
    ...(origin === undefined ? {} : { os: origin.os }),
    ...(origin?.address === undefined ? {} : { address: origin.address }),
    ...(agent === undefined ? {} : { agent: { client: agent.client, route: agent.route } }),
    providers: session.providers,
    current: session.current,
  }
}

/**
 * As /oauth/userinfo/ answers without a signed-in identity, with a way to sign in that comes back
 * here (a person who just approved an agent from a CLI has no session in this browser: an agent's
 * sign-in starts none): the one provider's sign-in, or with several the home page's links, which
 * return to its `next`.
 */
function notSignedIn (config: GatewayConfig, signInLinks: OAuthContext['signInLinks']): GatewayError {
  const only = signInLinks.length === 1 ? signInLinks[0]!.name : undefined
  return new GatewayError('unauthenticated', 'No signed-in identity: sign in first.', {
    details: { headers: { 'www-authenticate': 'Bearer' }, loginUrl: only !== undefined ? loginUrl(config, only, SESSIONS) : `${HOME}?next=${encodeURIComponent(SESSIONS)}` },
  })
}

function notYours (): GatewayError {
  return new GatewayError('not_found', 'You have no session with this id.')
}

type RevokeRequest = FastifyRequest<{ Params: { publicId: string }, Body: Record<string, unknown> | undefined }>

export function sessionsRoutes (app: FastifyInstance, { config, sessions, personIndex, agents, signInLinks }: OAuthContext): void {
  const ownOrigin = new URL(config.server.baseUrl).origin

  /** The request's session, if it holds an identity (a person to list sessions for). */
  async function signedIn (request: FastifyRequest): Promise<Session> {
    return identified(await sessions.load(request.headers.cookie))
  }

  function identified (session: Session | null): Session {
    if (!session || Object.keys(session.record.identities ?? {}).length === 0) throw notSignedIn(config, signInLinks)
    return session
  }

  /** The person's sessions as the list shows them. */
  async function listed (session: Session): Promise<ListedSession[]> {
    return await Promise.all((await personIndex.list(session.record)).map(async (entry) => ({
      ...entry,
      current: entry.sessionId === session.id,
      agent: entry.browser === AGENT_FAMILY ? await agents?.labelOf(entry.sessionId) : undefined,
    })))
  }

  /** The person's session listed as `publicId`; 404 when they have none (another person's id included). */
  async function listedAs (session: Session, publicId: string): Promise<ListedSession> {
    const found = (await listed(session)).find((entry) => entry.publicId === publicId)
    if (found === undefined) throw notYours()
    return found
  }

  app.get<{ Querystring: { revoked?: unknown } }>(SESSIONS, async (request, reply) => {
    const loaded = await sessions.load(request.headers.cookie)
    // A browser without a session is sent to sign in and comes back here, as to a protected route (a
    // newcomer's reading: a person who had just approved a CLI read the 401 page as a failure); one
    // whose sign-in named nobody gets that page (sent round again, it looped: a re-reading's finding).
    if (loaded === null && wantsHtml(request)) return reply.redirect(notSignedIn(config, signInLinks).details.loginUrl!, 302)
    const all = await listed(identified(loaded))
    if (!wantsHtml(request)) return { sessions: all.map(toJson) }
    // Back from a revoke (a newcomer's reading: the row only disappeared): the page says what
    // happened; not when another site's link says so (a re-reading's finding).
    const what = fromAnotherSite(request, ownOrigin) ? undefined : request.query.revoked
    return sendUnframed(reply, sessionsPage(all, what === '1' ? 'session' : what === 'agent' ? 'agent' : undefined))
  })

  // The question before a revoke: it ends nothing (a link, a prefetch or another site may ask for it).
  app.get<{ Params: { publicId: string } }>(`${SESSIONS}:publicId/revoke`, async (request, reply) => {
    const target = await listedAs(await signedIn(request), request.params.publicId)
    if (!wantsHtml(request)) return { session: toJson(target) }
    return sendUnframed(reply, revokeConfirmPage(target))
  })

  app.post(`${SESSIONS}:publicId/revoke`, async (request: RevokeRequest, reply) => {
    if (fromAnotherSite(request, ownOrigin)) {
      throw new GatewayError('forbidden', 'A session is revoked only from this gateway\'s own pages.')
    }
    const session = await signedIn(request)
    if (wantsHtml(request) && request.body?.[CONFIRMED] !== '1') {
      // A browser's POST without the question's answer (a list page from before the question): ask it.
      const target = await listedAs(session, request.params.publicId)
      return reply.redirect(revokeUrl(target.publicId), 303)
    }
    const target = await personIndex.find(session.record, request.params.publicId)
    if (target === null) throw notYours()
    if (target === session.id) await endSession(sessions, request, reply, session)
    else {
      await sessions.endById(target)
      // Renamed by a sign-in in its browser since it was read (an outside tester's finding): that one too.
      await sessions.endRenamed(target, new Set([session.id]))
    }
    // The list then says what ended, a session or an agent's access (a newcomer's reading): asked once
    // it has ended (a store fault before left an agent unlisted and still working: a re-reading's finding).
    const agent = target !== session.id && wantsHtml(request) && await agents?.labelOf(target).catch(() => undefined) !== undefined
    request.log.info({ current: target === session.id }, 'session revoked')
    return revoked(request, reply, target === session.id, agent)
  })
}

/** 303 back to the list (to /oauth/ once the current session itself was revoked); JSON: 200. */
function revoked (request: FastifyRequest, reply: FastifyReply, wasCurrent: boolean, agent: boolean): FastifyReply {
  if (!wantsHtml(request)) return reply.send({ revoked: true })
  return reply.redirect(wasCurrent ? HOME : `${SESSIONS}?revoked=${agent ? 'agent' : '1'}`, 303)
}
