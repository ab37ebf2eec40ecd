// The person claims a machine client's token does not carry (e-mail, groups, what rules name), read
// where the route's `bearer.claimsFrom` says: the issuer's userinfo endpoint, called with the token
// itself, or the issuer's RFC 7662 answer on it. Asked once per token and source within the
// provider's timeout (concurrent requests with one token share the question), and kept by the
// token's hash (never the token) in a bounded LRU as long as the token passes unchecked (`kept`: a
// JWT's exp plus the clock tolerance), an introspection answer at most INTROSPECTION_CACHE_MS.
// An answer about another subject than the token's refuses the token: it is not this person's.
// @see https://openid.net/specs/openid-connect-core-1_0.html#UserInfo
// @see https://www.rfc-editor.org/rfc/rfc7662#section-2.2
import { GatewayError, waitedOn } from '../errors.js'
import { endpointFailed } from './client.js'
import type { Clock } from '../ops/clock.js'
import { Lru } from '../ops/lru.js'
import { introspection, INTROSPECTION_CACHE_MS } from './introspection.js'
import { providerFetch } from './provider-http.js'
import type { Providers, ResolvedProvider } from './providers.js'
import { TOKEN_MESSAGES } from './token-messages.js'

/** Where a route reads the person claims a token lacks (`bearer.claimsFrom`, besides `token`). */
export type ClaimsSource = 'userinfo' | 'introspection'

/** What is known of a verified token (access-tokens.ts VerifiedToken, which this module may not import: it is imported there). */
export interface TokenFacts {
  readonly hash: string
  readonly issuer: string
  readonly claims: Readonly<Record<string, unknown>>
  readonly until: number
  readonly kept: number
  readonly introspected: boolean
}

/** Why the source refuses the token (two of access-tokens.ts's TokenProblem). */
interface Refusal { readonly ok: false, readonly problem: 'inactive' | 'wrong_subject', readonly message: string }

/** What an endpoint said: the claims, or why the token is refused. */
type Said = { readonly ok: true, readonly claims: Readonly<Record<string, unknown>> } | Refusal

/**
 * The claims the source adds, and until when (clock ms) they are kept before it is asked again (an
 * introspection answer: at most 60 s, which a websocket's hold keeps to), or why the token is refused.
 */
export type PersonClaimsAnswer = { readonly ok: true, readonly claims: Readonly<Record<string, unknown>>, readonly until: number } | Refusal

function refused (problem: 'inactive' | 'wrong_subject', message: string): Refusal {
  return { ok: false, problem, message }
}

/** The userinfo JSON for `token`; a 401 or 403 means the issuer no longer accepts the token. */
async function userinfo (provider: ResolvedProvider, token: string): Promise<Said> {
  if (provider.userinfoUrl === undefined) {
    throw new GatewayError('provider_unavailable', `Provider "${provider.name}" has no userinfo endpoint, which bearer.claimsFrom: userinfo reads.`)
  }
  let body: unknown
  try {
    const response = await providerFetch(provider.userinfoUrl, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' }, signal: AbortSignal.timeout(provider.timeoutMs) })
    if (response.status === 401 || response.status === 403) {
      await response.arrayBuffer()
      return refused('inactive', TOKEN_MESSAGES.userinfoRefused)
    }
    if (!response.ok) throw new Error(`userinfo answered ${response.status}`)
    body = await response.json()
  } catch (error) {
    const message = `Provider "${provider.name}" did not answer the userinfo request as expected.`
    throw new GatewayError('provider_unavailable', message, { cause: error, details: { log: endpointFailed('userinfo', provider, provider.userinfoUrl, error, message) } })
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new GatewayError('provider_unavailable', `Provider "${provider.name}" did not answer the userinfo request with a JSON object.`)
  }
  return { ok: true, claims: body as Record<string, unknown> }
}

/** The issuer's RFC 7662 answer for `token`, when it says the token is active. */
async function introspected (provider: ResolvedProvider, token: string): Promise<Said> {
  if (provider.introspectionUrl === undefined) {
    throw new GatewayError('provider_unavailable', `Provider "${provider.name}" has no introspection endpoint, which bearer.claimsFrom: introspection reads.`)
  }
  const answer = await introspection(provider, token)
  if (answer.active !== true) return refused('inactive', TOKEN_MESSAGES.inactive)
  return { ok: true, claims: answer }
}

export class PersonClaims {
  private readonly cache: Lru<string, { readonly claims: Readonly<Record<string, unknown>>, readonly until: number }>
  private readonly asking = new Map<string, Promise<PersonClaimsAnswer>>()

  constructor (private readonly providers: Providers, private readonly clock: Clock, maxEntries = 10_000) {
    this.cache = new Lru(maxEntries)
  }

  /**
   * What `source` says of `verified`'s person: at once when asked before (or, for an introspected
   * token and `introspection`, its own answer). Rejects `provider_unavailable` when the issuer
   * cannot be asked or has no such endpoint. Userinfo always names a subject; an introspection
   * answer may leave it out. Either, when named, must be the token's.
   */
  claims (token: string, verified: TokenFacts, source: ClaimsSource): PersonClaimsAnswer | Promise<PersonClaimsAnswer> {
    if (source === 'introspection' && verified.introspected) return { ok: true, claims: verified.claims, until: verified.until }
    const key = `${source} ${verified.hash}`
    const known = this.cache.peek(key)
    if (known !== undefined && this.clock.now() < known.until) return { ok: true, claims: known.claims, until: known.until }
    const joined = this.asking.get(key)
    if (joined !== undefined) return joined.catch((error: unknown) => { throw waitedOn(error) })
    const pending = this.ask(token, verified, source).finally(() => this.asking.delete(key))
    this.asking.set(key, pending)
    return pending
  }

  private async ask (token: string, verified: TokenFacts, source: ClaimsSource): Promise<PersonClaimsAnswer> {
    const provider = await this.providers.get(verified.issuer)
    const answer = source === 'userinfo' ? await userinfo(provider, token) : await introspected(provider, token)
    if (!answer.ok) return answer
    const sub = answer.claims.sub
    if ((source === 'userinfo' || sub !== undefined) && sub !== verified.claims.sub) return refused('wrong_subject', TOKEN_MESSAGES.wrongSubject)
    // An introspection answer for at most INTROSPECTION_CACHE_MS, as for an opaque token: a JWT the
    // issuer revoked, or whose person lost a group, was judged on its first answer until its `exp`
    // (an outside tester's finding). A userinfo answer lives as long as the token passes unchecked:
    // to its `exp` plus the clock tolerance, else each request in that minute asked again.
    const until = source === 'introspection' ? Math.min(verified.kept, this.clock.now() + INTROSPECTION_CACHE_MS) : verified.kept
    this.cache.set(`${source} ${verified.hash}`, { claims: answer.claims, until })
    return { ...answer, until }
  }
}
