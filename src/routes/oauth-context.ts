// What the /oauth/ routes share: their dependencies, the cookies they set and with which options,
// the hosts a browser may be sent back to, the check of a provider named in the path, and the
// step-up (`reauth:`) a sign-in must meet, found from the route its `next` is for.
import type { FastifyReply, FastifyRequest, onRequestAsyncHookHandler } from 'fastify'
import type { SignIn } from '../session/record.js'
import { reauthFor } from '../access/step-up-route.js'
import type { GatewayConfig, ReauthConfig } from '../config/types.js'
import { canonicalTarget } from '../config/canonical.js'
import { unknownProvider } from '../errors.js'
import type { BackchannelLogout } from '../oauth/backchannel.js'
import type { SignOuts } from '../oauth/logout.js'
import type { Providers } from '../oauth/providers.js'
import { RedirectHosts } from '../oauth/redirect-hosts.js'
import type { SessionIndex } from '../oauth/session-index.js'
import type { Flows } from '../oauth/state.js'
import { cookieNames, loginUrl, type CookieNames } from '../oauth/urls.js'
import type { Clock } from '../ops/clock.js'
import type { Metrics } from '../ops/metrics.js'
import type { PersonIndex } from '../session/person-index.js'
import type { FormReplay } from './form-replay.js'
import type { CookieOptions as SessionCookieOptions } from '../session/cookie.js'
import type { Session } from '../session/record.js'
import type { Sessions } from '../session/session.js'

export interface OAuthDeps {
  config: GatewayConfig
  providers: Providers
  sessions: Sessions
  flows: Flows
  metrics: Metrics
  /** Sign-out at the providers: revocation and RP-initiated logout. */
  signOuts: SignOuts
  /** Back-channel logout: verifies logout tokens and ends the sessions they name. */
  backchannel: BackchannelLogout
  /** Which sessions belong to a provider's `sid` / `sub` (written at sign-in). */
  sessionIndex: SessionIndex
  /** Each person's sessions: the list, revoke, sign out everywhere (written at sign-in). */
  personIndex: PersonIndex
  /** Charges the sign-in endpoints' budget per client address (absent: no limit). */
  signinLimit?: onRequestAsyncHookHandler
  /** When a new session record begins (its sign-in time). */
  clock: Clock
  /** Forms kept through a sign-in (routes[].preserveBody): offered by the callback. */
  forms?: FormReplay
  /** Sign-ins started for an agent's authorization (routes/agents.ts): the callback hands them over. */
  agents?: AgentSignIns
  /** Holds a session's token refreshes while a sign-in renames it (oauth/refresh.ts holdingRefreshes); absent: none held. */
  refreshes?: { holdingRefreshes: <T>(session: Session, except: string, fn: () => Promise<T>) => Promise<T> }
}

/** Where a sign-in started for an agent's authorization ends: its session is the grant's, not the browser's. */
export interface AgentSignIns {
  signedIn (request: FastifyRequest, reply: FastifyReply, uid: string, provider: string, signIn: SignIn, began: number): Promise<void>
  /** Which client on which route a grant's session (by store id) is, for the sessions page; undefined when it is not one. */
  labelOf (sessionId: string): Promise<{ client: string, route: string } | undefined>
}

/** The session cookie's kind of options, with a lifetime: the flow and sign-out cookies end with their flow. */
export type CookieOptions = SessionCookieOptions & { readonly maxAge: number }

export interface OAuthContext extends OAuthDeps {
  readonly cookies: CookieNames
  /** The flow cookie's options (the sign-out cookie's are the same but for maxAge). */
  readonly flowCookie: CookieOptions
  readonly signOutCookie: CookieOptions
  readonly redirectHosts: RedirectHosts
  /** Each provider's login, back to its first route: the links of the home and signed-out pages. */
  readonly signInLinks: ReadonlyArray<{ name: string, href: string }>
  /** The provider named in the path; an unknown name answers 404 before anything else. */
  providerName (request: FastifyRequest<{ Params: { provider: string } }>): string
  /**
   * The step-up a sign-in at `provider` toward `next` (as safeNext left it) must meet: the
   * `reauth` of the route that serves `next`, when that route signs in at `provider`.
   */
  stepUp (provider: string, next: string): ReauthConfig | undefined
}

/**
 * The step-up of the route serving `next`, found by the route matcher the gate uses on the
 * canonical path (as a request to `next` is made canonical at the edge), never read from the login
 * address: the requirement is the route's, so a link cannot weaken it (drop `max_age`) nor make
 * up one, and the callback finds the same one again from the `next` its signed state carries. An
 * absolute `next` (forward-auth's hosts) or one that cannot be made canonical is served by no route.
 */
function stepUpOf (config: GatewayConfig, provider: string, next: string): ReauthConfig | undefined {
  if (!next.startsWith('/')) return undefined
  const target = canonicalTarget(next)
  return target.ok ? reauthFor(config.routes, provider, target.url) : undefined
}

/** How much longer than a sign-in's state the flow cookie lives (seconds). */
const FLOW_COOKIE_OUTLIVES_S = 3600

export function oauthContext (deps: OAuthDeps): OAuthContext {
  const { config, flows, signOuts, providers } = deps
  const flowCookie: CookieOptions = {
    // A `__Host-` name is only kept by browsers with Path=/ (and Secure, no Domain: see config).
    path: /^__host-/i.test(config.session.cookieName) ? '/' : '/oauth/',
    httpOnly: true,
    sameSite: 'lax',
    secure: config.session.cookieSecure,
    // An hour longer than its newest state: a callback that comes after the state expired (a
    // person slow at the provider) is still told apart as this browser's, and sent back toward its
    // `next`. With the state's own lifetime, the browser had dropped it by then (a new user's finding).
    maxAge: Math.ceil(flows.ttlMs / 1000) + FLOW_COOKIE_OUTLIVES_S,
  }
  return {
    ...deps,
    cookies: cookieNames(config),
    flowCookie,
    signOutCookie: { ...flowCookie, maxAge: Math.ceil(signOuts.ttlMs / 1000) },
    redirectHosts: new RedirectHosts(config.forwardAuth.allowedRedirectHosts, new URL(config.server.baseUrl).origin),
    signInLinks: Object.keys(config.providers).filter((name) => !config.providers[name]!.tokenOnly).map((name) => {
      // The first page of the provider's: an agents route (an MCP server) is no page to land on.
      const route = config.routes.find((r) => r.providers.includes(name) && !r.agents)
      return { name, href: loginUrl(config, name, route ? `${route.path.replace(/\/$/, '')}/` : '/') }
    }),
    stepUp: (provider, next) => stepUpOf(config, provider, next),
    providerName (request) {
      const name = request.params.provider
      if (!providers.signsIn(name)) throw unknownProvider(name)
      return name
    },
  }
}
