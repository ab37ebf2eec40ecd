// The Fastify side of the session cookie: src/session/ works on Cookie header values and returns
// cookie values; these two steps read the request's header and set or clear the cookie on the reply.
import type { FastifyReply, FastifyRequest } from 'fastify'
import { hostOnly } from '../session/cookie.js'
import type { Session, SessionRecord, Sessions, StartSteps } from '../session/session.js'

/** A session just started: its id and the record it holds. */
export interface StartedSession { id: string, record: SessionRecord }

/**
 * Starts a session holding `record` under a new id (Sessions.start: `indexed` lists it where
 * sign-outs look before the one the request came with ends; `alone`), and only then sets the new
 * cookie on the reply. Should `indexed` fail (the store refusing or unreachable), the new session
 * is ended and no cookie names it: a session that sign-out everywhere or a back-channel logout
 * could not find is never handed out.
 */
export async function startSession (sessions: Sessions, request: FastifyRequest, reply: FastifyReply, record: SessionRecord, steps: StartSteps = {}, replace = true): Promise<StartedSession> {
  // `replace` false: the browser's session is another person's, which this one neither renames nor ends.
  const started = await sessions.start(replace ? request.headers.cookie : undefined, record, steps)
  reply.setCookie(sessions.cookieName, started.cookie, sessions.cookieOptions)
  clearHostOnly(sessions, reply)
  return { id: started.id, record: started.record }
}

/** With `session.cookieDomain`: the session cookie an earlier configuration left on this host goes too (cookie.ts hostOnly). */
function clearHostOnly (sessions: Sessions, reply: FastifyReply): void {
  const options = hostOnly(sessions.cookieOptions)
  if (options !== undefined) reply.clearCookie(sessions.cookieName, options)
}

/**
 * Ends the request's session (`session`, as `sessions.load` returned it), and the one its cookie
 * was renamed to a moment ago by a sign-in in another tab (Sessions.end), and clears its cookie.
 */
export async function endSession (sessions: Sessions, request: FastifyRequest, reply: FastifyReply, session: Session | null): Promise<void> {
  await sessions.end(session, request.headers.cookie)
  reply.clearCookie(sessions.cookieName, sessions.cookieOptions)
  clearHostOnly(sessions, reply)
}
