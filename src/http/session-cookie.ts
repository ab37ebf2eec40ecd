// The Fastify side of the session cookie: src/session/ works on Cookie header values and returns
// cookie values; these two steps read the request's header and set or clear the cookie on the reply.
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Session, SessionRecord, Sessions } from '../session/session.js'

/**
 * Starts a session holding `record` under a new id, ends the one the request came with, and sets
 * the new cookie on the reply (`alone`: see Sessions.start). Returns the new session's id and the
 * record it holds.
 */
export async function startSession (sessions: Sessions, request: FastifyRequest, reply: FastifyReply, record: SessionRecord, alone?: () => SessionRecord): Promise<{ id: string, record: SessionRecord }> {
  const started = await sessions.start(request.headers.cookie, record, alone)
  reply.setCookie(sessions.cookieName, started.cookie, sessions.cookieOptions)
  return { id: started.id, record: started.record }
}

/**
 * Ends the request's session (`session`, as `sessions.load` returned it: null ends nothing in the
 * store) and clears its cookie.
 */
export async function endSession (sessions: Sessions, session: Session | null, reply: FastifyReply): Promise<void> {
  await sessions.end(session)
  reply.clearCookie(sessions.cookieName, sessions.cookieOptions)
}
