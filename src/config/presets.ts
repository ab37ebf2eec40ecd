// Provider presets (`preset: github | gitlab | google | microsoft | keycloak`): the endpoints, scope
// and claims each provider documents, so that an operator writes a client ID, a secret and at most
// one more key. A preset only fills keys the provider's entry leaves out: keys given there win.
// Quirks handled elsewhere: the token request always sends `Accept: application/json`
// (oauth4webapi does), which GitHub needs to answer JSON instead of a form-encoded body.
import type { ProviderYaml } from './schema.js'
import type { ClaimsMapping, PresetName } from './types.js'

export { PRESET_NAMES } from './preset-names.js'

/** What a preset fills in; `issuer` (OIDC discovery) or the plain OAuth 2.0 endpoints. */
export interface PresetValues {
  issuer?: string
  authorizeUrl?: string
  tokenUrl?: string
  userinfoUrl?: string
  scope: string
  claims: Partial<ClaimsMapping>
}

/** A key of the provider's entry and what is wrong with it. */
export type PresetProblem = [key: string, message: string]

const trim = (url: string): string => url.replace(/\/+$/, '')

/**
 * GitHub has no OIDC: plain OAuth 2.0, identity from the REST API's /user, whose `login` is the
 * user name. GitHub Enterprise Server: `baseUrl` is the server, its REST API is `<baseUrl>/api/v3`.
 * Groups (organisations and teams, src/oauth/github.ts) only when the operator adds `read:org` to
 * the scope: the default asks people for no access to their organisations.
 * @see https://docs.github.com/en/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps
 * @see https://docs.github.com/en/rest/users/users#get-the-authenticated-user
 * @see https://docs.github.com/en/enterprise-server@latest/rest/quickstart (API root `/api/v3`)
 */
function github (p: ProviderYaml): PresetValues {
  const web = p.baseUrl ? trim(p.baseUrl) : 'https://github.com'
  const api = p.baseUrl ? `${web}/api/v3` : 'https://api.github.com'
  return {
    authorizeUrl: `${web}/login/oauth/authorize`,
    tokenUrl: `${web}/login/oauth/access_token`,
    userinfoUrl: `${api}/user`,
    // read:user for the profile, user:email for the address (even a private one).
    scope: 'read:user user:email',
    claims: { user: 'login', email: 'email', name: 'name' },
  }
}

/**
 * GitLab is an OIDC provider (gitlab.com, or a self-managed instance at `baseUrl`); `nickname` (the
 * GitLab username) and `groups` come from its userinfo endpoint, which the gateway reads at sign-in.
 * `groups` holds every group the user is in, directly or through a parent group; the role claims
 * (`https://gitlab.org/claims/groups/maintainer`...) are for `claims` rules.
 * @see https://docs.gitlab.com/integration/openid_connect_provider/
 */
function gitlab (p: ProviderYaml): PresetValues {
  return {
    issuer: p.baseUrl ? trim(p.baseUrl) : 'https://gitlab.com',
    scope: 'openid profile email',
    claims: { user: 'nickname', groups: 'groups' },
  }
}

/**
 * Google: OIDC at accounts.google.com; `sub` is a number, so the e-mail address names the user.
 * @see https://developers.google.com/identity/openid-connect/openid-connect
 */
function google (): PresetValues {
  return { issuer: 'https://accounts.google.com', scope: 'openid email profile', claims: { user: 'email' } }
}

/** Tenant values whose discovery document names `{tenantid}` or another tenant as its issuer. */
const MULTI_TENANT = ['common', 'organizations', 'consumers']

/**
 * Microsoft Entra ID (v2.0 endpoints of one tenant). `groups` carries group object IDs once the app
 * registration's token configuration adds the groups claim; app roles arrive in the ID token's
 * `roles` claim, for `claims` rules.
 * @see https://learn.microsoft.com/en-us/entra/identity-platform/v2-protocols-oidc
 * @see https://learn.microsoft.com/en-us/entra/identity-platform/id-token-claims-reference
 */
function microsoft (p: ProviderYaml, problems: PresetProblem[]): PresetValues {
  const values = { scope: 'openid profile email', claims: { user: 'preferred_username', groups: 'groups' } }
  if (p.issuer !== undefined) return values
  if (p.tenant === undefined) {
    problems.push(['tenant', 'is required with preset microsoft: the directory (tenant) ID or a verified domain, from the app registration\'s overview page'])
    return values
  }
  if (MULTI_TENANT.includes(p.tenant.toLowerCase())) {
    problems.push(['tenant', `must name one tenant, got ${JSON.stringify(p.tenant)}: its discovery document does not give one issuer to check ID tokens against; use the directory (tenant) ID`])
    return values
  }
  return { ...values, issuer: `https://login.microsoftonline.com/${encodeURIComponent(p.tenant)}/v2.0` }
}

/**
 * Keycloak: one realm is one OIDC issuer, `<baseUrl>/realms/<realm>` (Keycloak 17 and later; older
 * servers have `/auth` in baseUrl). `groups` needs the realm's "Group Membership" mapper with that
 * claim name. Roles (`realm_access.roles`, `resource_access.<client>.roles`) are for `claims` rules,
 * once the `roles` client scope's mappers add them to the ID token or userinfo (by default only the
 * access token, which the gateway does not read).
 * @see https://www.keycloak.org/securing-apps/oidc-layers
 */
function keycloak (p: ProviderYaml, problems: PresetProblem[]): PresetValues {
  const values = { scope: 'openid profile email', claims: { user: 'preferred_username', groups: 'groups' } }
  if (p.issuer !== undefined) return values
  if (p.baseUrl !== undefined && p.realm !== undefined) {
    return { ...values, issuer: `${trim(p.baseUrl)}/realms/${encodeURIComponent(p.realm)}` }
  }
  if (p.baseUrl !== undefined) problems.push(['realm', 'is required with preset keycloak and baseUrl: the realm whose users sign in'])
  else problems.push(['issuer', 'is required with preset keycloak: the realm\'s issuer, such as https://keycloak.example.com/realms/myrealm (or give baseUrl and realm)'])
  return values
}

/** Each preset's values (one entry for every PresetName, or this does not compile). */
const PRESETS: Record<PresetName, (provider: ProviderYaml, problems: PresetProblem[]) => PresetValues> = { github, gitlab, google, microsoft, keycloak }

/** Which preset uses which of the keys that only presets read. */
const PRESET_KEYS: Record<'tenant' | 'baseUrl' | 'realm', readonly PresetName[]> = {
  tenant: ['microsoft'],
  baseUrl: ['github', 'gitlab', 'keycloak'],
  realm: ['keycloak'],
}

/** The values `preset` fills in for this entry, and what is missing or out of place for it. */
export function presetValues (preset: PresetName, provider: ProviderYaml): { values: PresetValues, problems: PresetProblem[] } {
  const problems: PresetProblem[] = []
  return { values: PRESETS[preset](provider, problems), problems }
}

/** Keys that only presets read, given without a preset that reads them. */
export function misplacedPresetKeys (provider: ProviderYaml): PresetProblem[] {
  return Object.entries(PRESET_KEYS).flatMap(([key, presets]) => {
    if (provider[key as keyof typeof PRESET_KEYS] === undefined) return []
    if (provider.preset !== undefined && presets.includes(provider.preset)) return []
    return [[key, `is only read by preset ${presets.join(' or ')}${provider.preset ? `, not ${provider.preset}` : ''}`] satisfies PresetProblem]
  })
}

/**
 * The entry with its preset's values filled in where the entry has none (claims key by key);
 * explicit keys always win. Without a preset, the entry as it is.
 */
export function applyPreset (provider: ProviderYaml): { provider: ProviderYaml, problems: PresetProblem[] } {
  const problems = misplacedPresetKeys(provider)
  if (provider.preset === undefined) return { provider, problems }
  const filled = presetValues(provider.preset, provider)
  const { values } = filled
  return {
    provider: {
      ...provider,
      issuer: provider.issuer ?? values.issuer,
      authorizeUrl: provider.authorizeUrl ?? values.authorizeUrl,
      tokenUrl: provider.tokenUrl ?? values.tokenUrl,
      userinfoUrl: provider.userinfoUrl ?? values.userinfoUrl,
      scope: provider.scope ?? values.scope,
      claims: { ...values.claims, ...provider.claims },
    },
    problems: [...problems, ...filled.problems],
  }
}
