// One function turns any verdict of the pipeline (authorize.ts) into what the site that asked
// writes, as Pomerium's handleResult and Oathkeeper's HandleError do: for the proxy (a route) and
// forward-auth (a provider, answering the proxy in front) alike. No Fastify here: the sites write
// the answer, and keep the audit for the request's log line.
//
// | verdict      | the proxy                                | forward-auth                              |
// |--------------|------------------------------------------|-------------------------------------------|
// | `allow`      | forward, with the `Admitted` below       | 200 with the `Admitted` as headers        |
// | `public`     | forward, with no credentials             | (never: no public rules) a 500            |
// | `sign_in`    | 302 to the login URL                     | (never: it asks as an API client) a 500   |
// | a refusal    | the error (refusal.ts)                   | the error, X-Login-URL on a 401           |
//
// An allowed identity whose header values cannot be sent whole is refused here too (403), before
// anything goes upstream.
import type { ClaimHeader } from '../config/types.js'
import type { Identity } from '../session/record.js'
import type { Audit } from '../ops/audit.js'
import { auditCredential, auditRule, auditUser, type Grant, type Verdict } from './authorize.js'
import { unreachable } from './gate.js'
import { claimHeaderValues, unsendableIdentity, type IdentityHeaderNames } from './identity-headers.js'
import { broughtToken, refusal, unsendableHeader, type Refusal, type RefusalContext } from './refusal.js'

/** What an allowed request carries to the application: the one thing the site reads back. */
export interface Admitted {
  /** The access token injected as `Authorization: Bearer`; undefined when the caller's own Authorization is the application's. */
  readonly accessToken: string | undefined
  /** A machine client's token came in Proxy-Authorization: the client's own Authorization passes unchanged. */
  readonly keepAuthorization: boolean
  readonly identity: Identity | undefined
  /** The signed identity assertion, when the guard signs one. */
  readonly assertion: string | undefined
  /** The route's claim headers (`headers:`) for this identity, checked and encoded; none at forward-auth. */
  readonly claimHeaders: ReadonlyArray<readonly [name: string, value: string]> | undefined
  /** An agent's request: its grant's session (Cookie header and store id), which its websockets and streams end with. */
  readonly grant?: Grant | undefined
  /** On a route with several providers: the one whose session passed (its token is the one injected). */
  readonly provider?: string | undefined
  /** A machine client's token's `exp` (clock ms), which a stream it holds cannot outlive (routes/bearer-holds.ts). */
  readonly expires?: number | undefined
}

/** What the site writes. */
export type Answer =
  | { readonly kind: 'forward', readonly audit: Audit, /** undefined on a public path */ readonly allowed: Admitted | undefined }
  | { readonly kind: 'redirect', readonly audit: Audit, readonly location: string }
  | { readonly kind: 'refuse', readonly audit: Audit, readonly error: Error }

/** Where a verdict is answered. */
export interface Site {
  /** `route`: the proxy (forwards, redirects a browser to sign in); `forward-auth`: answers the proxy in front. */
  readonly kind: 'route' | 'forward-auth'
  /** The identity headers the answer carries. */
  readonly identityHeaders: IdentityHeaderNames
  /** The route's `headers:`; empty at forward-auth. */
  readonly claimHeaders: readonly ClaimHeader[]
  /** Where "Use another account" POSTs, on a 403 to a person; `next`: where the person was going. */
  switchAccountUrl (next: string): string
  /** What a 503 or 400 offers a person: the route's own address to try again, or forward-auth's sign-in. */
  retry (next: string): { readonly retryUrl: string } | { readonly loginUrl: string }
}

const SUBJECT = { route: 'this route', 'forward-auth': 'this provider' } as const
const UNSENDABLE = { route: 'This route', 'forward-auth': 'This host' } as const
/** The response header that carries the login URL of forward-auth's 401, for the proxy in front to redirect a browser to. */
export const LOGIN_URL_HEADER = 'x-login-url'
/**
 * The response header that carries "Use another account" (a sign-out address, which asks first when
 * a page of another site links to it) on forward-auth's 403 to a person, for the proxy in front to
 * offer: nginx's auth_request keeps no body (a newcomer's finding: a refused person saw nginx's bare
 * 403 page, with no way on).
 */
export const SWITCH_ACCOUNT_HEADER = 'x-switch-account-url'

/**
 * The answer to `verdict` at `site`, with its audit fields.
 * @param authorization the header the guard's bearer check reads, as sent (undefined when it has none)
 * @param next where the person was going: the request's target at the proxy, the original URL at forward-auth
 */
export function respond (verdict: Verdict, authorization: string | undefined, site: Site, next: string): Answer {
  const credential = auditCredential(verdict, authorization)
  const audit: Audit = {
    decision: verdict.kind,
    user: auditUser(verdict),
    rule: auditRule(verdict),
    credential,
    // Undefined elsewhere: the log line leaves it out (pino writes no undefined field).
    reason: verdict.kind === 'token_refused' ? verdict.problem : undefined,
  }
  switch (verdict.kind) {
    case 'allow':
      return allowed(verdict, audit, site)
    case 'public':
      if (site.kind === 'route') return { kind: 'forward', audit, allowed: undefined }
      return { kind: 'refuse', audit, error: new Error(`forward-auth's gate answered ${verdict.kind}`) }
    case 'sign_in':
      if (site.kind === 'route') return { kind: 'redirect', audit, location: verdict.loginUrl }
      // A gate with no public rules, asked with html false, never answers this.
      return { kind: 'refuse', audit, error: new Error(`forward-auth's gate answered ${verdict.kind}`) }
    case 'forbidden':
    case 'unauthenticated':
    case 'step_up':
    case 'unavailable':
    case 'invalid_request':
    case 'token_refused':
      return { kind: 'refuse', audit, error: refusal(verdict, refusalContext(verdict, site, next, broughtToken(credential))) }
    default:
      return unreachable(verdict)
  }
}

/** An allowed verdict: forwarded with what it carries, unless a header value cannot be sent whole (403). */
function allowed (verdict: Extract<Verdict, { kind: 'allow' }>, audit: Audit, site: Site): Answer {
  // Checked before anything goes upstream: a value that cannot be sent whole refuses the request
  // (else the upstream request fails to be written, answered as the upstream's 502, or forward-auth's 500).
  const identity = unsendableIdentity(verdict.identity, site.identityHeaders)
  if (identity !== undefined) return { kind: 'refuse', audit: { ...audit, decision: 'forbidden' }, error: unsendableHeader(UNSENDABLE[site.kind], identity.header, identity.problem) }
  const claims = claimHeaderValues(verdict.identity, site.claimHeaders)
  if (!claims.ok) return { kind: 'refuse', audit: { ...audit, decision: 'forbidden' }, error: unsendableHeader(UNSENDABLE[site.kind], claims.header, claims.problem) }
  // A machine client's token in Proxy-Authorization is not the application's: its own Authorization passes.
  const keepAuthorization = verdict.via === 'proxy-authorization'
  return {
    kind: 'forward',
    audit,
    allowed: { accessToken: keepAuthorization ? undefined : verdict.accessToken, keepAuthorization, identity: verdict.identity, assertion: verdict.assertion, claimHeaders: claims.headers, grant: verdict.grant, provider: verdict.provider, expires: verdict.expires },
  }
}

/** What a refusal offers: a caller that brought its own token is never offered a sign-in or another account. */
function refusalContext (verdict: Refusal, site: Site, next: string, byToken: boolean): RefusalContext {
  const subject = SUBJECT[site.kind]
  switch (verdict.kind) {
    case 'forbidden': {
      if (byToken) return { subject, byToken }
      const switchAccountUrl = site.switchAccountUrl(next)
      return site.kind === 'forward-auth' ? { subject, switchAccountUrl, headers: { [SWITCH_ACCOUNT_HEADER]: switchAccountUrl } } : { subject, switchAccountUrl }
    }
    case 'unauthenticated':
    case 'step_up':
      // An agent asked for a fresher sign-in authorizes again (an attacker's finding: it was offered a browser's).
      if (byToken && verdict.kind === 'step_up') return { subject, byToken }
      // The proxy in front cannot read the JSON body: the sign-in address goes in a header.
      return site.kind === 'forward-auth' ? { subject, headers: { [LOGIN_URL_HEADER]: verdict.loginUrl } } : { subject }
    case 'unavailable':
    case 'invalid_request':
    {
      const retry = site.retry(next)
      return byToken && 'loginUrl' in retry ? { subject } : { subject, ...retry }
    }
    case 'token_refused':
      return { subject }
    default:
      return unreachable(verdict)
  }
}
