// GitHub's identity at sign-in (`preset: github`): GitHub has no OIDC, so the user is the REST API's
// `GET /user`, and when that user keeps their e-mail address private (`email: null`), the primary
// verified address from `GET /user/emails`. Only a verified address is ever used: /user's public
// address is one the user chose among their verified ones, and from /user/emails only an entry with
// `primary: true` and `verified: true` counts.
// @see https://docs.github.com/en/rest/users/users#get-the-authenticated-user
// @see https://docs.github.com/en/rest/users/emails#list-email-addresses-for-the-authenticated-user
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

async function getJson (provider: ResolvedProvider, url: string, accessToken: string): Promise<unknown> {
  const response = await providerFetch(url, { headers: headers(accessToken), signal: AbortSignal.timeout(provider.timeoutMs) })
  if (!response.ok) {
    await response.arrayBuffer()
    throw new Error(`${new URL(url).pathname} answered ${response.status}`)
  }
  return await response.json()
}

/** `/user/emails` beside the configured `/user` (github.com: api.github.com; Enterprise: <baseUrl>/api/v3). */
export function emailsUrl (userinfoUrl: string): string {
  const url = new URL(userinfoUrl)
  url.pathname = `${url.pathname.replace(/\/+$/, '')}/emails`
  url.search = ''
  return url.href
}

/** The primary verified address of a `/user/emails` list, if any. */
export function primaryVerifiedEmail (list: unknown): string | undefined {
  if (!Array.isArray(list)) return undefined
  const entry = (list as GitHubEmail[]).find((e) => typeof e === 'object' && e !== null && e.primary === true && e.verified === true)
  return typeof entry?.email === 'string' && entry.email !== '' ? entry.email : undefined
}

/**
 * The `/user` JSON, its `email` filled from `/user/emails` when the public one is null. A failing
 * `/user` stops the sign-in (`token_exchange_failed`); a failing `/user/emails` (say, a scope without
 * `user:email`) leaves the user without an e-mail address, which no e-mail rule then admits.
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
  const claims = { ...(user as Record<string, unknown>) }
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
