// The gateway's own addresses and cookie names, each written once: the home page, the sign-in and
// callback addresses of a provider, "Use another account", the cookies the gateway sets, and the one rule for where a
// browser may be sent afterwards (`safeNext`): a plain same-origin path, or an absolute URL on a host
// in forwardAuth.allowedRedirectHosts.
import type { GatewayConfig } from '../config/types.js'
import { requestSpelling } from '../config/canonical.js'
import type { RedirectHosts } from './redirect-hosts.js'

/** The gateway's home page, and where a refused `next` sends the browser (docs/endpoints.md). */
export const HOME = '/oauth/'

/** The forward-auth endpoint's route (routes/forward-auth.ts): its answers show at the application's address. */
export const FORWARD_AUTH_ROUTE = '/oauth/auth/:provider/'

/** The cookies the gateway sets, all named after session.cookieName. */
export interface CookieNames {
  /** The session cookie. */
  readonly session: string
  /** Binds a sign-in flow to the browser that started it (oauth/state.ts). */
  readonly flow: string
  /** Binds a sign-out that walks through the providers to this browser (oauth/logout.ts). */
  readonly signOut: string
  /** Binds a form POST kept through a sign-in to this browser (oauth/preserved-body.ts). */
  readonly form: string
  /** Binds a sign-in for an agent's authorization to this browser (src/routes/agents.ts). */
  readonly agent: string
  /** The agents' authorization server's own (src/agents/authorization-server.ts): its session, interaction and resume cookies. */
  readonly agentsServer: readonly [string, string, string]
}

export function cookieNames (config: Pick<GatewayConfig, 'session'>): CookieNames {
  const session = config.session.cookieName
  const bare = session.replace(/^__(?:Host|Secure)-/, '')
  return {
    session,
    flow: `${session}_flow`,
    signOut: `${session}_signout`,
    form: `${session}_form`,
    agent: `${session}_agent`,
    // Path-scoped by oidc-provider, so never `__Host-` (which needs Path=/).
    agentsServer: [`${bare}_as`, `${bare}_as_interaction`, `${bare}_as_resume`],
  }
}

/**
 * Every cookie name the gateway sets: what it strips from proxied requests and what no upstream may
 * set. The agents' authorization server (oidc-provider) signs its cookies: each comes with a
 * `<name>.sig` of its own, some with Path=/ (sent on every route).
 */
export function allCookieNames (config: Pick<GatewayConfig, 'session'>): string[] {
  const names = cookieNames(config)
  return [...Object.values(names).flat(), ...names.agentsServer.map((name) => `${name}.sig`)]
}

const NEXT_MAX_LENGTH = 2048

/** A path segment that climbs or stays (`.`, `..`, `%2e`, `.%2E`, ...), also before a `;` parameter. */
function isDotSegment (segment: string): boolean {
  const name = segment.split(';', 1)[0]!.replace(/%2e/gi, '.')
  return name === '.' || name === '..'
}

/**
 * Whether the path part of a redirect target reads as the same single path however a server
 * decodes it: valid percent-encoding of valid UTF-8, no encoded `/`, `\` or control character, no
 * dot segment, and none appearing after Unicode compatibility folding either (`%EF%BC%8F`, U+FF0F,
 * folds to `/`).
 */
function isPlainPath (path: string): boolean {
  if (/%(?![0-9a-f]{2})|%2f|%5c|%[01][0-9a-f]|%7f/i.test(path)) return false
  if (path.split('/').some(isDotSegment)) return false
  let decoded: string
  try {
    decoded = decodeURIComponent(path)
  } catch {
    return false
  }
  const folded = decoded.normalize('NFKC')
  if (folded === decoded) return true
  return !folded.includes('\\') && !folded.startsWith('//') && !folded.split('/').some(isDotSegment)
}

/**
 * An absolute `next` exactly as given when it is on an allowed host, else `/oauth/`. Printable
 * ASCII only (an IDN host comes as punycode, and so never equals a listed name by accident), no
 * `\`, and the WHATWG URL parser's own serialisation must be the value itself (a bare origin may
 * leave out the final `/`): anything the parser would change (case, a default port, dot segments,
 * IPv4 in another notation, a trailing dot...) is refused rather than normalised. No userinfo; the
 * path follows the same rules as a relative `next` (one `/` first, then not `/`).
 */
function safeAbsoluteNext (raw: string, hosts: RedirectHosts): string {
  if (hosts.empty || !/^[\x21-\x7e]+$/.test(raw) || raw.includes('\\')) return HOME
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return HOME
  }
  if (url.href !== raw && url.href !== `${raw}/`) return HOME
  if (url.username !== '' || url.password !== '' || !hosts.allows(url)) return HOME
  return !url.pathname.startsWith('//') && isPlainPath(url.pathname) ? raw : HOME
}

/**
 * `next` exactly as given when it is a plain same-origin path, or (with `hosts`) an http(s) URL on
 * a host in forwardAuth.allowedRedirectHosts; else `/oauth/`. The value checked is the value
 * returned, and so the `Location` sent: nothing is normalised. A path is accepted as printable ASCII
 * (0x21-0x7E; a caller percent-encodes anything else), at most 2048 characters, one `/` then
 * neither `/` nor `\`, no `\` anywhere, and a path part (before `?` or `#`) without dot segments
 * or encoded `/`, `\` or control characters. Query and fragment are kept as they are.
 * @see https://www.rfc-editor.org/rfc/rfc3986#section-4.2 (relative reference, absolute path)
 * @see https://url.spec.whatwg.org/#url-serializing (the form an absolute URL must already have)
 * @see https://www.rfc-editor.org/rfc/rfc9700#section-4.11 (open redirection)
 */
export function safeNext (raw: unknown, hosts?: RedirectHosts): string {
  if (typeof raw !== 'string' || raw.length > NEXT_MAX_LENGTH) return HOME
  if (hosts && /^https?:\/\//.test(raw)) return safeAbsoluteNext(raw, hosts)
  // Browsers read `\` as `/` and drop tabs and newlines, so `/\evil` or `/\t/evil` would leave the origin;
  // anything outside printable ASCII could be read differently by the browser and the gateway.
  if (!/^\/[\x21-\x7e]*$/.test(raw) || raw[1] === '/' || raw.includes('\\')) return HOME
  const pathEnd = raw.search(/[?#]/)
  return isPlainPath(pathEnd === -1 ? raw : raw.slice(0, pathEnd)) ? raw : HOME
}

/** redirect_uri is exactly {base_url}/oauth/authorized/<remote_app_name>/. */
export function redirectUri (config: Pick<GatewayConfig, 'server'>, provider: string): string {
  return `${config.server.baseUrl}/oauth/authorized/${provider}/`
}

/**
 * "Use another account": the sign-out address (a POST) that signs out here and at the provider, then
 * starts a sign-in at `provider` that asks the person to choose the account, back to `next`. Without
 * a provider (a route of several): the sign-out alone, back to `next`, where the chooser offers each.
 */
export function switchAccountUrl (config: Pick<GatewayConfig, 'server'>, provider: string | undefined, next: string): string {
  const signOut = `${config.server.baseUrl}/oauth/logout/?next=${nextParameter(next)}`
  return provider === undefined ? signOut : `${signOut}&switch=${encodeURIComponent(provider)}`
}

/** The login address with `next`, absolute so the whole flow runs on {base_url}'s host. */
export function loginUrl (config: Pick<GatewayConfig, 'server'>, provider: string, next: string): string {
  return `${config.server.baseUrl}/oauth/login/${provider}/?next=${nextParameter(next)}`
}

/**
 * `next` as a query parameter of one of the gateway's addresses, encoded; `/oauth/` when it is
 * longer than safeNext keeps (the sign-in, the chooser and the sign-out then go there anyway): an
 * address of up to three times the request's length said nothing more, and a proxy in front with
 * nginx's 4k header buffer answered its redirect with a 502 (re-readings' findings: the sign-in's,
 * then the chooser's).
 */
export function nextParameter (next: string): string {
  return encodeURIComponent(next.length > NEXT_MAX_LENGTH ? HOME : next)
}

/** RFC 9728: where a protected resource's metadata lives, before the resource's path. */
export const PROTECTED_RESOURCE_WELL_KNOWN = '/.well-known/oauth-protected-resource'

/** The route's resource identifier: `{baseUrl}<path>` (the root route: `{baseUrl}` itself). */
export function resourceIdentifier (baseUrl: string, path: string): string {
  // The route's path as a request spells it (`/café` is `/caf%C3%A9`), as the metadata address is.
  return path === '/' ? baseUrl : `${baseUrl}${requestSpelling(path)}`
}

/**
 * The `aud` of an agent's access token for a route's resource: the resource, except that a bare
 * origin (the root route's, when baseUrl has no path) gets its `/`. Every identity assertion's `aud`
 * is an origin (docs/assertion.md), and an upstream on the gateway's own origin checks exactly that
 * one: an agent's token, signed with the same keys, must never pass there for an assertion.
 */
export function agentTokenAudience (resource: string): string {
  return new URL(resource).pathname === '/' && !resource.endsWith('/') ? `${resource}/` : resource
}

/** Where the route's metadata is served: the well-known segment between the origin and the resource's path (RFC 9728 §3.1). */
export function resourceMetadataUrl (baseUrl: string, path: string): string {
  const resource = new URL(resourceIdentifier(baseUrl, path))
  return `${resource.origin}${PROTECTED_RESOURCE_WELL_KNOWN}${resource.pathname === '/' ? '' : resource.pathname}`
}

/** An interaction id of the authorization server for agents (oidc-provider's: base64url), or undefined. */
export function parseInteractionId (value: unknown): string | undefined {
  return typeof value === 'string' && /^[A-Za-z0-9_-]{1,64}$/.test(value) ? value : undefined
}

/** The device flow's code entry page (agents/endpoints.ts's code_verification). */
export const agentDevicePage = '/oauth/agents/device'

/** Where a person allows or refuses an agent (src/routes/agents.ts); every sign-in for one comes back here. */
export function agentInteractionUrl (uid: string): string {
  return `/oauth/agents/interaction/${uid}`
}
