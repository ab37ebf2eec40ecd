// A token request's `resource` (RFC 8707) judged before oidc-provider reads its code, refresh token or
// device code: oidc-provider spends the credential first (a code consumed, a refresh token rotated)
// and resolves the resource after (lib/helpers/resolve_resource.js), so that a request it refused
// with invalid_target had spent it, and the client's corrected retry counted as a second use and
// ended the grant the person had allowed (an outside tester's finding).
import type { ParsedUrlQuery } from 'node:querystring'
import type Provider from 'oidc-provider'
import { DEVICE_CODE_GRANT } from './endpoints.js'

/** What a credential says of itself: its client and the resources it was granted for. */
type Credential = { clientId?: string | undefined, resource?: string | string[] | undefined, consumed?: unknown } | undefined

/** The credential a grant type carries, and how oidc-provider finds it. */
const CREDENTIALS: Readonly<Record<string, { parameter: string, find: (provider: Provider, value: string) => Promise<Credential> } | undefined>> = {
  authorization_code: { parameter: 'code', find: async (provider, value) => await provider.AuthorizationCode.find(value) },
  refresh_token: { parameter: 'refresh_token', find: async (provider, value) => await provider.RefreshToken.find(value) },
  [DEVICE_CODE_GRANT]: { parameter: 'device_code', find: async (provider, value) => await provider.DeviceCode.find(value) },
}

/**
 * Whether `form` names a resource its credential was not granted for, as oidc-provider would judge
 * it once the credential is spent: one resource not among the credential's, or several (a grant is
 * for one route). A credential it does not find, or of another client, is left for oidc-provider to
 * refuse (invalid_grant, before it spends anything); so are those below.
 */
export async function foreignTarget (provider: Provider, form: ParsedUrlQuery | undefined): Promise<boolean> {
  const asked = form?.resource
  if (asked === undefined || asked === '') return false
  const kind = typeof form?.grant_type === 'string' ? CREDENTIALS[form.grant_type] : undefined
  const value = kind === undefined ? undefined : form?.[kind.parameter]
  if (kind === undefined || typeof value !== 'string' || value === '') return false
  const credential = await kind.find(provider, value)
  // Left to oidc-provider too: a credential it finds spent (a code used again ends its grant there), and
  // a device code the person has not decided on (its route is in its request until then; the poll
  // is answered authorization_pending, nothing spent). Outside testers' findings, both.
  if (credential === undefined || credential.clientId !== form?.client_id || credential.consumed !== undefined || credential.resource === undefined) return false
  const granted = Array.isArray(credential.resource) ? credential.resource : [credential.resource]
  return typeof asked !== 'string' || !granted.includes(asked)
}
