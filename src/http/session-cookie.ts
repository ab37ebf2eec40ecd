// The Fastify side of the session cookie: src/session/ works on Cookie header values and returns
// cookie values; these two steps read the request's header and set or clear the cookie on the reply.
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Session, SessionRecord, Sessions } from '../session/session.js'

/** A session just started: its id and the record it holds. */
export interface StartedSession { id: string, record: SessionRecord }

/**
 * Starts a session holding `record` under a new id, ends the one the request came with, runs
 * `indexed` (what must know of the session before anyone holds it: the sign-out indexes), and only
 * then sets the new cookie on the reply (`alone`: see Sessions.start). Should `indexed` fail (the
 * store refusing or unreachable), the new session is ended and no cookie names it: a session that
 * sign-out everywhere or a back-channel logout could not find is never handed out.
 */
export async function startSession (sessions: Sessions, request: FastifyRequest, reply: FastifyReply, record: SessionRecord, { alone, indexed }: { alone?: () => SessionRecord, indexed?: (started: StartedSession) => Promise<void> } = {}): Promise<StartedSession> {
  const started = await sessions.start(request.headers.cookie, record, alone)
  const session = { id: started.id, record: started.record }
  try {
    await indexed?.(session)
  } catch (error) {
    await sessions.endById(started.id).catch(() => {})
    throw error
  }
  reply.setCookie(sessions.cookieName, started.cookie, sessions.cookieOptions)
  return session
}

/**
 * Ends the request's session (`session`, as `sessions.load` returned it: null ends nothing in the
 * store) and clears its cookie.
 */
export async function endSession (sessions: Sessions, session: Session | null, reply: FastifyReply): Promise<void> {
  await sessions.end(session)
  reply.clearCookie(sessions.cookieName, sessions.cookieOptions)
}
