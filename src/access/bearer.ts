// Machine clients on a route or forward-auth host with `bearer:`: the credential read once from the
// request header the block names, and what the block asks of a token the issuer vouched for
// (oauth/access-tokens.ts verified its signature, issuer and lifetime): `aud` containing
// `audience`, every required scope, not an ID token, and a subject. The outcome is what the gate
// judges in place of a session: the token's identity (the issuer's `claims` mapping, plus the
// claims this route's rules and headers name, read where `claimsFrom` says), or why it is refused.
// What the token does not say of the person is unknown to the rules, never "none"; a person of an
// issuer other than the route's provider is named `<provider>:<user>` (name-spaces.ts).
// @see https://www.rfc-editor.org/rfc/rfc6750#section-2.1 (the Authorization request header field)
import { introspectedIssuers } from '../config/bearer-section.js'
import type { BearerConfig, ProviderConfig } from '../config/types.js'
import type { AccessTokens, TokenProblem, VerifiedToken } from '../oauth/access-tokens.js'
import { tokenIdentity } from '../oauth/claims.js'
import type { PersonClaimsAnswer } from '../oauth/person-claims.js'
import { TOKEN_MESSAGES, noTokenMessage, tokenMessage } from '../oauth/token-messages.js'
import type { Identity } from '../session/record.js'
import { named } from './name-spaces.js'

/** The outcome of one token on one route: who it is, or why it is refused. */
export type BearerOutcome =
  /**
   * `id`: the token's hash, under which its assertion is cached; `issuer`: the provider that issued it;
   * `until`: clock ms until which its verification holds (its `exp`; at most 60 s when `introspected`);
   * `expires`: its `exp` (clock ms; Infinity when it says none).
   */
  | { readonly ok: true, readonly id: string, readonly issuer: string, readonly identity: Identity, readonly until: number, readonly introspected: boolean, readonly expires: number }
  /** `scopes`: the scopes the route requires (named in the 403 of `insufficient_scope`). */
  | { readonly ok: false, readonly problem: TokenProblem, readonly message: string, readonly scopes: readonly string[] }

/** A route's (or host's) token check, compiled once. */
export interface BearerGuard {
  /** The request header the token comes in. */
  readonly header: BearerConfig['header']
  /** The RFC 9728 metadata address, sent in every 401 of the route; undefined for forward-auth hosts. */
  readonly resourceMetadata: string | undefined
  /**
   * At once when the token was verified before; rejects when an issuer cannot be reached. Null (the
   * Bearer scheme with no usable token) is refused as `malformed`, and reported as every refusal is.
   */
  check (token: string | null): BearerOutcome | Promise<BearerOutcome>
  /**
   * The same check, reported nowhere: a held websocket's or event stream's token checked again
   * (routes/bearer-holds.ts). Each request is counted once, by `check` (a new user's finding: an
   * upgrade counted twice in gateway_bearer_tokens_total, each hold's check once more).
   */
  recheck (token: string): BearerOutcome | Promise<BearerOutcome>
}

/** Counts outcomes (metrics, the refusal log): `accepted`, or the problem. */
export type BearerReport = (result: TokenProblem | 'accepted') => void

const b64token = (code: number): boolean =>
  (code >= 48 && code <= 57) || (code >= 65 && code <= 90) || (code >= 97 && code <= 122) ||
  code === 45 /* - */ || code === 46 /* . */ || code === 95 /* _ */ || code === 126 /* ~ */ || code === 43 /* + */ || code === 47 /* / */

/** A character of an auth-scheme name (RFC 9110 §5.6.2 tchar): one more makes `Bearer` another scheme's name. */
const tchar = (code: number): boolean =>
  (code >= 48 && code <= 57) || (code >= 65 && code <= 90) || (code >= 97 && code <= 122) || '!#$%&\'*+-.^_`|~'.includes(String.fromCharCode(code))

/**
 * The token of an Authorization (or Proxy-Authorization) value: `Bearer`, in any case, one or more
 * spaces, then one b64token (RFC 6750 §2.1). Undefined when there is no bearer credential (no
 * header, another scheme such as `Bearerx`: the request is judged by its session); `''` for the
 * scheme with nothing after it (`Bearer`, `Bearer  `: no token was sent); null when the value names
 * the Bearer scheme but carries no single well-formed token (a tab or a comma after it, two tokens).
 * Both are refused, never judged by a session nor passed on. One pass.
 */
export function bearerToken (value: string | undefined): string | null | undefined {
  if (value === undefined || value.length < 6 || value.slice(0, 6).toLowerCase() !== 'bearer') return undefined
  if (value.length === 6) return ''
  const next = value.charCodeAt(6)
  if (next !== 32) return tchar(next) ? undefined : null
  let start = 7
  while (value.charCodeAt(start) === 32) start++
  let end = start
  while (end < value.length && b64token(value.charCodeAt(end))) end++
  const tokenEnd = end
  while (end < value.length && value.charCodeAt(end) === 61 /* = */) end++
  if (start === value.length) return ''
  return tokenEnd > start && end === value.length ? value.slice(start, end) : null
}

/** The values of `aud` (a string or a list of strings). */
function audiences (aud: unknown): string[] {
  if (typeof aud === 'string') return [aud]
  return Array.isArray(aud) ? aud.filter((item): item is string => typeof item === 'string') : []
}

/** The scopes a token carries: `scope` (space-separated, RFC 8693 / RFC 9068), or `scp` (a list or a string). */
function grantedScopes (claims: VerifiedToken['claims']): Set<string> {
  const granted = new Set<string>()
  for (const value of [claims.scope, claims.scp]) {
    const items = typeof value === 'string' ? value.split(' ') : Array.isArray(value) ? value : []
    for (const item of items) if (typeof item === 'string' && item !== '') granted.add(item)
  }
  return granted
}

/** The route's own provider (whose people keep their plain user name) and the claim paths its rules and headers name. */
export interface BearerScope {
  /** Undefined: every issuer's people keep their plain name (no route provider to tell them from). */
  readonly own: string | undefined
  /** The gateway's name spaces (name-spaces.ts): the own issuer's people whose name reads as qualified are qualified too. */
  readonly spaces: ReadonlySet<string>
  /** The claim paths kept in the identity, as a session keeps its provider's. */
  readonly kept: readonly string[]
}

/**
 * A route's token check. `scope`: the route's provider and the claim paths it reads. `report`
 * counts the outcome of each `check` (a request's), never a `recheck`'s.
 */
export function compileBearer (config: BearerConfig, providers: Readonly<Record<string, ProviderConfig>>, scope: BearerScope,
  tokens: AccessTokens, resourceMetadata: string | undefined, report: BearerReport = () => {}): BearerGuard {
  /**
   * Each verified token's identity on this route, computed once (the entry lives as long as the
   * token's cache entry), with the claims answer it was read from (`claimsFrom`): once that answer
   * is asked again (an introspection answer after 60 s), the identity is read again from the new one
   * (an outside tester's finding: a JWT kept its first answer's identity until its `exp`).
   */
  const identities = new WeakMap<VerifiedToken, { identity: Identity, from: Readonly<Record<string, unknown>> | undefined }>()
  /** Where an opaque token goes: no issuer outside these ever sees it. */
  const introspected = introspectedIssuers(config)
  /** The check, each outcome given to `count`. */
  function checker (count: BearerReport): (token: string | null) => BearerOutcome | Promise<BearerOutcome> {
    const refuse = (problem: TokenProblem, message: string): BearerOutcome => {
      count(problem)
      return { ok: false, problem, message, scopes: config.scopes }
    }
    // Held as long as the token and the claims answer it was judged on: a JWT whose claims came from
    // an introspection answer is asked again with it (its websocket too: an attacker's finding, it
    // lived to the token's exp after the issuer revoked it).
    const accept = (token: VerifiedToken, identity: Identity, added: PersonClaimsAnswer | undefined): BearerOutcome => {
      count('accepted')
      const claimsUntil = added?.ok === true ? added.until : Infinity
      const expires = typeof token.claims.exp === 'number' ? token.claims.exp * 1000 : Infinity
      return { ok: true, id: token.hash, issuer: token.issuer, identity, until: Math.min(token.until, claimsUntil), introspected: token.introspected || claimsUntil < token.until, expires }
    }

    /** The identity from the token's claims and what the route's source adds (the token's own signed claims win). */
    function identify (token: VerifiedToken, added: PersonClaimsAnswer | undefined): BearerOutcome {
      if (added?.ok === false) return refuse(added.problem, added.message)
      const known = identities.get(token)
      if (known !== undefined && known.from === added?.claims) return accept(token, known.identity, added)
      const claims = added === undefined ? token.claims : { ...added.claims, ...token.claims }
      const identity = tokenIdentity(claims, providers[token.issuer]!.claims, scope.kept)
      if (identity === undefined) return refuse('no_subject', TOKEN_MESSAGES.noSubject)
      const judged = named(identity, token.issuer, scope.own, scope.spaces)
      identities.set(token, { identity: judged, from: added?.claims })
      return accept(token, judged, added)
    }

    function judge (raw: string, token: VerifiedToken): BearerOutcome | Promise<BearerOutcome> {
      const known = identities.get(token)
      if (known !== undefined && config.claimsFrom === 'token') return accept(token, known.identity, undefined)
      const provider = providers[token.issuer]!
      const aud = audiences(token.claims.aud)
      // An ID token for this gateway names the gateway's client id as its only audience.
      if (aud.length === 1 && aud[0] === provider.clientId && config.audience !== provider.clientId) return refuse('id_token', TOKEN_MESSAGES.idToken)
      if (!aud.includes(config.audience)) return refuse('wrong_audience', TOKEN_MESSAGES.wrongAudience)
      const granted = grantedScopes(token.claims)
      if (config.scopes.some((scope) => !granted.has(scope))) return refuse('insufficient_scope', tokenMessage('insufficientScope', { scopes: config.scopes.join(' ') }))
      if (config.claimsFrom === 'token') return identify(token, undefined)
      const added = tokens.person.claims(raw, token, config.claimsFrom)
      return added instanceof Promise ? added.then((settled) => identify(token, settled)) : identify(token, added)
    }

    return (token) => {
      if (token === null) return refuse('malformed', TOKEN_MESSAGES.malformed)
      const none = noTokenMessage(token)
      if (none !== undefined) return refuse('no_token', none)
      const checked = tokens.check(token, config.issuers, introspected)
      if (checked instanceof Promise) return checked.then((settled) => settled.ok ? judge(token, settled.token) : refuse(settled.problem, settled.message))
      return checked.ok ? judge(token, checked.token) : refuse(checked.problem, checked.message)
    }
  }

  return { header: config.header, resourceMetadata, check: checker(report), recheck: checker(() => {}) }
}
