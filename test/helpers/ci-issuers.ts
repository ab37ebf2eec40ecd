// CI systems' and workloads' token issuers, which cannot be reached from here, answering as their
// public documentation shows: the discovery document (GitHub Actions' and Kubernetes' list only the
// keys, no endpoint to sign in at) and RS256 JWTs with the documented claims. The issuer is this
// server's loopback URL in place of the real one.
// @see https://docs.github.com/en/actions/security-for-github-actions/security-hardening-your-deployments/about-security-hardening-with-openid-connect
// @see https://kubernetes.io/docs/tasks/configure-pod-container/configure-service-account/#service-account-issuer-discovery
import { createServer, type Server } from 'node:http'
import { SignJWT, exportJWK, generateKeyPair, type JWK } from 'jose'
import { close, listen } from './net.js'

export type CiKind = 'github' | 'kubernetes'

export interface CiIssuer {
  readonly issuer: string
  /** A token as the CI system mints it for one job, with `claims` over the documented example's. */
  mint (audience: string, claims?: Record<string, unknown>): Promise<string>
  close (): Promise<void>
}

/** The claims of GitHub's documented example token (a push to main of octo-org/octo-repo). */
const GITHUB_CLAIMS = {
  sub: 'repo:octo-org/octo-repo:ref:refs/heads/main',
  ref: 'refs/heads/main',
  sha: 'example-sha',
  repository: 'octo-org/octo-repo',
  repository_owner: 'octo-org',
  repository_owner_id: '123',
  repository_id: '456',
  repository_visibility: 'private',
  run_id: '1',
  run_number: '1',
  run_attempt: '1',
  runner_environment: 'github-hosted',
  actor: 'octocat',
  actor_id: '789',
  workflow: 'deploy',
  workflow_ref: 'octo-org/octo-repo/.github/workflows/deploy.yml@refs/heads/main',
  event_name: 'push',
  ref_type: 'branch',
  ref_protected: 'true',
  job_workflow_ref: 'octo-org/octo-repo/.github/workflows/deploy.yml@refs/heads/main',
}

/** A projected service-account token of pod `deployer` in namespace `deploy`. */
const KUBERNETES_CLAIMS = {
  sub: 'system:serviceaccount:deploy:deployer',
  'kubernetes.io': { namespace: 'deploy', pod: { name: 'deployer-0', uid: 'pod-uid' }, serviceaccount: { name: 'deployer', uid: 'sa-uid' } },
}

/** The discovery document each publishes (its claims_supported and the like left out): keys, no endpoints. */
function discovery (kind: CiKind, issuer: string): Record<string, unknown> {
  const common = { issuer, jwks_uri: `${issuer}/.well-known/jwks`, response_types_supported: ['id_token'], id_token_signing_alg_values_supported: ['RS256'] }
  return kind === 'github'
    ? { ...common, subject_types_supported: ['public', 'pairwise'], scopes_supported: ['openid'] }
    : { ...common, jwks_uri: `${issuer}/openid/v1/jwks`, subject_types_supported: ['public'] }
}

export async function startCiIssuer (kind: CiKind): Promise<CiIssuer> {
  const { privateKey, publicKey } = await generateKeyPair('RS256')
  const jwk: JWK = { ...await exportJWK(publicKey), kid: `${kind}-key`, alg: 'RS256', use: 'sig' }
  let document: Record<string, unknown> = {}
  const server: Server = createServer((req, res) => {
    const path = req.url ?? ''
    const body = path === '/.well-known/openid-configuration' ? document : path === new URL(String(document.jwks_uri)).pathname ? { keys: [jwk] } : undefined
    res.writeHead(body === undefined ? 404 : 200, { 'content-type': 'application/json' }).end(JSON.stringify(body ?? { error: 'not_found' }))
  })
  const issuer = await listen(server)
  document = discovery(kind, issuer)
  return {
    issuer,
    async mint (audience, claims = {}) {
      const now = Math.floor(Date.now() / 1000)
      const base = kind === 'github' ? GITHUB_CLAIMS : KUBERNETES_CLAIMS
      return await new SignJWT({ ...base, ...claims }).setProtectedHeader({ alg: 'RS256', kid: jwk.kid, typ: 'JWT' })
        .setIssuer(issuer).setAudience(audience).setIssuedAt(now).setNotBefore(now).setExpirationTime(now + 300).setJti(`${kind}-${now}-${Math.random()}`).sign(privateKey)
    },
    close: async () => { await close(server) },
  }
}
