// Machine clients of the test provider: access tokens from its token endpoint by the
// client-credentials grant (RFC 6749 §4.4) for one resource (RFC 8707), as a CI job gets them.
import type { AuthorizationServerOptions, ResourceServer } from '../../demo/authorization-server.js'
import { startOidcProvider, type TestProvider } from './oidc.js'

/** A token response's access token for `resource`, with `scope` when given; throws with the provider's answer otherwise. */
export async function clientCredentialsToken (op: TestProvider, client: { id: string, secret: string }, resource: string, scope?: string): Promise<string> {
  const form = new URLSearchParams({ grant_type: 'client_credentials', client_id: client.id, client_secret: client.secret, resource })
  if (scope !== undefined) form.set('scope', scope)
  const response = await fetch(`${op.issuer}/token`, { method: 'POST', body: form })
  const body = await response.json() as { access_token?: string, error?: string, error_description?: string }
  if (!response.ok || body.access_token === undefined) throw new Error(`the provider refused the client-credentials grant: ${response.status} ${body.error ?? ''} ${body.error_description ?? ''}`)
  return body.access_token
}

/** The CI job the provider of startMachineProvider registers for the client-credentials grant. */
export const CI = { id: 'ci-job', secret: 'ci-secret' }

/**
 * The resources (RFC 8707) startMachineProvider issues tokens for: `api://orders` (RFC 9068 JWTs,
 * scopes orders.read and orders.write) and `api://ledger` (opaque tokens, checked by introspection).
 */
export const RESOURCES: Record<string, ResourceServer> = {
  'api://orders': { scope: 'orders.read orders.write' },
  'api://ledger': { scope: 'ledger.read', format: 'opaque' },
}

/**
 * A real authorization server for machine-client tests: the gateway at `baseUrl` registered as its
 * client `c` (secret `s`) for provider `demo`, the CI job, and RESOURCES; `options` adds or replaces.
 */
export async function startMachineProvider (baseUrl: string, options: Omit<AuthorizationServerOptions, 'clients'> = {}): Promise<TestProvider> {
  return await startOidcProvider([{ client_id: 'c', client_secret: 's', redirect_uris: [`${baseUrl}/oauth/authorized/demo/`] }], {
    machineClients: [{ client_id: CI.id, client_secret: CI.secret }],
    resources: RESOURCES,
    ...options,
  })
}
