// Machine clients at forward-auth: the token checks of the hosts whose forwardAuth.hosts entry has a
// `bearer:` block, and the one credential forward-auth reads from the auth request. nginx
// auth_request and Caddy forward_auth pass the client's headers on to the auth request, so the
// client's Authorization reaches the gateway there as it would on a route.
//
// A block without `issuers` accepts the tokens of the provider the forward-auth URL names
// (/oauth/auth/<provider>/), which is known only per request; a block with them names the people of
// the issuers other than that provider `<issuer>:<user>`. So a check is compiled the first time a
// (host, provider) pair is asked for and kept: the map holds at most hosts x providers entries.
// No check names an RFC 9728 metadata address: forward-auth has no route path to describe.
// @see https://www.rfc-editor.org/rfc/rfc6750#section-2.1
import type { BearerReports } from '../access/bearer-report.js'
import { bearerToken, compileBearer, type BearerGuard } from '../access/bearer.js'
import { nameSpaces } from '../access/name-spaces.js'
import { claimPaths } from '../config/rule-lists.js'
import type { BearerConfig, GatewayConfig } from '../config/types.js'
import type { AccessTokens } from '../oauth/access-tokens.js'

export class HostBearers {
  /** Checks by `host provider`. */
  private readonly guards = new Map<string, BearerGuard>()

  constructor (private readonly config: GatewayConfig, private readonly tokens: AccessTokens, private readonly reports: BearerReports) {}

  /**
   * The token check of `host` when forward-auth runs for `provider`; undefined when the host has
   * no bearer block (its callers' tokens are not looked at: the session decides).
   */
  guard (host: string | undefined, provider: string): BearerGuard | undefined {
    if (host === undefined) return undefined
    const bearer = this.config.forwardAuth.bearer.get(host)
    if (bearer === undefined) return undefined
    // The route answers an unknown provider 404 first; checked here too, so the bound holds by itself.
    if (!Object.hasOwn(this.config.providers, provider)) return undefined
    const key = `${host} ${provider}`
    let guard = this.guards.get(key)
    if (guard === undefined) {
      // A provider without `issuer` has no keys and no introspection endpoint: with no issuer to
      // ask, every token is refused (never the browser flow for a caller that brought one).
      const issuers = bearer.issuers.length > 0 ? bearer.issuers : this.config.providers[provider]!.issuer === undefined ? [] : [provider]
      guard = this.compile(host, bearer, issuers, provider)
      this.guards.set(key, guard)
    }
    return guard
  }

  /** How many checks are compiled (tests: the map stays bounded by hosts x providers). */
  get size (): number {
    return this.guards.size
  }

  /** `provider`: the one the forward-auth URL names; the people of the block's other issuers are named `<issuer>:<user>`. */
  private compile (host: string, bearer: BearerConfig, issuers: string[], provider: string): BearerGuard {
    // The identity keeps the claims the host's rules name, as a session keeps its provider's.
    const rules = this.config.forwardAuth.hosts.get(host)
    const kept = rules === undefined ? [] : claimPaths(rules)
    return compileBearer({ ...bearer, issuers }, this.config.providers, { own: provider, spaces: nameSpaces(this.config.providers), kept }, this.tokens, undefined, this.reports.for(`forward-auth:${host}`))
  }
}

/** What bearerToken reads as the Bearer scheme without a single token (a tab after it): refused as malformed, not as "no token". */
const NO_SINGLE_TOKEN = 'Bearer\t'

/**
 * The credential header as the token check reads it: its one value. A header sent more than once
 * (which a proxy passing the client's headers on does not merge) is refused when any of its values
 * names the Bearer scheme, since which token to judge would be a guess; repeated values of other
 * schemes are left to the session, as one would be.
 */
export function credential (values: readonly string[] | undefined): string | undefined {
  if (values === undefined || values.length <= 1) return values?.[0]
  return values.some((value) => bearerToken(value) !== undefined) ? NO_SINGLE_TOKEN : undefined
}
