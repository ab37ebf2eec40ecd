// Local stand-ins for providers that cannot run here, answering as their public documentation shows.
//
// GitHub (Enterprise Server form: the paths under one `baseUrl`), from these pages:
// - authorize and token: https://docs.github.com/en/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps
//   (the authorize step redirects back with `code` and `state`; the token answer is form-encoded
//   unless the request sends `Accept: application/json`, then `{access_token, scope, token_type}`)
// - token errors, all with HTTP 200 and `{error, error_description, error_uri}`:
//   https://docs.github.com/en/apps/oauth-apps/maintaining-oauth-apps/troubleshooting-oauth-app-access-token-request-errors
// - expiring user tokens (a GitHub App with token expiration on): the token answer adds
//   `expires_in` (8 hours), `refresh_token` and `refresh_token_expires_in`; grant_type=refresh_token
//   renews both, and a bad refresh token is `bad_refresh_token`, again with HTTP 200:
//   https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/refreshing-user-access-tokens
// - `GET /user`: https://docs.github.com/en/rest/users/users#get-the-authenticated-user (`email` is null
//   when the user keeps it private); `GET /user/emails`: https://docs.github.com/en/rest/users/emails
//   (a list of `{email, primary, verified, visibility}`, needs the `user:email` scope)
// - `GET /user/orgs`: https://docs.github.com/en/rest/orgs/orgs#list-organizations-for-the-authenticated-user
//   and `GET /user/teams`: https://docs.github.com/en/rest/teams/teams#list-teams-for-the-authenticated-user
//   (OAuth tokens need `read:org`), pages of `per_page` entries (30 by default, at most 100) with a
//   `Link` header naming the next page: https://docs.github.com/en/rest/using-the-rest-api/using-pagination-in-the-rest-api
// - a request without User-Agent is refused with 403, a bad token gets 401 "Bad credentials":
//   https://docs.github.com/en/rest/using-the-rest-api/getting-started-with-the-rest-api
// The authorize step stands for a user who is signed in and has authorized the app already.
import { createHash, randomBytes } from 'node:crypto'
import { createServer, type IncomingHttpHeaders } from 'node:http'
import { close, listen } from './net.js'

export interface GitHubEmail { email: string, primary: boolean, verified: boolean, visibility: 'public' | 'private' | null }

export interface GitHubAccount {
  login: string
  id: number
  name: string | null
  /** The public e-mail address; null when the user keeps it private. */
  email: string | null
  emails: GitHubEmail[]
  /** The organisations the user is a member of (logins). */
  orgs?: string[]
  /** The teams the user is a member of: the organisation's login and the team's slug. */
  teams?: Array<{ org: string, slug: string }>
}

export interface GitHubStub {
  /** The `baseUrl` of a GitHub Enterprise Server entry. */
  url: string
  clientId: string
  clientSecret: string
  /** Who the next authorization signs in as. */
  account: GitHubAccount
  /** When set, the token endpoint answers this error (HTTP 200, as GitHub does). */
  tokenError: keyof typeof TOKEN_ERRORS | undefined
  /** Issue expiring user tokens with refresh tokens, as a GitHub App with token expiration does. */
  expiringTokens: boolean
  /** When set, `/user/orgs` and `/user/teams` answer this status instead of their lists. */
  orgsStatus: number | undefined
  /** Every request, in order (path without query, method, headers). */
  requests: Array<{ method: string, path: string, headers: IncomingHttpHeaders }>
  /** The access tokens issued so far. */
  tokens: string[]
  close (): Promise<void>
}

export const OCTOCAT: GitHubAccount = {
  login: 'octocat',
  id: 583231,
  name: 'The Octocat',
  email: null,
  emails: [
    { email: 'octocat@users.noreply.github.com', primary: false, verified: true, visibility: null },
    { email: 'octocat@github.com', primary: true, verified: true, visibility: 'private' },
  ],
}

const TOKEN_ERRORS = {
  bad_verification_code: 'The code passed is incorrect or expired.',
  incorrect_client_credentials: 'The client_id and/or client_secret passed are incorrect.',
  redirect_uri_mismatch: 'The redirect_uri MUST match the registered callback URL for this application.',
  bad_refresh_token: 'The refresh token passed is incorrect or expired.',
} as const

export async function startGitHubStub (options: { clientId?: string, clientSecret?: string } = {}): Promise<GitHubStub> {
  const codes = new Map<string, { redirectUri: string, challenge: string | undefined, scope: string, account: GitHubAccount }>()
  const users = new Map<string, GitHubAccount & { scopes: string[] }>()
  const refreshTokens = new Map<string, { scope: string, account: GitHubAccount }>()
  const stub: GitHubStub = {
    url: '',
    clientId: options.clientId ?? 'Iv1.8a61f9b3a7aba766',
    clientSecret: options.clientSecret ?? 'github-stub-client-secret-1f2e3d4c',
    account: OCTOCAT,
    tokenError: undefined,
    expiringTokens: false,
    orgsStatus: undefined,
    requests: [],
    tokens: [],
    close: async () => {},
  }
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://stub')
    stub.requests.push({ method: req.method ?? '', path: url.pathname, headers: req.headers })
    const json = (status: number, value: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers })
      res.end(JSON.stringify(value))
    }
    // One page of a list, as GitHub pages: `per_page` (default 30, at most 100), `page` from 1, and
    // a Link header with the next and last pages while there are more.
    const page = (entries: unknown[]) => {
      const size = Math.min(Number(url.searchParams.get('per_page') ?? 30) || 30, 100)
      const number = Math.max(Number(url.searchParams.get('page') ?? 1) || 1, 1)
      const last = Math.max(Math.ceil(entries.length / size), 1)
      const at = (n: number) => {
        const next = new URL(`${stub.url}${url.pathname}`)
        next.searchParams.set('per_page', String(size))
        next.searchParams.set('page', String(n))
        return next.href
      }
      const link: Record<string, string> = number < last ? { link: `<${at(number + 1)}>; rel="next", <${at(last)}>; rel="last"` } : {}
      return json(200, entries.slice((number - 1) * size, number * size), link)
    }
    if (req.method === 'GET' && url.pathname === '/login/oauth/authorize') {
      if (url.searchParams.get('client_id') !== stub.clientId) return json(404, { message: 'Not Found' })
      const redirectUri = url.searchParams.get('redirect_uri') ?? ''
      const code = randomBytes(10).toString('hex')
      codes.set(code, { redirectUri, challenge: url.searchParams.get('code_challenge') ?? undefined, scope: url.searchParams.get('scope') ?? '', account: stub.account })
      const back = new URL(redirectUri)
      back.searchParams.set('code', code)
      back.searchParams.set('state', url.searchParams.get('state') ?? '')
      res.writeHead(302, { location: back.href })
      return res.end()
    }
    if (req.method === 'POST' && url.pathname === '/login/oauth/access_token') {
      let body = ''
      req.on('data', (chunk: Buffer) => { body += chunk.toString() })
      req.on('end', () => {
        const form = new URLSearchParams(body)
        const refresh = form.get('grant_type') === 'refresh_token'
        const grant = refresh ? refreshTokens.get(form.get('refresh_token') ?? '') : codes.get(form.get('code') ?? '')
        if (refresh) refreshTokens.delete(form.get('refresh_token') ?? '')
        else codes.delete(form.get('code') ?? '')
        const verifier = form.get('code_verifier')
        let error: keyof typeof TOKEN_ERRORS | undefined = stub.tokenError
        if (!error && (form.get('client_id') !== stub.clientId || form.get('client_secret') !== stub.clientSecret)) error = 'incorrect_client_credentials'
        if (!error && refresh && !grant) error = 'bad_refresh_token'
        if (!error && !refresh) {
          const code = grant as { redirectUri: string, challenge: string | undefined } | undefined
          if (!code || (code.challenge !== undefined && createHash('sha256').update(verifier ?? '').digest('base64url') !== code.challenge)) error = 'bad_verification_code'
          else if (form.has('redirect_uri') && form.get('redirect_uri') !== code.redirectUri) error = 'redirect_uri_mismatch'
        }
        const scope = grant?.scope.split(/[\s,]+/).filter(Boolean).join(',') ?? ''
        const answer: Record<string, string | number> = error
          ? { error, error_description: TOKEN_ERRORS[error], error_uri: `https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors/#${error.replace(/_/g, '-')}` }
          : { access_token: `gh${stub.expiringTokens ? 'u' : 'o'}_${randomBytes(18).toString('hex')}`, scope, token_type: 'bearer' }
        if (typeof answer.access_token === 'string') {
          stub.tokens.push(answer.access_token)
          users.set(answer.access_token, { ...grant!.account, scopes: scope.split(',') })
          if (stub.expiringTokens) {
            const refreshToken = `ghr_${randomBytes(30).toString('hex')}`
            refreshTokens.set(refreshToken, { scope, account: grant!.account })
            Object.assign(answer, { expires_in: 28800, refresh_token: refreshToken, refresh_token_expires_in: 15897600 })
          }
        }
        // GitHub's default answer is form-encoded; JSON only for Accept: application/json.
        if (req.headers.accept?.includes('application/json')) return json(200, answer)
        res.writeHead(200, { 'content-type': 'application/x-www-form-urlencoded; charset=utf-8' })
        res.end(new URLSearchParams(Object.entries(answer).map(([k, v]): [string, string] => [k, String(v)])).toString())
      })
      return
    }
    if (url.pathname.startsWith('/api/v3/')) {
      if (!req.headers['user-agent']) {
        res.writeHead(403, { 'content-type': 'text/plain' })
        return res.end('Request forbidden by administrative rules. Please make sure your request has a User-Agent header (https://docs.github.com/en/rest/overview/resources-in-the-rest-api#user-agent-required).')
      }
      const token = /^(?:Bearer|token) (\S+)$/i.exec(req.headers.authorization ?? '')?.[1]
      const account = token === undefined ? undefined : users.get(token)
      if (!account) return json(401, { message: 'Bad credentials', documentation_url: 'https://docs.github.com/rest', status: '401' })
      if (req.method === 'GET' && url.pathname === '/api/v3/user') {
        return json(200, {
          login: account.login,
          id: account.id,
          node_id: 'MDQ6VXNlcjE=',
          avatar_url: `${stub.url}/avatars/u/${account.id}`,
          html_url: `${stub.url}/${account.login}`,
          type: 'User',
          site_admin: false,
          name: account.name,
          company: null,
          blog: '',
          location: null,
          email: account.email,
          hireable: null,
          bio: null,
          public_repos: 2,
          followers: 20,
          following: 0,
          created_at: '2008-01-14T04:33:35Z',
          updated_at: '2008-01-14T04:33:35Z',
        })
      }
      if (req.method === 'GET' && url.pathname === '/api/v3/user/emails') {
        // Needs the user:email (or user) scope; the stub refuses without it as for an unknown path
        // (the gateway treats any refusal here alike).
        if (!account.scopes.some((s) => s === 'user:email' || s === 'user')) return json(404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest', status: '404' })
        return json(200, account.emails)
      }
      if (req.method === 'GET' && (url.pathname === '/api/v3/user/orgs' || url.pathname === '/api/v3/user/teams')) {
        if (!account.scopes.some((s) => s === 'read:org' || s === 'write:org' || s === 'admin:org')) return json(403, { message: 'Resource not accessible by integration', documentation_url: 'https://docs.github.com/rest', status: '403' })
        if (stub.orgsStatus !== undefined) return json(stub.orgsStatus, { message: 'Server Error' })
        const org = (login: string, id: number) => ({ login, id, node_id: `O_${id}`, url: `${stub.url}/api/v3/orgs/${login}`, description: null })
        const entries = url.pathname.endsWith('/orgs')
          ? (account.orgs ?? []).map((login, i) => org(login, 1000 + i))
          : (account.teams ?? []).map((team, i) => ({ id: 2000 + i, node_id: `T_${2000 + i}`, name: team.slug, slug: team.slug, description: null, privacy: 'closed', permission: 'pull', parent: null, organization: org(team.org, 1000 + (account.orgs ?? []).indexOf(team.org)) }))
        return page(entries)
      }
    }
    json(404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest', status: '404' })
  })
  stub.url = await listen(server)
  stub.close = () => close(server)
  return stub
}
