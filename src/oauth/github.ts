// GitHub's identity at sign-in (`preset: github`): GitHub has no OIDC, so the user is the REST API's
// `GET /user`, and when that user keeps their e-mail address private (`email: null`), the primary
// verified address from `GET /user/emails`. Only a verified address is ever used: /user's public
// address is one the user chose among their verified ones, and from /user/emails only an entry with
// `primary: true` and `verified: true` counts. When the configured scope grants `read:org`, the
// user's organisations (`GET /user/orgs`) and teams (`GET /user/teams`) become the groups: `acme`
// and `acme/platform` (organisation login, then team slug).
// @see https://docs.github.com/en/rest/users/users#get-the-authenticated-user
// @see https://docs.github.com/en/rest/users/emails#list-email-addresses-for-the-authenticated-user
// @see https://docs.github.com/en/rest/orgs/orgs#list-organizations-for-the-authenticated-user
// @see https://docs.github.com/en/rest/teams/teams#list-teams-for-the-authenticated-user
// @see https://docs.github.com/en/rest/using-the-rest-api/using-pagination-in-the-rest-api (Link: rel="next")
// @see https://docs.github.com/en/rest/using-the-rest-api/getting-started-with-the-rest-api (headers)
import { GatewayError } from '../errors.js'
import type { ResolvedProvider } from './providers.js'
import { providerFetch } from './provider-http.js'

/** The REST API version this code reads, as GitHub's docs show it. */
export const GITHUB_API_VERSION = '2022-11-28'

/** GitHub refuses API requests without a User-Agent; it asks for the application's name. */
const USER_AGENT = 'oauth-gateway'

/** One entry of `GET /user/emails`. */
interface GitHubEmail { email?: unknown, primary?: unknown, verified?: unknown }

function headers (accessToken: string): Record<string, string> {
  return {
    authorization: `Bearer ${accessToken}`,
    accept: 'application/vnd.github+json',
    'x-github-api-version': GITHUB_API_VERSION,
    'user-agent': USER_AGENT,
  }
}

async function getResponse (provider: ResolvedProvider, url: string, accessToken: string): Promise<Response> {
  const response = await providerFetch(url, { headers: headers(accessToken), signal: AbortSignal.timeout(provider.timeoutMs) })
  if (!response.ok) {
    await response.arrayBuffer()
    throw new Error(`${new URL(url).pathname} answered ${response.status}`)
  }
  return response
}

async function getJson (provider: ResolvedProvider, url: string, accessToken: string): Promise<unknown> {
  return await (await getResponse(provider, url, accessToken)).json()
}

/** The most pages of one list the gateway reads (100 entries each); a longer list stops the sign-in. */
export const MAX_PAGES = 10

/** An API address beside the configured `/user`: `/user/emails`, `/user/teams`, `/user/orgs`. */
function besideUser (userinfoUrl: string, name: string, query = ''): string {
  const url = new URL(userinfoUrl)
  url.pathname = `${url.pathname.replace(/\/+$/, '')}/${name}`
  url.search = query
  return url.href
}

/**
 * The `rel="next"` address of a Link header, only when it is on the API's own origin (the token
 * goes with it); undefined when there is none.
 */
export function nextPage (link: string | null, origin: string): string | undefined {
  const next = /<([^>]*)>\s*;\s*rel="?next"?/.exec(link ?? '')?.[1]
  if (next === undefined) return undefined
  try {
    const url = new URL(next)
    return url.origin === origin ? url.href : undefined
  } catch {
    return undefined
  }
}

/** Every entry of a paginated list, following Link: rel="next" for at most MAX_PAGES pages. */
async function getAll (provider: ResolvedProvider, first: string, accessToken: string): Promise<unknown[]> {
  const origin = new URL(first).origin
  const entries: unknown[] = []
  let url: string | undefined = first
  for (let page = 0; url !== undefined; page++) {
    if (page === MAX_PAGES) throw new Error(`${new URL(first).pathname} has more than ${MAX_PAGES} pages`)
    const response = await getResponse(provider, url, accessToken)
    const body: unknown = await response.json()
    if (!Array.isArray(body)) throw new Error(`${new URL(first).pathname} did not answer with a list`)
    entries.push(...body)
    url = nextPage(response.headers.get('link'), origin)
  }
  return entries
}

/** Whether the scope lets the token list the user's organisations and teams (`read:org`, or more). */
export function readsOrganisations (scope: string): boolean {
  return scope.split(/[\s,]+/).some((one) => one === 'read:org' || one === 'write:org' || one === 'admin:org')
}

const text = (value: unknown): string | undefined => typeof value === 'string' && value !== '' ? value : undefined

/**
 * The groups of `/user/orgs` and `/user/teams` lists: each organisation's `login`, and each team as
 * `<organisation login>/<team slug>`; entries without them are left out.
 */
export function organisationGroups (orgs: readonly unknown[], teams: readonly unknown[]): string[] {
  const field = (value: unknown, key: string): unknown => typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined
  const groups = [
    ...orgs.map((org) => text(field(org, 'login'))),
    ...teams.map((team) => {
      const org = text(field(field(team, 'organization'), 'login'))
      const slug = text(field(team, 'slug'))
      return org === undefined || slug === undefined ? undefined : `${org}/${slug}`
    }),
  ]
  return [...new Set(groups.filter((group): group is string => group !== undefined))]
}

/** `/user/emails` beside the configured `/user` (github.com: api.github.com; Enterprise: <baseUrl>/api/v3). */
export function emailsUrl (userinfoUrl: string): string {
  return besideUser(userinfoUrl, 'emails')
}

/** The primary verified address of a `/user/emails` list, if any. */
export function primaryVerifiedEmail (list: unknown): string | undefined {
  if (!Array.isArray(list)) return undefined
  const entry = (list as GitHubEmail[]).find((e) => typeof e === 'object' && e !== null && e.primary === true && e.verified === true)
  return typeof entry?.email === 'string' && entry.email !== '' ? entry.email : undefined
}

/**
 * The user's organisations and teams as groups. A failure stops the sign-in: a list read in part
 * could let a `deny` rule on a group miss the user.
 */
async function fetchGroups (provider: ResolvedProvider, accessToken: string): Promise<string[]> {
  try {
    const page = 'per_page=100'
    const orgs = await getAll(provider, besideUser(provider.userinfoUrl!, 'orgs', page), accessToken)
    const teams = await getAll(provider, besideUser(provider.userinfoUrl!, 'teams', page), accessToken)
    return organisationGroups(orgs, teams)
  } catch (error) {
    throw new GatewayError('token_exchange_failed', 'GitHub\'s /user/orgs or /user/teams endpoint did not answer as expected.', { cause: error })
  }
}

/**
 * The account's numeric `id`, as text: GitHub's stable subject. A `login` can be renamed and then
 * taken by another account, so it never keys a person; a `/user` without an id stops the sign-in.
 */
function accountId (id: unknown): string {
  if ((typeof id === 'number' && Number.isSafeInteger(id) && id > 0) || (typeof id === 'string' && /^[1-9]\d*$/.test(id))) return String(id)
  throw new GatewayError('token_exchange_failed', 'GitHub\'s /user endpoint did not name the account\'s id.')
}

/**
 * The `/user` JSON, its `sub` the account's numeric `id`, its `email` filled from `/user/emails` when the public one is null, and, when
 * the scope grants `read:org`, its `groups` from `/user/orgs` and `/user/teams`. A failing `/user`
 * (or, with `read:org`, a failing organisation or team list) stops the sign-in
 * (`token_exchange_failed`); a failing `/user/emails` (say, a scope without `user:email`) leaves the
 * user without an e-mail address, which no e-mail rule then admits.
 */
export async function fetchGitHubUser (provider: ResolvedProvider, accessToken: string): Promise<Record<string, unknown>> {
  let user: unknown
  try {
    user = await getJson(provider, provider.userinfoUrl!, accessToken)
  } catch (error) {
    throw new GatewayError('token_exchange_failed', 'GitHub\'s /user endpoint did not answer as expected.', { cause: error })
  }
  if (typeof user !== 'object' || user === null || Array.isArray(user)) {
    throw new GatewayError('token_exchange_failed', 'GitHub\'s /user endpoint did not answer with a JSON object.')
  }
  const claims: Record<string, unknown> = { ...(user as Record<string, unknown>) }
  claims.sub = accountId(claims.id)
  delete claims.groups
  if (readsOrganisations(provider.scope)) claims.groups = await fetchGroups(provider, accessToken)
  if (typeof claims.email === 'string' && claims.email !== '') return claims
  delete claims.email
  try {
    const email = primaryVerifiedEmail(await getJson(provider, emailsUrl(provider.userinfoUrl!), accessToken))
    if (email !== undefined) claims.email = email
  } catch {
    // No address rather than no sign-in: an e-mail or domain rule then refuses, a group rule may still admit.
  }
  return claims
}
