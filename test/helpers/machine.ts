// Machine clients of the test provider: access tokens from its token endpoint by the
// client-credentials grant (RFC 6749 §4.4) for one resource (RFC 8707), as a CI job gets them.
import type { TestProvider } from './oidc.js'

/** A token response's access token for `resource`, with `scope` when given; throws with the provider's answer otherwise. */
export async function clientCredentialsToken (op: TestProvider, client: { id: string, secret: string }, resource: string, scope?: string): Promise<string> {
  const form = new URLSearchParams({ grant_type: 'client_credentials', client_id: client.id, client_secret: client.secret, resource })
  if (scope !== undefined) form.set('scope', scope)
  const response = await fetch(`${op.issuer}/token`, { method: 'POST', body: form })
  const body = await response.json() as { access_token?: string, error?: string, error_description?: string }
  if (!response.ok || body.access_token === undefined) throw new Error(`the provider refused the client-credentials grant: ${response.status} ${body.error ?? ''} ${body.error_description ?? ''}`)
  return body.access_token
}
