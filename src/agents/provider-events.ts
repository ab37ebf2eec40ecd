// What oidc-provider tells of itself: what it did, counted in the agents' metrics
// (gateway_agents_total), and what failed in it, in the gateway's log.
import type { EventEmitter } from 'node:events'
import type Provider from 'oidc-provider'
import type { Logger } from '../ops/logger.js'
import { DEVICE_CODE_GRANT } from './endpoints.js'

/** What the agents' metrics count: an event, and its result (a name from a bounded set). */
export type AgentsCount = (event: 'registration' | 'authorization' | 'device' | 'consent' | 'token' | 'grant' | 'route', result: string) => void

/** The OAuth error codes counted by name; any other is `other` (a label must come from a bounded set). */
const COUNTED_ERRORS = new Set(['invalid_request', 'invalid_client', 'invalid_grant', 'unauthorized_client', 'unsupported_grant_type', 'invalid_scope', 'invalid_target',
  'invalid_redirect_uri', 'invalid_client_metadata', 'access_denied', 'unsupported_response_type', 'login_required', 'consent_required', 'server_error', 'unsupported_token_type'])

/** A refusal's name for the metrics: the OAuth error code, when it is one of the known ones. */
function errorName (error: unknown): string {
  const code = (error as { error?: unknown } | undefined)?.error
  return typeof code === 'string' && COUNTED_ERRORS.has(code) ? code : 'other'
}

const FAILED = 'agents: authorization server error'

/**
 * Listens to `provider` before its request handler is made: counts what it did, and logs what
 * failed. That includes an error thrown past oidc-provider's own handler, which Koa reports as its
 * app's 'error' event. With no listener, Koa printed that error's stack to stderr, outside the log.
 */
export function told (provider: Provider, count: AgentsCount, log: Logger): void {
  provider.on('server_error', (_ctx, error) => { log.error({ err: error }, FAILED) })
  // Provider is a Koa app, whose 'error' event its own typings leave out.
  const app: EventEmitter = provider
  app.on('error', (error: unknown) => { log.error({ err: error }, FAILED) })
  provider.on('registration_create.success', () => { count('registration', 'registered') })
  provider.on('registration_create.error', (_ctx, error) => { count('registration', errorName(error)) })
  provider.on('authorization.error', (_ctx, error) => { count('authorization', errorName(error)) })
  provider.on('grant.success', (ctx) => {
    const type = (ctx.oidc.params as Record<string, unknown> | undefined)?.grant_type
    count('token', type === 'authorization_code' || type === 'refresh_token' ? type : type === DEVICE_CODE_GRANT ? 'device_code' : 'other')
  })
  provider.on('device_authorization.success', () => { count('device', 'code_issued') })
  provider.on('device_authorization.error', (_ctx, error) => { count('device', errorName(error)) })
  provider.on('grant.error', (_ctx, error) => { count('token', errorName(error)) })
  provider.on('grant.revoked', () => { count('grant', 'revoked') })
}
