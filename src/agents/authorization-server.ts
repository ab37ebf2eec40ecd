// The gateway as the OAuth 2.1 authorization server of MCP clients and CLIs, for the routes with
// `agents: true`: panva's oidc-provider (OpenID Certified) embedded, not a hand-written one. It does
// registration (RFC 7591), PKCE, resource indicators (RFC 8707), single-use codes, refresh rotation
// with reuse detection and revocation (RFC 7009); the gateway gives it its storage (the store,
// sealed: store-adapter.ts), its signing key (the assertion key ring: access tokens are ES256 JWTs
// the routes check themselves, grant-tokens.ts), its accounts (the person of the grant's session)
// and its pages (routes/agents.ts: the sign-in at the route's provider, then consent).
// Its endpoints live under /oauth/agents/; its own discovery and userinfo are not served (the
// gateway publishes RFC 8414 metadata itself, src/routes/agents.ts).
// @see https://github.com/panva/node-oidc-provider/blob/main/docs/README.md
import Provider, { errors, type Configuration, type KoaContextWithOIDC } from 'oidc-provider'
import { createHash } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { AgentsConfig } from '../config/types.js'
import type { KeyRing } from '../assertion/keys.js'
import type { Clock } from '../ops/clock.js'
import type { Logger } from '../ops/logger.js'
import { agentTokenAudience } from '../oauth/urls.js'
import type { Sealer } from '../session/seal.js'
import type { SessionStore } from '../store/store.js'
import { deviceOnly, privateUse, registrationProblem } from './clients.js'
import { AGENT_ENDPOINTS, AGENT_SCOPE, AGENTS_PREFIX, DEVICE_CODE_GRANT } from './endpoints.js'
import { DevicePolling, POLL_INTERVAL_S } from './device-polling.js'
import { devicePageSources, type DevicePages } from './device-flow.js'
import { documentFetch } from './document-fetch.js'
import type { AgentGrants } from './grants.js'
import { told, type AgentsCount } from './provider-events.js'
import { settleAnswer } from './request-undo.js'
import { keepClient, storeAdapter } from './store-adapter.js'

/** The name under which the gateway's client rules run (no client sends it). */
const CHECKED = 'x_gateway_checked'
/** How long a registered client nobody has allowed yet is kept. */
const UNUSED_CLIENT_MS = 3_600_000
/** Client metadata the gateway has no use for, dropped at registration: large (jwks), fetched by the server (sector_identifier_uri, jwks_uri, request_uris) or shown nowhere. */
const UNUSED_METADATA = ['jwks', 'jwks_uri', 'sector_identifier_uri', 'request_uris', 'contacts', 'logo_uri', 'client_uri', 'policy_uri', 'tos_uri', 'post_logout_redirect_uris', 'initiate_login_uri', 'backchannel_logout_uri', 'frontchannel_logout_uri', 'software_statement']
/** How long a code lives (OAuth 2.1 recommends a short lifetime; SPEC: 60 s). */
const CODE_TTL_SECONDS = 60
/** How long a device code (and its user code) may wait for the person (RFC 8628 §3.2's example). */
const DEVICE_CODE_TTL_SECONDS = 600

export interface AuthorizationServerOptions {
  /** `server.baseUrl`: the issuer. */
  issuer: string
  agents: AgentsConfig
  /** Each agents route's path by its resource identifier (`{baseUrl}<path>`). */
  resources: ReadonlyMap<string, string>
  /** Its cookies' names (oauth/urls.ts's cookieNames: the session, interaction and resume cookies). */
  cookieNames: readonly [string, string, string]
  /** How long a sign-in and consent may take (`state.ttl`). */
  interactionTtlMs: number
  store: SessionStore
  sealer: Sealer
  keys: KeyRing
  grants: AgentGrants
  clock: Clock
  log: Logger
  /** Counts what happens (registrations, tokens, refusals) for /metrics: bounded names only. */
  count: AgentsCount
  /** The gateway's error page for what cannot go back to the client (an unknown client, a redirect URI not registered). */
  renderError: (status: number, error: string, description: string | undefined) => string
  /** The device flow's pages, in the gateway's look. */
  devicePages: DevicePages
  /** The headers of the gateway's pages (src/http/pages.ts PAGE_HEADERS), on every page of the device flow and every error page. */
  pageHeaders: Readonly<Record<string, string>>
  /** A certificate authority the hosts of `clientMetadataPrivateHosts` may be signed by, besides Node's (tests: their own). */
  extraCa?: string | undefined
}

/** oidc-provider with the key the ring signs with now; rebuilt when the ring rotates. */
export class AuthorizationServer {
  private built: { kid: string, provider: Provider, callback: ReturnType<Provider['callback']> } | undefined

  private readonly issuer: URL
  private readonly polling: DevicePolling

  constructor (private readonly options: AuthorizationServerOptions) {
    this.issuer = new URL(options.issuer)
    this.polling = new DevicePolling(options.store, options.sealer, options.clock, DEVICE_CODE_TTL_SECONDS * 1000)
  }

  /** Keeps a client a person allowed for as long as its grants may live. */
  async keepClient (clientId: string): Promise<void> {
    await keepClient(this.options.store, this.options.sealer, clientId, this.options.agents.refreshTokenTtlMs)
  }

  /** The provider (for the interaction pages: details, Grant, finishing). */
  async provider (): Promise<Provider> {
    return (await this.current()).provider
  }

  /** Lets oidc-provider answer one request under /oauth/agents/ (the request's body not read yet). */
  async handle (req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { callback } = await this.current()
    await callback(this.asIssuer(req), res)
  }

  /** The interaction this browser holds (its interaction cookie) for the page at `req`'s address. */
  async interaction (req: IncomingMessage, res: ServerResponse): ReturnType<Provider['interactionDetails']> {
    return await (await this.provider()).interactionDetails(this.asIssuer(req), res)
  }

  /** Ends the interaction with the person's answer; oidc-provider sends the browser on. */
  async finish (req: IncomingMessage, res: ServerResponse, result: Parameters<Provider['interactionFinished']>[2]): Promise<void> {
    await (await this.provider()).interactionFinished(this.asIssuer(req), res, result, { mergeWithLastSubmission: false })
  }

  /**
   * The device flow's pace (RFC 8628 §3.5), which oidc-provider leaves out: the interval in the
   * device authorization response, and `slow_down` for a CLI that polls sooner than it.
   */
  private async paced (ctx: { path: string, status: number, body: unknown, oidc?: { params?: unknown } }): Promise<void> {
    const body = ctx.body as Record<string, unknown> | undefined
    if (ctx.path === AGENT_ENDPOINTS.device_authorization && ctx.status === 200 && typeof body?.device_code === 'string') {
      ctx.body = { ...body, interval: POLL_INTERVAL_S }
      return
    }
    const params = ctx.oidc?.params as Record<string, unknown> | undefined
    if (ctx.path !== AGENT_ENDPOINTS.token || params?.grant_type !== DEVICE_CODE_GRANT || body?.error !== 'authorization_pending') return
    // A store that fails here leaves the poll unpaced: its answer stands (it was a plain-text 503 from outside oidc-provider).
    const interval = await this.polling.tooSoon(String(params.device_code)).catch(() => undefined)
    if (interval !== undefined) {
      ctx.body = { error: 'slow_down', error_description: `poll at most every ${interval} seconds` }
      this.options.count('token', 'slow_down')
    }
  }

  /**
   * The request as arriving at the issuer (`baseUrl`): its scheme and host, whatever the client sent
   * and whatever a TLS-terminating proxy in front changed, so that oidc-provider's addresses are the
   * issuer's and its cookies are Secure exactly when `baseUrl` is https.
   */
  private asIssuer (req: IncomingMessage): IncomingMessage {
    req.headers['x-forwarded-proto'] = this.issuer.protocol.slice(0, -1)
    req.headers['x-forwarded-host'] = this.issuer.host
    return req
  }

  private async current (): Promise<NonNullable<AuthorizationServer['built']>> {
    const jwk = await this.options.keys.signingJwk()
    if (this.built?.kid !== jwk.kid) {
      const provider = new Provider(this.options.issuer, configuration(this.options, jwk))
      // Koa reads the scheme and host from X-Forwarded-*, which asIssuer sets from baseUrl.
      provider.proxy = true
      told(provider, this.options.count, this.options.log)
      keepNoUnsavedSession(provider)
      provider.use(async (ctx, next) => {
        await next()
        // A token request's success writes (a code or token marked used) before its answer leaves; its failure, its undos (request-undo.ts).
        await settleAnswer(ctx)
        if (!this.options.agents.deviceFlow) return
        if (ctx.path.startsWith(AGENT_ENDPOINTS.code_verification)) unframed(ctx, this.options.pageHeaders, ctx.body)
        await this.paced(ctx)
      })
      this.built = { kid: jwk.kid, provider, callback: provider.callback() }
    }
    return this.built
  }
}

/**
 * A device page asked by a browser without a live session of oidc-provider's (a stranger, a person
 * whose session ended, a stale or forged cookie) failed with a 500 of Koa's own (an attacker's
 * finding). On an error, oidc-provider 9 makes a form secret in the session the request began, and
 * its last step then calls `persist()`, which throws for a session never saved. Such a session is
 * not kept (one per stranger's request would fill the store); the request's answer stands: the
 * code entry, saying why, or the error page.
 */
function keepNoUnsavedSession (provider: Provider): void {
  const { persist } = provider.Session.prototype
  provider.Session.prototype.persist = async function (this: InstanceType<Provider['Session']>): Promise<string> {
    return typeof this.exp === 'number' ? await persist.call(this) : ''
  }
}

/**
 * The one script a page of the device flow runs: oidc-provider's own (lib/response_modes/form_post.js),
 * which posts the code that came in the link (`?user_code=`) with its CSRF field, so that the person
 * sees the confirmation. Allowed by its hash, and only on a page that holds it as written.
 */
const FORM_POST_SCRIPT = `
    document.addEventListener('DOMContentLoaded', function () { document.forms[0].submit() });
  `
const FORM_POST_ALLOWED = `; script-src 'sha256-${createHash('sha256').update(FORM_POST_SCRIPT).digest('base64')}'`

/** Every answer of the device pages (the gateway's, and oidc-provider's own: the form that posts a code from its link) is never framed or cached. */
function unframed (ctx: { set: (name: string, value: string) => void }, headers: Readonly<Record<string, string>>, body?: unknown): void {
  ctx.set('cache-control', 'no-store')
  for (const [name, value] of Object.entries(headers)) ctx.set(name, value)
  if (typeof body === 'string' && body.includes(`<script>${FORM_POST_SCRIPT}</script>`)) ctx.set('content-security-policy', headers['content-security-policy'] + FORM_POST_ALLOWED)
}

function configuration (options: AuthorizationServerOptions, jwk: Record<string, unknown>): Configuration {
  return { ...storage(options, jwk), ...clients(), ...grants(options), features: features(options), fetch: documentFetch(options.agents.clientMetadataPrivateHosts, options.clock, options.extraCa) }
}

const seconds = (ms: number) => Math.max(1, Math.floor(ms / 1000))

/** Where it keeps what it issues (the store, sealed), the key it signs with, its cookies, its addresses and pages. */
function storage (options: AuthorizationServerOptions, jwk: Record<string, unknown>): Configuration {
  return {
    adapter: storeAdapter(options.store, options.sealer, {
      grantRevoked: async (grantId) => await options.grants.end(grantId),
      unusedClientMs: UNUSED_CLIENT_MS,
      clock: options.clock,
    }),
    jwks: { keys: [jwk] },
    routes: { ...AGENT_ENDPOINTS, jwks: `${AGENTS_PREFIX}/jwks`, userinfo: `${AGENTS_PREFIX}/userinfo`, end_session: `${AGENTS_PREFIX}/end-session` },
    cookies: {
      keys: options.sealer.keys.map((key) => key.derive('agents-cookies').export().toString('base64url')),
      // Its session cookie (and the `.sig` beside it) only under the server's own paths: an
      // application on the gateway's host, proxied or behind forward-auth, never gets it.
      long: { signed: true, httpOnly: true, sameSite: 'lax', path: `${AGENTS_PREFIX}/` },
      short: { signed: true, httpOnly: true, sameSite: 'lax' },
      names: { session: options.cookieNames[0], interaction: options.cookieNames[1], resume: options.cookieNames[2] },
    },
    interactions: { url: (_ctx, interaction) => `${AGENTS_PREFIX}/interaction/${interaction.uid}` },
    renderError: (ctx: KoaContextWithOIDC, out, error) => {
      // A page of the gateway's own, as every other: never framed.
      unframed(ctx, options.pageHeaders)
      ctx.type = 'html'
      ctx.body = options.renderError(error instanceof errors.OIDCProviderError ? error.statusCode : 500, String(out.error), out.error_description === undefined ? undefined : String(out.error_description))
    },
  }
}

/** The origin of `uri`, or undefined when it is no URL. */
function originOf (uri: string): string | undefined {
  try {
    return new URL(uri).origin
  } catch {
    return undefined
  }
}

/** Public clients only, proven by PKCE (S256), held to the gateway's rules (clients.ts). */
function clients (): Configuration {
  return {
    responseTypes: ['code'],
    pkce: { required: () => true },
    allowOmittingSingleRegisteredRedirectUri: false,
    clientDefaults: {
      id_token_signed_response_alg: 'ES256',
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    },
    clientAuthMethods: ['none'],
    // A client in a web page (a browser-based MCP client) calls the token, revocation and device
    // endpoints from the origin of one of its redirect URIs (oidc-provider's default, written out:
    // the default prints a notice to the console).
    clientBasedCORS: (_ctx, origin, client) => origin !== 'null' && (client.redirectUris ?? []).some((uri) => originOf(uri) === origin),
    // The gateway's own rules on every client, checked before oidc-provider's (clients.ts).
    extraClientMetadata: {
      properties: [CHECKED],
      validator: (_ctx, key, value, metadata) => {
        if (key !== CHECKED) return
        if (value !== undefined) throw new errors.InvalidClientMetadata(`${CHECKED} is not client metadata`)
        const problem = registrationProblem(metadata)
        if (problem?.field === 'redirect_uris') throw Object.assign(new errors.InvalidRedirectUri(), { error_description: problem.message }) // it takes none: its own is the authorization request's
        if (problem !== undefined) throw new errors.InvalidClientMetadata(problem.message)
        // The route's scope is granted on the consent page whatever the client registered: a `scope`
        // read from the route's metadata (MCP clients register one) restricts nothing here.
        delete metadata.scope
        for (const unused of UNUSED_METADATA) delete metadata[unused]
        // Public clients only: the secret oidc-provider makes for a client that names no method (RFC 7591's default) is dropped.
        delete metadata.client_secret
        delete metadata.client_secret_expires_at
        if (deviceOnly(metadata)) {
          metadata.redirect_uris = []
          metadata.response_types = []
        }
        // A private-use scheme is a native app's (RFC 8252 §7.1), which oidc-provider wants said.
        if ((metadata.redirect_uris as string[]).some(privateUse)) metadata.application_type = 'native'
      },
    },
    scopes: ['offline_access'],
    claims: { openid: ['sub'] },
  }
}

/** What a grant is: made on the consent page only, bound to the grant's session, its tokens' lifetimes. */
function grants (options: AuthorizationServerOptions): Configuration {
  const { agents } = options
  return {
    // A grant is made only on the consent page (never reused silently): each authorization asks the person.
    loadExistingGrant: async (ctx) => {
      const grantId = ctx.oidc.result?.consent?.grantId
      return typeof grantId === 'string' ? await ctx.oidc.provider.Grant.find(grantId) : undefined
    },
    findAccount: async (_ctx, sub, token) => {
      // A refresh after the grant's session ended (sign-out everywhere, back-channel logout, revoke) finds nobody: invalid_grant.
      const grantId = token?.grantId
      if (typeof grantId === 'string' && !(await options.grants.alive(grantId))) return undefined
      // A client whose grants are used is kept as long as they may be.
      if (typeof token?.clientId === 'string') await keepClient(options.store, options.sealer, token.clientId, agents.refreshTokenTtlMs)
      return { accountId: sub, claims: () => ({ sub }) }
    },
    extraTokenClaims: (_ctx, token) => token.kind === 'AccessToken' && token.grantId !== undefined ? { gid: token.grantId } : undefined,
    issueRefreshToken: (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    // A code's tokens outlive oidc-provider's own sign-in session (kept only for the interaction):
    // the grant's life is its gateway session's and refreshTokenTtl (oidc-provider would end them
    // with that session, minutes later, for want of `offline_access`, which agents never ask).
    expiresWithSession: () => false,
    rotateRefreshToken: true,
    ttl: {
      AccessToken: seconds(agents.accessTokenTtlMs),
      AuthorizationCode: CODE_TTL_SECONDS,
      DeviceCode: DEVICE_CODE_TTL_SECONDS,
      RefreshToken: seconds(agents.refreshTokenTtlMs),
      Grant: seconds(agents.refreshTokenTtlMs),
      Interaction: seconds(options.interactionTtlMs),
      Session: seconds(options.interactionTtlMs),
    },
  }
}

function features (options: AuthorizationServerOptions): Configuration['features'] {
  const { agents, devicePages } = options
  const resources = [...options.resources.keys()]
  return {
    devInteractions: { enabled: false },
    deviceFlow: {
      enabled: agents.deviceFlow,
      // 8 letters from 20 consonants no one mistakes for another (RFC 8628 §6.1), shown as XXXX-XXXX.
      charset: 'base-20',
      mask: '****-****',
      // Nothing about the device is kept or shown: its address could be anyone's (a forwarded header).
      deviceInfo: () => ({}),
      ...devicePageSources(devicePages, options.resources, options.store, DEVICE_CODE_TTL_SECONDS * 1000),
    },
    userinfo: { enabled: false },
    rpInitiatedLogout: { enabled: false },
    // RFC 7009: a client revokes only the tokens issued to it; another's is answered 200 and left as
    // it is. oidc-provider's default, written out: the default prints a notice to the console.
    revocation: { enabled: true, allowedPolicy: async (_ctx, client, token) => token.clientId === client.clientId },
    registration: { enabled: agents.registration, issueRegistrationAccessToken: false },
    // A client named by its metadata document's https URL; held to the gateway's client rules as a
    // registered one is (the validator above runs on it too).
    clientIdMetadataDocument: {
      enabled: agents.clientMetadataDocuments,
      ack: 'draft-02',
      cacheDuration: { min: 60, max: 86_400 },
    },
    resourceIndicators: {
      enabled: true,
      // With one agents route, a client that names no resource gets that route's tokens. With
      // several, a device code must name one (the person is shown which); an authorization request
      // that names none is refused before it gets here (routes/agents.ts).
      defaultResource: (ctx) => {
        if (resources.length === 1) return resources[0]!
        if (ctx.oidc.route === 'device_authorization') throw new errors.InvalidTarget(`resource is required: name one of the routes agents may reach (${resources.join(', ')})`)
        return undefined
      },
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => {
        if (!resources.includes(resource)) throw new errors.InvalidTarget('the resource is not a route of this gateway that agents may reach')
        // A grant is for one route (the person is shown which): a device code naming two was taken
        // here and refused only at the person's consent page (an outside tester's note).
        if (Array.isArray(ctx.oidc.params?.resource) && ctx.oidc.params.resource.length > 1) throw new errors.InvalidTarget('name one resource: a grant is for one route agents may reach')
        return { scope: AGENT_SCOPE, audience: agentTokenAudience(resource), accessTokenTTL: seconds(agents.accessTokenTtlMs), accessTokenFormat: 'jwt', jwt: { sign: { alg: 'ES256' } } }
      },
    },
  }
}
