// The gateway's own endpoints under /oauth/ as one Fastify scope: sign-in (sign-in-endpoints.ts),
// the chooser of a route with several providers (chooser.ts), sign-out (sign-out.ts), the home page and userinfo (home.ts), your sessions and revoke (sessions.ts), and
// OIDC Back-Channel Logout. Cookies and form bodies are parsed in this scope only, so proxied
// requests stream untouched; nothing here is cached by a browser or a proxy.
import { chooserRoutes } from './chooser.js'
import cookie from '@fastify/cookie'
import type { FastifyInstance } from 'fastify'
import { GatewayError } from '../errors.js'
import { homeRoutes } from './home.js'
import { oauthContext, type OAuthDeps } from './oauth-context.js'
import { signInRoutes } from './sign-in-endpoints.js'
import { sessionsRoutes } from './sessions.js'
import { signOutRoutes } from './sign-out.js'

export async function oauthRoutes (app: FastifyInstance, deps: OAuthDeps): Promise<void> {
  await app.register(cookie)
  const context = oauthContext(deps)
  app.addHook('onSend', async (_request, reply) => {
    reply.header('cache-control', 'no-store')
  })
  // A plain browser form can POST the sign-out and a provider the back-channel logout.
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: 8192 }, (_request, body, done) => {
    done(null, Object.fromEntries(new URLSearchParams(body as string)))
  })
  signInRoutes(app, context)
  signOutRoutes(app, context)
  homeRoutes(app, context)
  chooserRoutes(app, context.config)
  sessionsRoutes(app, context)

  // OIDC Back-Channel Logout: the provider, server to server; 200 or 400 invalid_request (§2.8).
  app.post<{ Params: { provider: string }, Body: Record<string, unknown> | undefined }>('/oauth/backchannel-logout/:provider/', async (request, reply) => {
    const provider = await deps.providers.get(context.providerName(request))
    if (!/^application\/x-www-form-urlencoded\b/i.test(request.headers['content-type'] ?? '')) {
      throw new GatewayError('invalid_request', 'A logout token comes as a form field (application/x-www-form-urlencoded).')
    }
    await deps.backchannel.logout(provider, request.body?.logout_token)
    return reply.code(200).send()
  })
}
