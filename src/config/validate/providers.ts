// One entry of `providers`: its name, issuer or endpoints, scope, secret, and plain http only to
// loopback.
import type { ProviderConfig } from '../types.js'
import { PRESET_NAMES } from '../presets.js'
import { Issues, type Path } from '../problems.js'
import { plainHttpHost, plainHttpProblem, shippedSecretProblem } from '../safety.js'
import { type ProviderRaw, type KeyPath, duration, url } from './values.js'

/** The documents discovery reads: OpenID Connect Discovery 1.0 and RFC 8414. */
const WELL_KNOWN = ['/.well-known/openid-configuration', '/.well-known/oauth-authorization-server']

/**
 * The issuer whose discovery document `url` is, when `url` is one: the suffix after the issuer
 * (OIDC), or inserted between host and path (RFC 8414 section 3). Its query is not part of it.
 */
function issuerOfDiscoveryUrl (url: string): string | undefined {
  const parsed = new URL(url)
  const origin = parsed.origin
  const pathname = parsed.pathname.replace(/\/+$/, '')
  for (const suffix of WELL_KNOWN) {
    if (pathname.endsWith(suffix)) return `${origin}${pathname.slice(0, -suffix.length)}`
    if (pathname.startsWith(`${suffix}/`)) return `${origin}${pathname.slice(suffix.length)}`
  }
  return undefined
}

const PRESET_HINT = `or set preset: ${PRESET_NAMES.join(', ')}`

export function validateProvider (issues: Issues, name: string, raw: ProviderRaw, loopbackOnly: boolean): ProviderConfig {
  const path = ['providers', name]
  const at = (key: string): Path => [...path, key]
  // A key that has a problem, or that a misspelt key next to it was meant to be, counts as given:
  // nothing that depends on it is reported.
  const given = (key: keyof ProviderRaw): boolean => raw[key] !== undefined || issues.touched(at(key))
  const issuer = url(issues, at('issuer'), raw.issuer, ['http', 'https'])
  const pasted = issuer === undefined ? undefined : issuerOfDiscoveryUrl(issuer)
  if (pasted !== undefined) issues.add(at('issuer'), 'is the URL of the discovery document, not the issuer', `use issuer: ${pasted}`)
  const scope = raw.scope ?? ''
  // A preset (even one with a problem, reported already) supplies the scope and the location.
  const preset = given('preset')
  const tokenOnly = !given('clientId') && !given('clientSecret')
  if (tokenOnly) checkTokenOnly(issues, at, given, preset)
  else checkClient(issues, at, given)
  if (!given('scope') && !preset && !tokenOnly) issues.add(at('scope'), 'is required', PRESET_HINT)
  const openid = scope.split(/\s+/).includes('openid')
  const { authorizeUrl, tokenUrl } = tokenOnly ? { authorizeUrl: undefined, tokenUrl: undefined } : validateGrantEndpoints(issues, at, raw, given, preset, openid)
  const userinfoUrl = url(issues, at('userinfoUrl'), raw.userinfoUrl, ['http', 'https'])
  const shipped = raw.clientSecret === undefined ? undefined : shippedSecretProblem(raw.clientSecret, loopbackOnly)
  if (shipped !== undefined) issues.add(at('clientSecret'), shipped)
  const allowInsecure = raw.dangerouslyAllowInsecureHttp
  checkPlainHttpEndpoints(issues, name, at, { issuer, authorizeUrl, tokenUrl, userinfoUrl }, allowInsecure)
  return {
    name,
    clientId: raw.clientId ?? '',
    clientSecret: raw.clientSecret ?? '',
    tokenOnly,
    authorizeUrl,
    tokenUrl,
    scope,
    openid,
    pkce: raw.pkce,
    issuer: issuer?.replace(/\/+$/, ''),
    userinfoUrl,
    claims: raw.claims,
    timeoutMs: duration(issues, at('timeout'), raw.timeout, 100, 120_000),
    dangerouslyAllowInsecureHttp: allowInsecure,
    ...(raw.preset !== undefined ? { preset: raw.preset } : {}),
    endSession: raw.endSession,
    // Filled in once the routes and hosts are known (keepNamedClaims).
    keptClaims: [],
  }
}

/** A client is its id and its secret: one without the other is a slip, not a token-only issuer. */
function checkClient (issues: Issues, at: KeyPath, given: (key: keyof ProviderRaw) => boolean): void {
  if (!given('clientId')) issues.add(at('clientId'), 'is required with clientSecret', 'leave out both for a provider whose tokens machine clients bring (a token-only issuer)')
  if (!given('clientSecret')) issues.add(at('clientSecret'), 'is required with clientId', 'leave out both for a provider whose tokens machine clients bring (a token-only issuer)')
}

/**
 * A provider without a client: an issuer of tokens that machine clients bring (GitHub Actions,
 * GitLab CI, Kubernetes). Its keys come from discovery, so it needs `issuer`; what only a sign-in
 * uses is refused rather than ignored.
 */
function checkTokenOnly (issues: Issues, at: KeyPath, given: (key: keyof ProviderRaw) => boolean, preset: boolean): void {
  if (preset) {
    issues.add(at('preset'), 'fills in a sign-in client, and this provider has no clientId and clientSecret (a token-only issuer)', 'write its issuer instead, or give clientId and clientSecret')
    return
  }
  if (!given('issuer')) issues.add(at('issuer'), 'is required for a provider without clientId and clientSecret (a token-only issuer): its keys come from discovery', 'or give clientId and clientSecret for a provider people sign in with')
  for (const key of ['authorizeUrl', 'tokenUrl', 'scope'] as const) {
    if (given(key)) issues.add(at(key), 'is for signing in, and this provider has no clientId and clientSecret (a token-only issuer): nobody signs in with it', 'remove it, or give clientId and clientSecret')
  }
}

/**
 * A provider's authorization and token endpoints. With an issuer, discovery fills in missing
 * endpoints; without one both URLs are needed, and an openid scope needs the issuer anyway.
 */
function validateGrantEndpoints (
  issues: Issues, at: KeyPath, raw: ProviderRaw, given: (key: keyof ProviderRaw) => boolean, preset: boolean, openid: boolean
): { authorizeUrl: string | undefined, tokenUrl: string | undefined } {
  for (const key of ['authorizeUrl', 'tokenUrl'] as const) {
    if (!given(key) && !given('issuer') && !preset) issues.add(at(key), 'is required without issuer', PRESET_HINT)
  }
  const authorizeUrl = url(issues, at('authorizeUrl'), raw.authorizeUrl, ['http', 'https'])
  const tokenUrl = url(issues, at('tokenUrl'), raw.tokenUrl, ['http', 'https'])
  if (openid && !given('issuer') && given('authorizeUrl') && !preset) {
    issues.add(at('issuer'), 'is required when the scope includes openid (ID tokens are checked against the issuer and its keys)')
  }
  return { authorizeUrl, tokenUrl }
}

/** Each endpoint on plain http to a host that is not loopback, unless dangerouslyAllowInsecureHttp. */
function checkPlainHttpEndpoints (
  issues: Issues, name: string, at: KeyPath, endpoints: Record<string, string | undefined>, allowInsecure: boolean | undefined
): void {
  for (const [key, endpoint] of Object.entries(endpoints)) {
    const host = endpoint === undefined || allowInsecure ? undefined : plainHttpHost(endpoint)
    if (host !== undefined) issues.add(at(key), plainHttpProblem(host, name))
  }
}
