// GET /oauth/login/<provider>/ (a new flow, then 302 to the provider; also how "Use another account"
// starts its sign-in, with `prompt`; with `max_age` and `acr_values` when the route `next` is for
// has `reauth:`) and
// GET /oauth/authorized/<provider>/ (the provider's answer: oauth/sign-in.ts's protocol steps, then
// the session, then 302 to where the sign-in was going).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { withoutPort } from '../config/networks.js'
import { GatewayError, withOwn, type ErrorCode } from '../errors.js'
import { sendUnframed, signInLinkPage } from '../http/pages.js'
import { ahead, embedded, refuseAhead } from '../http/request-site.js'
import { startSession, type StartedSession } from '../http/session-cookie.js'
import { accountPrompt, authorizationUrl } from '../oauth/client.js'
import { completeSignIn, type CompletedSignIn } from '../oauth/sign-in.js'
import { maxAgeSeconds } from '../oauth/step-up.js'
import { formOwner, parseFormBinding } from '../oauth/preserved-body.js'
import { formatFlowCookie, parseFlowCookie } from '../oauth/state.js'
import { HOME, agentInteractionUrl, loginUrl, parseInteractionId, redirectUri, safeNext } from '../oauth/urls.js'
import { browserFamily } from '../session/browser-family.js'
import { operatingSystem } from '../session/operating-system.js'
import { emptyRecord, withSignIn, type Session, type SignIn } from '../session/record.js'
import type { OAuthContext } from './oauth-context.js'

/** Said once per sign-in whose `next` was not taken (a newcomer's finding: nothing said why a sign-in ended at /oauth/). */
/** What keeps a sign-in from beginning only for now: its page offers "Try again" at the same address. */
const BEGIN_AGAIN: ReadonlySet<ErrorCode> = new Set(['provider_unavailable', 'session_store_unavailable', 'shutting_down'])

const RETURN_REFUSED = 'sign-in return address refused, the sign-in ends at /oauth/: an address on another origin needs its host (with its port, unless the scheme\'s default) in forwardAuth.allowedRedirectHosts, and any address must be written as the URL parser writes it (docs/forward-auth.md)'

export function signInRoutes (app: FastifyInstance, context: OAuthContext): void {
  const { config, metrics, signinLimit, cookies, redirectHosts } = context

  // Any `prompt` in this address is ignored: only the gateway's own "Use another account" sets one.
  // `form`: the binding of the form kept before this sign-in (routes/form-replay.ts), carried in the signed state.
  // `agent`: the agent authorization (src/agents/) this sign-in is for; its session becomes the grant's.
  app.get<{ Params: { provider: string }, Querystring: { next?: string, form?: unknown, agent?: unknown } }>('/oauth/login/:provider/', { onRequest: signinLimit }, async (request, reply) => {
    const agent = parseInteractionId(request.query.agent)
    const asked = safeNext(request.query.next, redirectHosts)
    if (asked === HOME && typeof request.query.next === 'string' && request.query.next !== HOME) request.log.info({ returnTo: 'refused' }, RETURN_REFUSED)
    // An agent's sign-in goes back to its interaction; its `next` names the route, whose `reauth` it
    // must meet (an outside tester's finding: none was asked for, and every request was refused).
    const next = agent === undefined ? asked : agentInteractionUrl(agent)
    const provider = context.providerName(request)
    if (ahead(request)) return await refuseAhead(reply)
    if (embedded(request)) return sendUnframed(reply, signInLinkPage(provider, request.url))
    try {
      return await beginSignIn(context, request, reply, provider, next, false, parseFormBinding(request.query.form), agent, asked)
    } catch (error) {
      // A sign-in that could not begin for now (the provider's discovery, the store, a restart):
      // this same address is the retry, and the page's button says so (a newcomer's reading: it
      // said "try again shortly" over a lone "Start over").
      throw error instanceof GatewayError && BEGIN_AGAIN.has(error.code) ? withOwn(error, { retryUrl: request.url }) : error
    }
  })

  app.get<{ Params: { provider: string } }>('/oauth/authorized/:provider/', { onRequest: signinLimit }, async (request, reply) => {
    const name = context.providerName(request)
    const queryStart = request.url.indexOf('?')
    let next = HOME
    // Before the provider's tokens are fetched: a back-channel logout from then on ends this sign-in.
    const began = context.clock.now()
    try {
      const completed = await completeSignIn(context, name, queryStart === -1 ? '' : request.url.slice(queryStart + 1), request.cookies[cookies.flow])
      next = completed.next
      const signIn = completed.signIn
      if (completed.agent !== undefined && context.agents !== undefined) {
        await context.agents.signedIn(request, reply, completed.agent, name, signIn, began)
        metrics.signinsSucceeded.inc({ provider: name })
        request.log.info({ provider: name, agent: true }, 'sign-in succeeded')
        return reply.redirect(agentInteractionUrl(completed.agent), 302)
      }
      const sessionId = await startSignedIn(context, request, reply, name, signIn, began, completed)
      metrics.signinsSucceeded.inc({ provider: name })
      request.log.info({ provider: name }, 'sign-in succeeded')
      // Checked again on the way out: the Location sent is the value checked, whatever the flow held.
      const target = safeNext(next, redirectHosts)
      if (await context.forms?.offer(request, reply, target, completed.form, formOwner(sessionId, name, signIn.identity)) === true) return reply
      return reply.redirect(target, 302)
    } catch (error) {
      const done = await finishedSignIn(context, request, name, error)
      if (done !== undefined) return reply.redirect(done, 302)
      const reason = error instanceof GatewayError ? error.code : 'internal_error'
      metrics.signinsFailed.inc({ provider: name, reason })
      if (!(error instanceof GatewayError)) throw error
      request.log.info({ provider: name, reason }, 'sign-in failed')
      // Whatever failed after the provider answered (the store), signing in again starts over toward `next`.
      throw withOwn(error, { loginUrl: loginUrl(config, name, next) })
    }
  })
}

/**
 * Where a callback whose state this browser already used goes when the sign-in it was for is done:
 * the state's `next`, when this browser's session holds a sign-in at `name` (a Back or a reload of
 * the callback after signing in, which otherwise showed an error page to someone signed in: a
 * newcomer's reading). Nothing is exchanged or changed; the route at `next` judges the session as
 * ever. Undefined otherwise (the error stands), also when the store cannot tell.
 */
async function finishedSignIn (context: OAuthContext, request: FastifyRequest, name: string, error: unknown): Promise<string | undefined> {
  if (!(error instanceof GatewayError) || error.details.stateUsed !== true || error.details.flowNext === undefined) return undefined
  const session = await context.sessions.load(request.headers.cookie).catch(() => undefined)
  if (session?.record.tokens[name] === undefined) return undefined
  request.log.info({ provider: name }, 'sign-in callback used again; the browser is signed in, sent on')
  return safeNext(error.details.flowNext, context.redirectHosts)
}

/**
 * A new flow at provider `name` toward `next` (already checked by safeNext), then 302 to the
 * provider. `chooseAccount`: "Use another account" (src/routes/sign-out.ts); the provider must ask
 * who signs in (accountPrompt) instead of reusing its own session. `form`: the binding of the form
 * kept before this sign-in, which only this flow's callback may offer. `forRoute`: the path whose
 * route's `reauth` the sign-in must meet (`next`, but for an agent's, which goes back to its interaction).
 */
export async function beginSignIn (context: OAuthContext, request: FastifyRequest, reply: FastifyReply, name: string, next: string, chooseAccount = false, form?: string, agent?: string, forRoute = next): Promise<FastifyReply> {
  const { config, providers, flows, metrics, cookies } = context
  const provider = await providers.get(name)
  // One binding cookie per browser, shared by every tab's flow, so cookies do not pile up.
  const flow = await flows.begin(parseFlowCookie(request.cookies[cookies.flow]), {
    provider: provider.name, next, pkce: provider.pkce, openid: provider.openid, form, agent, session: context.sessions.idOf(request.headers.cookie),
  })
  metrics.signinsStarted.inc({ provider: provider.name })
  const prompt = chooseAccount ? accountPrompt(provider) : undefined
  const reauth = context.stepUp(provider.name, forRoute)
  const stepUp = reauth === undefined ? {} : { maxAge: maxAgeSeconds(reauth), acrValues: reauth.acr }
  request.log.info({ provider: provider.name, ...(prompt ? { prompt } : {}), ...(reauth ? { stepUp: true } : {}) }, 'sign-in started')
  reply.setCookie(cookies.flow, formatFlowCookie(flow.cookie), context.flowCookie)
  return reply.redirect(authorizationUrl(provider, {
    redirectUri: redirectUri(config, provider.name),
    state: flow.state,
    codeChallenge: flow.codeChallenge,
    nonce: flow.nonce,
    ...(prompt ? { prompt } : {}),
    ...stepUp,
  }), 302)
}

/**
 * Whether a sign-in may change `found`, the browser's session: the sign-in began with it, or with
 * the session another tab's sign-in renamed to it since; or both began without a session, with this
 * browser's flow binding, within a state's lifetime (two tabs signing in at once). Any other is
 * refused: a flow cookie and callback that another browser began, planted in this one (a sibling
 * host under a shared parent domain, another port of the host: an outside tester's finding),
 * replaced the session of the person there with the planter's, or added the planter's provider to
 * it, which the planter's sessions page then listed, with its browser and address, and could revoke.
 * A binding alone is not enough: a planted flow cookie is sent first, so the person's next sign-in
 * would carry the planter's binding (a second look's finding); only a session that no session came
 * before keeps it, for the minutes of a sign-in.
 */
async function ownSignIn (context: OAuthContext, found: Session, { beganIn, flow }: Pick<CompletedSignIn, 'beganIn' | 'flow'>): Promise<boolean> {
  if (found.id === beganIn) return true
  if (beganIn === undefined) return found.record.flow === flow && context.clock.now() - found.record.createdAt <= context.flows.ttlMs
  return (await context.sessions.renamedTo(beganIn)).includes(found.id)
}

/**
 * The session of a completed sign-in, under a new id. Built on the browser's session, so one
 * session holds every provider, when that session is of the same person (PersonIndex.samePerson); rebuilt alone should that session end before the new one replaces
 * it (nothing it held may come back). The new id is listed in the back-channel index for every
 * provider of the session, not only this one, and in the person index, before the old id ends
 * (Sessions.start), and the old id leaves the back-channel index once it has ended.
 */
async function startSignedIn (context: OAuthContext, request: FastifyRequest, reply: FastifyReply, name: string, signIn: SignIn, began: number, { beganIn, flow }: Pick<CompletedSignIn, 'beganIn' | 'flow'>): Promise<string> {
  const { sessions, sessionIndex, clock } = context
  const fresh = () => ({ ...withSignIn(emptyRecord(clock.now()), name, signIn), ...(beganIn === undefined ? { flow } : {}) })
  const found = await sessions.load(request.headers.cookie)
  if (found !== null && !await ownSignIn(context, found, { beganIn, flow })) {
    throw new GatewayError('invalid_state', 'This sign-in was not started with the session this browser has now (it began in another browser, or before this one signed in): nothing was changed. Sign in again.')
  }
  // Another person's session in this browser (another account at this provider or one of its
  // issuer, or a session a sibling host planted under cookieDomain: an outside tester's finding) is
  // not built on: the sign-in starts a session of its own, and that one stays as it is.
  const loaded = found !== null && context.personIndex.samePerson(found.record, name, signIn.identity) ? found : null
  const indexed = async (started: StartedSession) => {
    const loggedOut = await sessionIndex.addSignIn(started.record.providerSessions, started.id, began)
    if (loggedOut !== undefined) throw new GatewayError('invalid_state', `You were signed out at ${loggedOut} (its back-channel logout) while this sign-in was being completed: sign in again.`)
    // Where it signed in from, to tell it apart on the person's list: labels only (request.ip is
    // the address trustProxy resolved), kept sealed in the entry and written to no log line here.
    const userAgent = request.headers['user-agent']
    await context.personIndex.add(started, browserFamily(userAgent), { os: operatingSystem(userAgent), address: withoutPort(request.ip) }, loaded?.id)
  }
  // Another person's session is not renamed either (a re-reading's finding: its holder could end
  // this one through the rename's pointer, by signing out or signing out everywhere).
  if (!loaded) return (await startSession(sessions, request, reply, fresh(), { indexed }, found === null)).id
  let id = ''
  const renamed = async () => {
    // Read again under the refresh locks: a refresh that ended meanwhile is in it.
    const replaced = await sessions.reload(loaded)
    const carried = replaced ? { ...withSignIn(replaced.record, name, signIn), flow: undefined } : fresh()
    const started = await startSession(sessions, request, reply, carried, { alone: fresh, indexed })
    id = started.id
    // Entries that name ids no session has any more are harmless (a logout ends nothing there), but
    // need not wait for their expiry: the old id's, and the new id's for the providers of an old
    // session that ended meanwhile (the new one was rebuilt without them).
    const dropped = Object.fromEntries(Object.entries(carried.providerSessions ?? {}).filter(([known]) => started.record.providerSessions?.[known] === undefined))
    await Promise.all([
      sessionIndex.remove((replaced ?? loaded).record.providerSessions, loaded.id),
      sessionIndex.remove(dropped, started.id),
    ]).catch((error: unknown) => { request.log.debug({ err: error }, 'logout index entries of an ended session not removed') })
  }
  await (context.refreshes ? context.refreshes.holdingRefreshes(loaded, name, renamed) : renamed())
  return id
}
