// The access gate: one pure function from what is known about a request to what may happen to it.
// No Fastify, no sockets, no clock, no store: the caller reads the session (and refreshes its token)
// and feeds the outcome in; the gate only decides. The request pipeline (src/access/authorize.ts)
// does that reading for both the proxy and forward-auth, which act on its verdict and nothing else.
//
// Inputs: the route's compiled gate (auth, `public` rules, `allow`/`deny` rules, provider, path prefix),
// the canonical method and target (src/config/canonical.ts made it: the path, then `?` and the
// query), whether the client wants HTML, and the session's state for the route's provider.
// Checked in this order; the first row that applies decides:
//
// | # | when                                                        | decision                         |
// |---|-------------------------------------------------------------|----------------------------------|
// | 1 | the target is not a path, or not under the route's prefix   | `invalid_request` (400)          |
// | 2 | the route is `auth: none`                                   | `public`                         |
// | 3 | a `public` rule matches the method and path                 | `public` (nothing forwarded)     |
// | 4 | session state `unread` (the caller has not looked yet)      | `read_session` (ask the caller)  |
// | 5 | session state `failed` (store or provider failed)           | `unavailable` (503/502, retry)   |
// | 6 | session state `none`, client wants HTML                     | `sign_in` (302 to the login URL) |
// | 7 | session state `none`, any other client                      | `unauthenticated` (401)          |
// | 8 | a machine client's token was refused (bearer.ts)            | `token_refused` (401/403, never a redirect) |
// | 9 | signed in, the rules refuse (rules.ts: `deny` wins)          | `forbidden` (403), naming the rule |
// |10 | signed in, the route's `reauth` wants a fresher sign-in, HTML | `sign_in` (the login asks for it) |
// |11 | signed in, the route's `reauth` wants a fresher sign-in      | `step_up` (401, RFC 9470)        |
// |12 | signed in, and no rule refuses                              | `allow` (token and identity)     |
//
// A machine client's token the issuer vouched for is `signed_in` as a session is: the same rules
// judge its identity. Whether a sign-in is recent enough for the route's `reauth` (oauth/step-up.ts) is
// the caller's to say (it has the clock): rows 10 and 11 only act on it, after the rules, so a
// person the rules refuse is told so rather than sent to sign in again for nothing.
//
// A `public` glob's `*` matches any characters of the path, `/` included; the query is never part
// of the path a rule sees; globs are matched without regular expressions (glob.ts), linearly in the
// path. The prefix check (row 1) compares the canonical target, and only when
// that fails the decoded path too, as the router matches routes (a route `/café` serves
// `/caf%C3%A9/`). Public rules are decided before the session is read, so a public path costs no store read and
// never fails with the store; a public path never forwards the session's credentials, even when
// there is a session. `read_session` is how the gate stays free of I/O while the caller keeps its
// fast path: the caller first feeds in what it has without waiting (a cached session with a fresh
// token, else `unread`), and reads the store only when the gate asks.
import type { PublicRule, ReauthConfig, RuleLists } from '../config/types.js'
import type { TokenProblem } from '../oauth/access-tokens.js'
import type { Identity } from '../session/record.js'
import { globMatcher } from './glob.js'
import { admitsWhatItRuns } from './path-readings.js'
import { compileRules, type Judge, type Judgement } from './rules.js'

/** What the gate needs of a route (a `RouteConfig` has all of it). */
export interface GateRoute {
  /** The route's path prefix (`/app`, or `/`); undefined: any path (forward-auth judges no path). */
  path: string | undefined
  auth: 'required' | 'none'
  provider: string | undefined
  /** Every provider whose session passes (`providers: [a, b]`); absent: `provider` alone. */
  providers?: readonly string[]
  /** Who may pass (`deny` wins; no `allow`: any signed-in person). */
  rules: RuleLists
  public: readonly PublicRule[]
  /** Step-up: how recent the sign-in at the provider must be (absent: any). */
  reauth?: ReauthConfig | undefined
  /** The gateway's name spaces (access/name-spaces.ts nameSpaces); absent: none to tell apart. */
  spaces?: ReadonlySet<string> | undefined
}

/** A route's gate, compiled once at startup: its rules as matchers (src/access/glob.ts), its login address. */
export interface RouteGate {
  readonly prefix: string | undefined
  readonly auth: 'required' | 'none'
  /** The provider whose token and identity the route needs (empty for `auth: none`); with several, the first. */
  readonly provider: string
  /** Every provider whose session passes, in the route's order (`[provider]` with one). */
  readonly providers: readonly string[]
  /** The gateway's name spaces, which its own people's names may read as (name-spaces.ts). */
  readonly spaces: ReadonlySet<string>
  /** With several providers: each one's sign-in address that returns to `next` (an API client's 401 names them). */
  readonly loginUrls: ((next: string) => Record<string, string>) | undefined
  /** Who may pass: the route's rules, compiled (rules.ts). */
  readonly judge: Judge
  /**
   * Whether the route's `public` rules let `method` and `target` through without a session. The
   * target's query, from the first `?`, is not part of the path a rule is matched against.
   */
  readonly isPublic: (method: string, target: string) => boolean
  /** The sign-in address that returns to `next`. */
  readonly loginUrl: (next: string) => string
  /** The route's RFC 9728 metadata address (routes with `bearer:`), named in its 401s. */
  readonly resourceMetadata: string | undefined
  /** Step-up: how recent the sign-in at the provider must be (absent: any). */
  readonly reauth: ReauthConfig | undefined
}

/** The session's state for the route's provider, as the caller found it. */
export type SessionState =
  | { readonly kind: 'unread' }
  | { readonly kind: 'none' }
  /** `stepUp`: the sign-in is older than the route's `reauth` allows (or of another `acr`). */
  /** `provider`: where the session signed in, when the route has several (absent: the gate's `provider`). */
  | { readonly kind: 'signed_in', readonly accessToken: string, readonly identity: Identity | undefined, readonly stepUp?: boolean, readonly provider?: string }
  | { readonly kind: 'failed', readonly error: unknown }
  /** A machine client's token that does not pass (`problem` names why; `scopes`: what the route requires). */
  | { readonly kind: 'token_refused', readonly problem: TokenProblem, readonly message: string, readonly scopes: readonly string[] }

/** Not looked up yet: the gate answers `read_session` unless it can decide without the session. */
export const UNREAD: SessionState = Object.freeze({ kind: 'unread' })
/** No session, or no usable token for the route's provider (none, expired and not refreshable). */
export const NO_SESSION: SessionState = Object.freeze({ kind: 'none' })

/** Signed in with a usable token; `stepUp`: but not recently enough for the route's `reauth` (./step-up-route.ts). */
export function signedIn (accessToken: string, identity: Identity | undefined, stepUp = false, provider?: string): SessionState {
  if (provider !== undefined) return { kind: 'signed_in', accessToken, identity, stepUp, provider }
  return stepUp ? { kind: 'signed_in', accessToken, identity, stepUp } : { kind: 'signed_in', accessToken, identity }
}

/** The store or the provider failed while the session was read or its token refreshed. */
export function failed (error: unknown): SessionState {
  return { kind: 'failed', error }
}

/** A machine client's token that does not pass. */
export function tokenRefused (problem: TokenProblem, message: string, scopes: readonly string[]): SessionState {
  return { kind: 'token_refused', problem, message, scopes }
}

/** A signed-in person the rules judged, and the rule that admitted or refused them (undefined: none needed to, or no allow rule matched). */
export interface Judged { readonly identity: Identity | undefined, readonly rule: string | undefined }

/** What the gate decided; `kind` names it, the other fields are what acting on it needs. */
export type Decision =
  /** Forward with these credentials (bearer token, identity headers); `rule` admitted it (undefined: no rule needed to). */
  | { readonly kind: 'allow', readonly accessToken: string, readonly identity: Identity | undefined, readonly rule: string | undefined, readonly provider?: string }
  /** Forward without any credentials of the session. */
  | { readonly kind: 'public' }
  /** Read the session (refreshing its token if need be), then ask again with what was found. */
  | { readonly kind: 'read_session' }
  /** 302 to `loginUrl` (a browser); `reauthOf`: a signed-in person sent to sign in again (the route's `reauth`). */
  | { readonly kind: 'sign_in', readonly loginUrl: string, readonly reauthOf?: Judged }
  /** 401 `unauthenticated` with `login_url` and `WWW-Authenticate: Bearer realm="<realm>"` (and `resource_metadata` on a bearer route). */
  | { readonly kind: 'unauthenticated', readonly loginUrl: string, readonly realm: string, readonly resourceMetadata: string | undefined, readonly loginUrls?: Record<string, string> }
  /**
   * 401 `insufficient_user_authentication` (an API client on a route whose `reauth` the session's
   * sign-in does not meet): RFC 9470's challenge with `max_age` (seconds) and `acr_values`.
   * @see https://www.rfc-editor.org/rfc/rfc9470#section-3
   */
  | { readonly kind: 'step_up', readonly loginUrl: string, readonly realm: string, readonly reauth: ReauthConfig, readonly reauthOf: Judged }
  /** 401 `invalid_token` or 403 `insufficient_scope`, with RFC 6750's WWW-Authenticate. */
  | { readonly kind: 'token_refused', readonly problem: TokenProblem, readonly message: string, readonly scopes: readonly string[], readonly realm: string, readonly resourceMetadata: string | undefined }
  /**
   * 403 `forbidden`: signed in, but the rules do not admit this identity. `rule` names the rule that
   * refused (`deny[0]`), or is undefined when no `allow` rule matched. `refusedFor`: the person would
   * pass another request of the route; this one (its method and path) is what was refused.
   */
  | {
    readonly kind: 'forbidden',
    readonly identity: Identity | undefined,
    readonly loginUrl: string,
    readonly rule: string | undefined,
    readonly refusedBy?: string | undefined,
    /** No allow rule takes this address: no account would pass from here (Judgement.byAddress). */
    readonly byAddress?: boolean,
    readonly address?: string | undefined,
    readonly provider?: string | undefined,
    readonly refusedFor?: { readonly method: string, readonly path: string }
  }
  /** 503/502: the store or provider failed; `error` says how (signing in again would not help). */
  | { readonly kind: 'unavailable', readonly error: unknown }
  /** 400 `invalid_request`: the request cannot be judged. */
  | { readonly kind: 'invalid_request', readonly reason: string }

const PUBLIC: Decision = Object.freeze({ kind: 'public' })
const READ_SESSION: Decision = Object.freeze({ kind: 'read_session' })

/**
 * Compiles a route's `public` rules into one test of method and target. Rule methods are upper case
 * (the config makes them so) and `*` matches any method; a rule for GET does not admit HEAD.
 */
export function publicMatcher (rules: readonly PublicRule[]): (method: string, target: string) => boolean {
  if (rules.length === 0) return () => false
  const compiled = rules.map(({ method, path }) => ({ method, path: globMatcher(path) }))
  return (method, target) => {
    const matches = (path: string) => compiled.some((rule) => (rule.method === '*' || rule.method === method) && rule.path(path))
    // Public only with the script it runs and every path its query routes to, each public itself
    // (`GET /app/` does not make `/app/?/admin/` public, nor `GET /site/*.css` `/site/admin.php/x.css`).
    return matches(target) && admitsWhatItRuns(target, matches)
  }
}

/**
 * The route's gate, built once at startup. `loginUrl` makes the sign-in address for a `next`
 * (the caller's, so that the gate knows nothing of the OAuth endpoints). `judge`: who may pass, when
 * not the route's own rules (forward-auth judges the original request's method and path).
 * @throws Error when a protected route names no provider (the config refuses that before).
 */
export function compileGate (route: GateRoute, loginUrl: (next: string) => string, judge: Judge = compileRules(route.rules, route.path), resourceMetadata?: string,
  loginUrls?: (next: string) => Record<string, string>): RouteGate {
  if (route.auth === 'required' && route.provider === undefined) throw new Error(`the protected route ${route.path ?? ''} names no provider`)
  return {
    prefix: route.path,
    auth: route.auth,
    provider: route.provider ?? '',
    providers: route.providers ?? (route.provider === undefined ? [] : [route.provider]),
    spaces: route.spaces ?? NO_SPACES,
    loginUrls,
    judge,
    isPublic: publicMatcher(route.public),
    loginUrl,
    resourceMetadata,
    reauth: route.reauth,
  }
}

/** A gateway of one provider: its people's names read as nobody else's. */
const NO_SPACES: ReadonlySet<string> = new Set()

const NOT_A_PATH = 'the request target is not a path'
const NOT_UNDER_ROUTE = 'the request target is not under the route\'s path'

/** Whether `path` is `prefix`, a path below it, or `prefix` with a query. */
function startsUnder (prefix: string, path: string): boolean {
  if (!path.startsWith(prefix)) return false
  const after = path.charCodeAt(prefix.length)
  return Number.isNaN(after) || after === 47 /* / */ || after === 63 /* ? */
}

/** The path with percent-encoding decoded as the router decodes it before matching; undefined if it cannot be. */
function decodedPath (path: string): string | undefined {
  try {
    return decodeURI(path)
  } catch {
    return undefined
  }
}

/**
 * Why the target cannot be judged on this route, or undefined when it can. The router matched the
 * route on the decoded path (a route `/café` serves `/caf%C3%A9/x`): when the plain comparison
 * fails, the decoded one is tried, on this refusing path only.
 */
function unjudgeable (prefix: string | undefined, target: string): string | undefined {
  if (target.charCodeAt(0) !== 47 /* / */) return NOT_A_PATH
  if (prefix === undefined || prefix === '/' || startsUnder(prefix, target)) return undefined
  const query = target.indexOf('?')
  const path = decodedPath(query === -1 ? target : target.slice(0, query))
  const decodedPrefix = decodedPath(prefix)
  return path !== undefined && decodedPrefix !== undefined && startsUnder(decodedPrefix, path) ? undefined : NOT_UNDER_ROUTE
}

/** What the gate judges of a request besides its session. */
export interface Subject {
  /** Upper case. */
  readonly method: string
  /** The canonical target (src/config/canonical.ts): the path, then `?` and the query if any. */
  readonly target: string
  /** The client address as the gateway resolved it (server.trustProxy); undefined: cannot be told. */
  readonly address: string | undefined
}

/**
 * The decision for one request (see the table at the top of this file).
 * @param gate the route's compiled gate
 * @param subject the request's method, canonical target and client address
 * @param html whether the client asked for HTML (a browser navigation): sign-in by redirect
 * @param session the session's state for the gate's provider
 * @param next where a sign-in returns to; the target itself unless the caller knows better
 */
export function decide (gate: RouteGate, subject: Subject, html: boolean, session: SessionState, next: string = subject.target): Decision {
  const { method, target } = subject
  const reason = unjudgeable(gate.prefix, target)
  if (reason !== undefined) return { kind: 'invalid_request', reason }
  if (gate.auth === 'none' || gate.isPublic(method, target)) return PUBLIC
  switch (session.kind) {
    case 'unread':
      return READ_SESSION
    case 'failed':
      return { kind: 'unavailable', error: session.error }
    case 'none':
      return html
        ? { kind: 'sign_in', loginUrl: gate.loginUrl(next) }
        : unauthenticated(gate, next)
    case 'token_refused':
      return { kind: 'token_refused', problem: session.problem, message: session.message, scopes: session.scopes, realm: gate.provider, resourceMetadata: gate.resourceMetadata }
    case 'signed_in': {
      const judgement = gate.judge(session.identity, method, target, subject.address, session.provider ?? gate.provider)
      const { admit, rule } = judgement
      if (!admit) return forbidden(gate, session, judgement, subject, next)
      if (session.stepUp === true && gate.reauth !== undefined) return stepUp(gate, gate.reauth, html, next, { identity: session.identity, rule })
      const allowed = { kind: 'allow', accessToken: session.accessToken, identity: session.identity, rule } as const
      return session.provider === undefined ? allowed : { ...allowed, provider: session.provider }
    }
    default:
      return unreachable(session)
  }
}

/** The longest path a 403 shows of the request it refused (a longer one is cut, marked with `…`). */
const SHOWN_PATH = 200

/** A request target's path as a 403 names it: the query cut off, at most {@link SHOWN_PATH} characters. */
export function shownPath (target: string): string {
  const path = target.split('?', 1)[0]!
  return path.length <= SHOWN_PATH ? path : `${path.slice(0, SHOWN_PATH)}…`
}

/** A rules' refusal: who and what refused, and, when the person would pass another request of the route, which one this was. */
function forbidden (gate: RouteGate, session: Extract<SessionState, { kind: 'signed_in' }>, judgement: Judgement, subject: Subject, next: string): Decision {
  const refusedFor = judgement.partial !== undefined ? { refusedFor: { method: subject.method, path: shownPath(subject.target) } } : {}
  return {
    kind: 'forbidden',
    identity: session.identity,
    loginUrl: gate.loginUrl(next),
    rule: judgement.rule,
    refusedBy: judgement.refusedBy,
    ...(judgement.byAddress ? { byAddress: true } : {}),
    address: subject.address,
    provider: session.provider,
    ...refusedFor,
  }
}

/** 401 for an API client without a session: where to sign in (with several providers, each one's address too). */
function unauthenticated (gate: RouteGate, next: string): Decision {
  const decision = { kind: 'unauthenticated', loginUrl: gate.loginUrl(next), realm: gate.provider, resourceMetadata: gate.resourceMetadata } as const
  return gate.loginUrls === undefined ? decision : { ...decision, loginUrls: gate.loginUrls(next) }
}

/**
 * A sign-in that is not recent enough: a browser signs in again (the login asks for it), an API
 * client is told how recent. Either names the person the rules admitted, for the log line: an
 * audit saw `user: null`, nobody signed in (an attacker's finding).
 */
function stepUp (gate: RouteGate, reauth: ReauthConfig, html: boolean, next: string, reauthOf: Judged): Decision {
  return html
    ? { kind: 'sign_in', loginUrl: gate.loginUrl(next), reauthOf }
    : { kind: 'step_up', loginUrl: gate.loginUrl(next), realm: gate.provider, reauth, reauthOf }
}

/**
 * Whether `target` (canonical) is judged on a route at `prefix`: the test row 1 makes, which is
 * also how the router picks the route (the longest prefix that covers it: ./step-up-route.ts).
 */
export function covers (prefix: string, target: string): boolean {
  return unjudgeable(prefix, target) === undefined
}

/** The compiler's proof that every kind was handled (typescript-eslint's switch-exhaustiveness-check asks the same). */
export function unreachable (value: never): never {
  throw new Error(`unhandled case: ${JSON.stringify(value)}`)
}
