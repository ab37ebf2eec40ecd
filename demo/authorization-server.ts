// The demo's authorization server, also the real one the tests sign in at: oidc-provider with one
// or more confidential clients (client_secret_post), refresh tokens, and small sign-in and consent
// pages of our own. Any username signs in. By default every authorization asks for it again (no
// single sign-on); `logout` and `keepSignIn` make it remember the sign-in as real providers do, and
// `selectAccount` adds an account chooser for `prompt=select_account`.
// alice (groups admins, staff), bob (staff), mallory (mallory@evil.test), eve (staff, an e-mail
// address that is not verified) and ursula (no groups, an e-mail address that is not verified) have
// set claims.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { randomBytes } from 'node:crypto'
import { exportJWK, generateKeyPair, type JWK } from 'jose'
import { memoryAdapter } from './memory-adapter.js'
import Provider, { errors, interactionPolicy, type ClientMetadata, type Configuration, type KoaContextWithOIDC } from 'oidc-provider'

export interface DemoClient {
  client_id: string
  client_secret: string
  redirect_uris: string[]
  /** Where the provider may send the browser after signing out (RP-initiated logout). */
  post_logout_redirect_uris?: string[]
  /** Where the provider POSTs logout tokens (back-channel logout); `sid` is always included. */
  backchannel_logout_uri?: string
  /** Every ID token says when the person signed in (`auth_time`), asked for `max_age` or not. */
  require_auth_time?: boolean
}

export interface AuthorizationServerOptions {
  clients: DemoClient[]
  /** Port to listen on (0: one from the OS). */
  port?: number
  /** Listen address (default 127.0.0.1; 0.0.0.0 inside a container). */
  host?: string
  /** Host name in the issuer URL (default 127.0.0.1). */
  publicHost?: string
  /** The whole issuer URL, when the public address differs from the listen port (containers). */
  issuer?: string
  /** Access token lifetime in seconds, per client and grant type (authorization_code, refresh_token). */
  accessTokenTtl?: (clientId: string, grantType: string) => number
  /**
   * A provider that remembers its sign-in (single sign-on: a second authorization does not ask
   * again) and offers sign-out: RP-initiated logout, token revocation and back-channel logout.
   * Default false: every authorization asks for the user again, and none of these is advertised.
   */
  logout?: boolean
  /**
   * A provider that remembers its sign-in but offers no sign-out to its clients (as Google or GitHub
   * appear to most applications): only a `prompt` makes it ask again. Implied by `logout`.
   */
  keepSignIn?: boolean
  /**
   * Supports `prompt=select_account` (an account chooser: continue as the signed-in user, or sign in
   * as another) and lists it in discovery's `prompt_values_supported`. Default false: only `login`
   * and `consent` are listed and a `select_account` request is refused.
   */
  selectAccount?: boolean
  /**
   * A new refresh token at every refresh, the one used redeemed (a second use is refused and ends
   * the grant), as providers do for public clients. Default: oidc-provider's own rule (confidential
   * clients keep theirs until 70% of its lifetime has passed).
   */
  rotateRefreshTokens?: boolean
  /** oidc-provider's storage adapter (default: the demo's in-memory one, ./memory-adapter.ts). */
  adapter?: Configuration['adapter']
  /**
   * A path after the origin in the issuer URL (`/realms/staff`, as Keycloak's): the provider answers
   * under it. Ignored when `issuer` is given.
   */
  issuerPath?: string
  /** Which claims each scope releases, in place of the default (tests mimic a provider's choice). */
  scopeClaims?: Record<string, string[]>
  /** More claims per account (such as `preferred_username`), released only where `scopeClaims` lists them. */
  extraClaims?: (accountId: string) => Record<string, unknown>
  /**
   * Machine clients: confidential clients of the client-credentials grant (RFC 6749 §4.4), as a CI job
   * or a service is registered. They ask for a token for one of `resources`.
   */
  machineClients?: MachineClient[]
  /**
   * Resource servers by resource indicator (RFC 8707, an absolute URI such as `api://orders`): the
   * scopes they grant, the `aud` of their tokens (default: the indicator), the tokens' format (`jwt`,
   * RFC 9068; or `opaque`, checked by introspection) and lifetime in seconds. With any, token
   * introspection (RFC 7662) is on for every confidential client.
   */
  resources?: Record<string, ResourceServer>
  /** Claims added to the access tokens issued to a client (roles, groups, a tenant). */
  tokenClaims?: (clientId: string) => Record<string, unknown> | undefined
  /**
   * What a sign-in of `accountId` records: its time (`ts`, seconds; default now, the ID token's
   * `auth_time`) and `acr`. A test makes a sign-in look old without waiting, or plays a provider
   * that ignores `max_age` (keeps an old time) or signs in with another `acr`.
   */
  signIn?: (accountId: string) => { ts?: number, acr?: string }
  /** The `acr` values the provider supports (discovery's `acr_values_supported`). */
  acrValues?: string[]
}

export interface MachineClient {
  client_id: string
  client_secret: string
}

export interface ResourceServer {
  scope: string
  audience?: string
  format?: 'jwt' | 'opaque'
  ttl?: number
}

export interface AuthorizationServer {
  issuer: string
  /** The port it listens on (the issuer's port may differ behind a container port mapping). */
  port: number
  provider: Provider
  /** The key it signs ID tokens with (tests forge logout tokens that the provider's JWKS verifies). */
  signingKey: Awaited<ReturnType<typeof generateKeyPair>>['privateKey']
  /**
   * Replaces the signing key, as a provider's key rotation does: from now on tokens are signed with
   * a new key under a new `kid`, and the JWKS lists only that one. Same issuer, port, clients and
   * stored grants; `provider` is a new instance (listeners added to the old one stay there).
   */
  rotateSigningKey (): Promise<void>
  /** How many requests it has answered for `pathname` (`/jwks`, say). */
  requests (pathname: string): number
  /** Ends every open connection: a client's next request has to look the name up and connect again. */
  dropConnections (): void
  close (): Promise<void>
}

/** A few accounts with their own e-mail and groups (for allow rules); any other name signs in too. */
const ACCOUNTS: Record<string, { email?: string, emailVerified?: boolean, groups: string[] }> = {
  alice: { groups: ['admins', 'staff'] },
  bob: { groups: ['staff'] },
  mallory: { email: 'mallory@evil.test', groups: [] },
  eve: { emailVerified: false, groups: ['staff'] },
  ursula: { emailVerified: false, groups: [] },
}

function accountClaims (id: string): { sub: string, [claim: string]: unknown } {
  const account = ACCOUNTS[id]
  return {
    sub: id,
    name: id.charAt(0).toUpperCase() + id.slice(1),
    email: account?.email ?? `${id}@example.test`,
    email_verified: account?.emailVerified ?? true,
    groups: account?.groups ?? [],
  }
}

/** The accounts with set claims, as an ID token of theirs says them (what `npm run demo:provider` lists). */
export function demoAccounts (): Array<ReturnType<typeof accountClaims>> {
  return Object.keys(ACCOUNTS).map(accountClaims)
}

const escape = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

function page (title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escape(title)}</title><style>
body{font:16px/1.5 system-ui,sans-serif;background:#f4f5f7;margin:0}main{max-width:24rem;margin:5rem auto;background:#fff;padding:2rem;border-radius:8px;box-shadow:0 1px 4px #0002}
h1{font-size:1.3rem;margin-top:0}input{width:100%;box-sizing:border-box;font-size:1rem;padding:.5rem;margin:.5rem 0 1rem}
button{font-size:1rem;padding:.5rem 1.2rem;background:#1f6f43;color:#fff;border:0;border-radius:4px;cursor:pointer}a.deny{margin-left:1rem;color:#a33}
.note{color:#666;font-size:.9rem}</style></head><body><main><p class="note">Demo authorization server</p>${body}</main></body></html>`
}

function loginPage (uid: string, clientId: string): string {
  return page('Sign in', `<h1>Sign in to continue to ${escape(clientId)}</h1>
<form method="post" action="/interaction/${escape(uid)}">
<input type="hidden" name="prompt" value="login">
<label for="login">Username (any name signs in)</label>
<input id="login" name="login" required autofocus autocomplete="off" placeholder="alice">
<button type="submit">Sign in</button></form>`)
}

function consentPage (uid: string, clientId: string, account: string, scopes: string[]): string {
  return page('Allow access', `<h1>Allow ${escape(clientId)} to access your account?</h1>
<p>Signed in as <strong>${escape(account)}</strong>. It asks for: ${scopes.map((s) => `<code>${escape(s)}</code>`).join(', ') || 'basic access'}.</p>
<form method="post" action="/interaction/${escape(uid)}">
<input type="hidden" name="prompt" value="consent">
<button type="submit">Allow</button><a class="deny" href="/interaction/${escape(uid)}/abort">Deny</a></form>`)
}

/** The account chooser of `prompt=select_account`: continue as `current` (when signed in here), or sign in as another user. */
function chooserPage (uid: string, clientId: string, current: string | undefined): string {
  const action = `/interaction/${escape(uid)}`
  const keep = current === undefined
    ? ''
    : `<form method="post" action="${action}"><input type="hidden" name="prompt" value="select_account">
<button type="submit" name="continue" value="yes">Continue as ${escape(current)}</button></form><p>or use another account:</p>`
  return page('Choose an account', `<h1>Choose an account to continue to ${escape(clientId)}</h1>${keep}
<form method="post" action="${action}">
<input type="hidden" name="prompt" value="select_account">
<label for="login">Username (any name signs in)</label>
<input id="login" name="login" required autocomplete="off" placeholder="alice">
<button type="submit">Sign in</button></form>`)
}

/**
 * The user name a sign-in form gave, reduced to the characters account ids may have; `:` among them,
 * as many directories allow (a gateway tells `partner:ann` here from the partner's `ann`).
 */
function loginName (form: URLSearchParams): string {
  return (form.get('login') ?? '').trim().toLowerCase().replace(/[^a-z0-9._:-]/g, '').slice(0, 64) || 'anonymous'
}

/** The provider's own sign-out question (RP-initiated logout); `form` is oidc-provider's hidden form. */
function logoutPage (form: string): string {
  return page('Sign out', `<h1>Sign out of the demo authorization server?</h1>${form}
<button type="submit" form="op.logoutForm" name="logout" value="yes">Yes, sign me out</button>
<button type="submit" form="op.logoutForm">No, stay signed in</button>`)
}

async function readForm (req: IncomingMessage): Promise<URLSearchParams> {
  let body = ''
  for await (const chunk of req) {
    body += String(chunk)
    if (body.length > 10_000) throw new Error('form too large')
  }
  return new URLSearchParams(body)
}

/** The sign-in and consent pages, driven by oidc-provider's interaction API. */
async function interaction (provider: Provider, req: IncomingMessage, res: ServerResponse, signIn: AuthorizationServerOptions['signIn']): Promise<void> {
  const details = await provider.interactionDetails(req, res)
  const { uid, prompt, params, session } = details
  const clientId = String(params.client_id)
  if (req.url?.endsWith('/abort')) {
    await provider.interactionFinished(req, res, { error: 'access_denied', error_description: 'The user denied access.' }, { mergeWithLastSubmission: false })
    return
  }
  if (req.method === 'GET') {
    res.setHeader('content-type', 'text/html; charset=utf-8')
    res.setHeader('cache-control', 'no-store')
    const scopes = String(params.scope ?? '').split(' ').filter((s) => s && s !== 'openid')
    res.end(prompt.name === 'login'
      ? loginPage(uid, clientId)
      : prompt.name === 'select_account' ? chooserPage(uid, clientId, session?.accountId) : consentPage(uid, clientId, session?.accountId ?? '', scopes))
    return
  }
  const form = await readForm(req)
  if (prompt.name === 'login' && form.get('prompt') === 'login') {
    const accountId = loginName(form)
    await provider.interactionFinished(req, res, { login: { accountId, ...signIn?.(accountId) } }, { mergeWithLastSubmission: false })
    return
  }
  if (prompt.name === 'select_account' && form.get('prompt') === 'select_account') {
    const current = form.get('continue') === 'yes' ? session?.accountId : undefined
    const accountId = current ?? loginName(form)
    await provider.interactionFinished(req, res, { select_account: {}, login: { accountId, ...signIn?.(accountId) } }, { mergeWithLastSubmission: false })
    return
  }
  if (prompt.name === 'consent' && form.get('prompt') === 'consent') {
    const grant = details.grantId ? (await provider.Grant.find(details.grantId))! : new provider.Grant({ accountId: session!.accountId, clientId })
    const missing = prompt.details as { missingOIDCScope?: string[], missingOIDCClaims?: string[] }
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '))
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims)
    await provider.interactionFinished(req, res, { consent: { grantId: await grant.save() } }, { mergeWithLastSubmission: true })
    return
  }
  res.statusCode = 400
  res.end('unexpected form')
}

/** The provider's signing keys as its `jwks` option takes them: one RS256 key, its `kid` from oidc-provider. */
async function signingJwks (key: Awaited<ReturnType<typeof generateKeyPair>>['privateKey']): Promise<{ keys: JWK[] }> {
  return { keys: [{ ...(await exportJWK(key)), alg: 'RS256', use: 'sig' }] }
}

/**
 * The prompts: with `keepSignIn`, oidc-provider's own (a sign-in is remembered), else a sign-in
 * counts only for the authorization request that asked for it (no single sign-on); with
 * `selectAccount`, an account chooser first when the client asks for `prompt=select_account`.
 */
function interactionPrompts (keepSignIn: boolean, selectAccount: boolean): interactionPolicy.Prompt[] {
  const policy = keepSignIn ? interactionPolicy.base() : signInEveryTime()
  if (selectAccount) policy.add(new interactionPolicy.Prompt({ name: 'select_account', requestable: true }), 0)
  return policy
}

/** No single sign-on: a sign-in counts only for the authorization request that asked for it. */
function signInEveryTime (): interactionPolicy.DefaultPolicy {
  const policy = interactionPolicy.base()
  policy.get('login')!.checks.add(new interactionPolicy.Check('demo_sign_in_every_time', 'the demo asks for a sign-in each time',
    (ctx: KoaContextWithOIDC) => ctx.oidc.result?.login ? interactionPolicy.Check.NO_NEED_TO_PROMPT : interactionPolicy.Check.REQUEST_PROMPT))
  return policy
}

export async function startAuthorizationServer (options: AuthorizationServerOptions): Promise<AuthorizationServer> {
  const server = createServer()
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', resolve)
  })
  const { port } = server.address() as AddressInfo
  const issuer = options.issuer ?? `http://${options.publicHost ?? '127.0.0.1'}:${port}${options.issuerPath ?? ''}`
  const mount = options.issuer === undefined ? options.issuerPath ?? '' : ''
  let { privateKey } = await generateKeyPair('RS256', { extractable: true })

  const configuration: Configuration = {
    adapter: options.adapter ?? memoryAdapter(),
    clients: options.clients.map((client): ClientMetadata => ({
      ...client,
      ...(client.backchannel_logout_uri ? { backchannel_logout_session_required: true } : {}),
      token_endpoint_auth_method: 'client_secret_post',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    })).concat((options.machineClients ?? []).map((client): ClientMetadata => ({
      ...client,
      redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_post',
      grant_types: ['client_credentials'],
      response_types: [],
    }))),
    async findAccount (_ctx, id) {
      return { accountId: id, claims: async () => ({ ...options.extraClaims?.(id), ...accountClaims(id) }) }
    },
    claims: options.scopeClaims ?? { openid: ['sub'], profile: ['name'], email: ['email', 'email_verified'], groups: ['groups'] },
    cookies: { keys: [randomBytes(32).toString('base64url')] },
    jwks: await signingJwks(privateKey),
    features: {
      devInteractions: { enabled: false },
      rpInitiatedLogout: options.logout
        ? {
            enabled: true,
            logoutSource: (ctx, form) => { ctx.type = 'html'; ctx.body = logoutPage(form) },
            postLogoutSuccessSource: (ctx) => { ctx.type = 'html'; ctx.body = page('Signed out', '<h1>You are signed out</h1>') },
          }
        : { enabled: false },
      // A client revokes only its own tokens (oidc-provider's default, written out: the default prints a notice).
      revocation: { enabled: options.logout === true, allowedPolicy: async (_ctx, client, token) => token.clientId === client.clientId },
      backchannelLogout: { enabled: options.logout === true },
      clientCredentials: { enabled: options.machineClients !== undefined },
      // Any confidential client may ask about any token (the gateway asks with its own credentials).
      introspection: { enabled: options.resources !== undefined, allowedPolicy: async (_ctx, client) => client.clientAuthMethod !== 'none' },
      resourceIndicators: options.resources === undefined
        ? { enabled: false }
        : {
            enabled: true,
            defaultResource: async (_ctx, _client, oneOf) => oneOf,
            useGrantedResource: async () => true,
            getResourceServerInfo: async (_ctx, indicator) => {
              const server = Object.hasOwn(options.resources!, indicator) ? options.resources![indicator]! : undefined
              if (server === undefined) throw new errors.InvalidTarget()
              return {
                scope: server.scope,
                audience: server.audience ?? indicator,
                accessTokenTTL: server.ttl ?? 3600,
                accessTokenFormat: server.format ?? 'jwt',
                ...(server.format === 'opaque' ? {} : { jwt: { sign: { alg: 'RS256' } } }),
              }
            },
          },
    },
    ...(options.tokenClaims === undefined ? {} : { extraTokenClaims: async (_ctx, token) => options.tokenClaims!(String(token.clientId)) }),
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}`, policy: interactionPrompts(options.logout === true || options.keepSignIn === true, options.selectAccount === true) },
    // What `prompt` may ask for, as real providers list it (the gateway reads select_account here).
    discovery: { prompt_values_supported: ['none', 'login', 'consent', ...(options.selectAccount ? ['select_account'] : [])] },
    // Back-channel logout tokens go to gateways on this machine: without this, oidc-provider's
    // protection against requests to special-use addresses (loopback among them) refuses them.
    ...(options.logout ? { fetch: (url: string | URL | Request, init?: RequestInit) => { delete (init as { dispatcher?: unknown } | undefined)?.dispatcher; return fetch(url, init) } } : {}),
    ...(options.acrValues === undefined ? {} : { acrValues: options.acrValues }),
    issueRefreshToken: async () => true,
    ...(options.rotateRefreshTokens === true ? { rotateRefreshToken: () => true } : {}),
    ttl: {
      // A resource server's accessTokenTTL (getResourceServerInfo) reaches a token only through here.
      ClientCredentials: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? 3600,
      AccessToken: (ctx, token) => options.accessTokenTtl?.(String(token.clientId), String(ctx.oidc.params?.grant_type ?? '')) ?? 3600,
      AuthorizationCode: 60,
      IdToken: 3600,
      RefreshToken: 86_400,
      Interaction: 600,
      Session: 3600,
      Grant: 86_400,
    },
  }
  let provider = new Provider(issuer, configuration)
  let callback = provider.callback()
  const served = new Map<string, number>()
  server.on('request', (req, res) => {
    const pathname = new URL(req.url ?? '/', issuer).pathname
    served.set(pathname, (served.get(pathname) ?? 0) + 1)
    if (!req.url?.startsWith('/interaction/')) {
      // Under an issuer path, oidc-provider reads its mount point from originalUrl (as under Express).
      if (mount !== '' && req.url?.startsWith(`${mount}/`)) {
        (req as IncomingMessage & { originalUrl?: string }).originalUrl = req.url
        req.url = req.url.slice(mount.length)
      }
      // oidc-provider answers every request itself, errors included; its promise carries nothing.
      void callback(req, res)
      return
    }
    interaction(provider, req, res, options.signIn).catch((error: unknown) => {
      res.statusCode = 400
      res.setHeader('content-type', 'text/html; charset=utf-8')
      res.end(page('Sign-in problem', `<h1>This sign-in cannot continue</h1><p>${escape(error instanceof Error ? error.message : 'unknown problem')}</p>`))
    })
  })
  return {
    issuer,
    port,
    get provider () { return provider },
    get signingKey () { return privateKey },
    async rotateSigningKey () {
      privateKey = (await generateKeyPair('RS256', { extractable: true })).privateKey
      provider = new Provider(issuer, { ...configuration, jwks: await signingJwks(privateKey) })
      callback = provider.callback()
    },
    requests: (pathname) => served.get(pathname) ?? 0,
    dropConnections: () => server.closeAllConnections(),
    close: async () => {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
