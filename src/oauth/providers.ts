// The configured providers, resolved for use: OIDC discovery (<issuer>/.well-known/openid-configuration)
// fills in endpoints the config leaves out (explicit URLs win) and gives the JWKS that ID tokens are
// checked against. Discovery starts with the gateway and is retried; until it succeeds, sign-ins with
// that provider answer 502 provider_unavailable instead of the gateway refusing to start. Every call
// here (discovery, the JWKS) goes through providerFetch and ends within the provider's `timeout`.
// @see https://openid.net/specs/openid-connect-discovery-1_0.html
import { systemClock, type Clock } from '../ops/clock.js'
import type { Logger } from '../ops/logger.js'
import * as oauth from 'oauth4webapi'
import type { ProviderConfig } from '../config/types.js'
import { plainHttpHost } from '../config/safety.js'
import { GatewayError, unknownProvider } from '../errors.js'
import { DiscoveryFailure, discoveryUrl, networkCode } from './discovery-failure.js'
import { IssuerKeys } from './issuer-keys.js'
import { providerFetch } from './provider-http.js'

/** A provider with every endpoint known. */
export interface ResolvedProvider extends ProviderConfig {
  authorizeUrl: string
  tokenUrl: string
  /** The identifier `iss` must carry: the configured issuer, else the authorize URL's origin. */
  expectedIssuer: string
  /** The provider's signing keys (discovery's `jwks_uri`), when it publishes them: ID tokens, logout tokens and machine clients' tokens are checked against this one set. */
  keys: IssuerKeys | undefined
  /**
   * Where opaque access tokens are checked (discovery's `introspection_endpoint`).
   * @see https://www.rfc-editor.org/rfc/rfc8414#section-2
   */
  introspectionUrl: string | undefined
  /**
   * Whether discovery advertised `authorization_response_iss_parameter_supported`: then every
   * callback must carry `iss`. @see https://www.rfc-editor.org/rfc/rfc9207#section-3
   */
  issParameterSupported: boolean
  /**
   * Where sign-out sends the browser (RP-initiated logout): discovery's `end_session_endpoint`,
   * unless `endSession: false`. @see https://openid.net/specs/openid-connect-rpinitiated-1_0.html#OPMetadata
   */
  endSessionUrl: string | undefined
  /**
   * Where sign-out revokes the tokens: discovery's `revocation_endpoint`, unless `endSession: false`.
   * @see https://www.rfc-editor.org/rfc/rfc8414#section-2
   */
  revocationUrl: string | undefined
  /**
   * The provider sends back-channel logout tokens (discovery's `backchannel_logout_supported`):
   * only then does a session keep the provider's `sid`/`sub` and an entry in the logout index.
   * @see https://openid.net/specs/openid-connect-backchannel-1_0.html#BCSupport
   */
  backchannelLogout: boolean
  /**
   * Whether discovery lists `select_account` in `prompt_values_supported` (GitHub's preset, which has
   * no discovery, supports it too): "Use another account" then asks for `prompt=select_account`,
   * else `prompt=login`.
   * @see https://openid.net/specs/openid-connect-prompt-create-1_0.html (prompt_values_supported)
   */
  selectAccount: boolean
}

/** A discovered endpoint the config's rules refuse: retrying cannot help, so it is reported at once. */
class DisallowedEndpoint extends Error {}

/** After a failed discovery, requests answer at once for this long before it is tried again. */
const RETRY_AFTER_MS = 5000

/**
 * A discovery document that names another issuer than the one configured (`http://localhost:9000`
 * written, `http://127.0.0.1:9000` answered), said with both values: oauth4webapi's own sentence
 * names neither. Undefined for any other failure.
 */
function issuerMismatch (error: unknown, issuer: URL): Error | undefined {
  if (!(error instanceof oauth.OperationProcessingError) || error.code !== oauth.JSON_ATTRIBUTE_COMPARISON) return undefined
  const detail = error.cause as { attribute?: unknown, body?: { issuer?: unknown } } | undefined
  if (detail?.attribute !== 'issuer') return undefined
  const written = issuer.pathname === '/' ? issuer.origin : issuer.href
  return new Error(`the discovery document names the issuer ${JSON.stringify(detail.body?.issuer)}, not ${JSON.stringify(written)}: ` +
    'write the provider\'s issuer exactly as it names itself', { cause: error })
}

export class Providers {
  private readonly resolved = new Map<string, Promise<ResolvedProvider>>()

  constructor (
    private readonly configs: Record<string, ProviderConfig>,
    private readonly log: Logger,
    /** When each provider's keys were read (their refetch rule). */
    private readonly clock: Clock = systemClock
  ) {}

  /** Whether `name` is a provider people sign in with (not a token-only issuer, whose tokens only machine clients bring). */
  signsIn (name: string): boolean {
    return Object.hasOwn(this.configs, name) && !this.configs[name]!.tokenOnly
  }

  /** The issuer of provider `name` as configured (no discovery); undefined for a name not configured, or one without. */
  configuredIssuer (name: string): string | undefined {
    return Object.hasOwn(this.configs, name) ? this.configs[name]!.issuer : undefined
  }

  /** The token endpoint timeout of provider `name` as configured (no discovery); undefined for a name not configured. */
  timeoutOf (name: string): number | undefined {
    return Object.hasOwn(this.configs, name) ? this.configs[name]!.timeoutMs : undefined
  }

  /** Resolves every provider in the background, retrying with backoff, and logs what still fails. */
  warmUp (attempts = 4): void {
    for (const name of Object.keys(this.configs)) this.warmUpOne(name, attempts).catch(() => {})
  }

  private async warmUpOne (name: string, attempts: number): Promise<void> {
    for (let attempt = 1; attempt <= attempts; attempt++) {
      try {
        await this.get(name)
        return
      } catch (error) {
        if (attempt === attempts || (error instanceof Error && error.cause instanceof DisallowedEndpoint)) {
          this.logDiscoveryFailure(name, error)
          return
        }
        this.resolved.delete(name)
        await new Promise((resolve) => setTimeout(resolve, 500 * 2 ** (attempt - 1)))
      }
    }
  }

  /** One line for a provider whose discovery failed: the URL fetched and what came back, then why. */
  private logDiscoveryFailure (name: string, error: unknown): void {
    const cause = error instanceof Error ? error.cause : undefined
    const reason = cause instanceof Error ? cause.message : String(error)
    const failure = cause instanceof DiscoveryFailure ? cause : undefined
    const fetched = failure ? ` (GET ${failure.url}: ${failure.outcome})` : ''
    const issuer = this.configs[name]?.issuer
    this.log.error({ provider: name, url: failure?.url ?? (issuer ? discoveryUrl(new URL(issuer)) : undefined), status: failure?.status, code: failure?.code, reason },
      `OIDC discovery failed for provider ${name}${fetched}; its sign-ins answer 502 provider_unavailable until it succeeds`)
  }

  /** The resolved provider; throws unknown_provider or provider_unavailable. One attempt at a time. */
  get (name: string): Promise<ResolvedProvider> {
    const config = Object.hasOwn(this.configs, name) ? this.configs[name] : undefined
    if (!config) return Promise.reject(unknownProvider(name))
    let pending = this.resolved.get(name)
    if (!pending) {
      const attempt = this.resolve(config)
      this.resolved.set(name, attempt)
      // A failure is answered from the cache for a few seconds, then tried again.
      attempt.catch(() => setTimeout(() => { if (this.resolved.get(name) === attempt) this.resolved.delete(name) }, RETRY_AFTER_MS).unref())
      pending = attempt
    }
    return pending
  }

  private async resolve (config: ProviderConfig): Promise<ResolvedProvider> {
    const needsDiscovery = config.issuer !== undefined && (!config.authorizeUrl || !config.tokenUrl || config.openid)
    if (!needsDiscovery) {
      // No discovery to list prompt values: GitHub documents `prompt=select_account` (its account picker).
      // @see https://docs.github.com/en/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps#1-request-a-users-github-identity
      return { ...config, authorizeUrl: config.authorizeUrl!, tokenUrl: config.tokenUrl!, expectedIssuer: config.issuer ?? new URL(config.authorizeUrl!).origin, keys: undefined, introspectionUrl: undefined, issParameterSupported: false, endSessionUrl: undefined, revocationUrl: undefined, backchannelLogout: false, selectAccount: config.preset === 'github' }
    }
    try {
      return await this.discover(config)
    } catch (error) {
      throw new GatewayError('provider_unavailable', `The OpenID configuration of provider "${config.name}" (its discovery document, from its issuer) could not be read.`, { cause: error })
    }
  }

  /** The discovery document; a {@link DiscoveryFailure} (URL, status or network code) when it cannot be had. */
  private async fetchMetadata (issuer: URL, timeoutMs: number): Promise<oauth.AuthorizationServer> {
    let response: Response
    try {
      response = await oauth.discoveryRequest(issuer, {
        algorithm: 'oidc',
        signal: AbortSignal.timeout(timeoutMs),
        [oauth.allowInsecureRequests]: issuer.protocol === 'http:',
        [oauth.customFetch]: providerFetch,
      })
    } catch (error) {
      throw new DiscoveryFailure(discoveryUrl(issuer), undefined, networkCode(error), error)
    }
    try {
      return await oauth.processDiscoveryResponse(issuer, response)
    } catch (error) {
      throw new DiscoveryFailure(discoveryUrl(issuer), response.status, undefined, issuerMismatch(error, issuer) ?? error)
    }
  }

  private async discover (config: ProviderConfig): Promise<ResolvedProvider> {
    const issuer = new URL(config.issuer!)
    const metadata = await this.fetchMetadata(issuer, config.timeoutMs)
    const { authorizeUrl, tokenUrl } = grantEndpoints(config, metadata)
    const discovered = {
      authorization_endpoint: config.authorizeUrl ? undefined : metadata.authorization_endpoint,
      token_endpoint: config.tokenUrl ? undefined : metadata.token_endpoint,
      userinfo_endpoint: config.userinfoUrl ? undefined : metadata.userinfo_endpoint,
      jwks_uri: metadata.jwks_uri,
      end_session_endpoint: config.endSession && typeof metadata.end_session_endpoint === 'string' ? metadata.end_session_endpoint : undefined,
      revocation_endpoint: config.endSession ? metadata.revocation_endpoint : undefined,
      introspection_endpoint: metadata.introspection_endpoint,
    }
    for (const [field, url] of Object.entries(discovered)) {
      // The same rule as for configured endpoints (src/config/validate.ts): no plain http off this machine.
      const host = url === undefined || config.dangerouslyAllowInsecureHttp ? undefined : plainHttpHost(url)
      if (host !== undefined) {
        throw new DisallowedEndpoint(`the discovery document gives ${field} over plain http to ${JSON.stringify(host)}, which is not a loopback host ` +
          `(set providers.${config.name}.dangerouslyAllowInsecureHttp: true to allow it)`)
      }
    }
    this.log.info({ provider: config.name, issuer: metadata.issuer }, 'OIDC discovery done')
    return {
      ...config,
      authorizeUrl,
      tokenUrl,
      userinfoUrl: config.userinfoUrl ?? metadata.userinfo_endpoint,
      expectedIssuer: metadata.issuer,
      keys: metadata.jwks_uri ? new IssuerKeys(config.name, metadata.jwks_uri, config.timeoutMs, this.clock, this.log) : undefined,
      introspectionUrl: discovered.introspection_endpoint,
      issParameterSupported: metadata.authorization_response_iss_parameter_supported === true,
      endSessionUrl: discovered.end_session_endpoint,
      revocationUrl: discovered.revocation_endpoint,
      backchannelLogout: metadata.backchannel_logout_supported === true,
      selectAccount: Array.isArray(metadata.prompt_values_supported) && metadata.prompt_values_supported.includes('select_account'),
    }
  }
}

/**
 * Where people sign in and codes are exchanged: the config's, else discovery's. A token-only
 * issuer's document needs only its keys (GitHub Actions' and Kubernetes' list no endpoints to sign
 * in at): its endpoints stay empty, never used.
 */
function grantEndpoints (config: ProviderConfig, metadata: oauth.AuthorizationServer): { authorizeUrl: string, tokenUrl: string } {
  const authorizeUrl = config.authorizeUrl ?? metadata.authorization_endpoint ?? (config.tokenOnly ? '' : undefined)
  const tokenUrl = config.tokenUrl ?? metadata.token_endpoint ?? (config.tokenOnly ? '' : undefined)
  if (authorizeUrl === undefined || tokenUrl === undefined) throw new Error('the discovery document has no authorization_endpoint or token_endpoint')
  if ((config.openid || config.tokenOnly) && !metadata.jwks_uri) throw new Error('the discovery document has no jwks_uri')
  return { authorizeUrl, tokenUrl }
}
