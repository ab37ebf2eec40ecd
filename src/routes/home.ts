// GET /oauth/ (the home page; the userinfo shape for API clients), GET /oauth/userinfo/ (who is
// signed in, per provider), and GET / leading to the home page unless a route serves it.
import type { FastifyInstance } from 'fastify'
import { GatewayError } from '../errors.js'
import { wantsHtml } from '../http/error-handler.js'
import { homePage } from '../http/pages.js'
import { HOME } from '../oauth/urls.js'
import type { OAuthContext } from './oauth-context.js'

export function homeRoutes (app: FastifyInstance, { config, sessions, signInLinks }: OAuthContext): void {
  app.get('/oauth/userinfo/', async (request) => {
    const identities = (await sessions.load(request.headers.cookie))?.record.identities ?? {}
    if (Object.keys(identities).length === 0) {
      throw new GatewayError('unauthenticated', 'No signed-in identity: sign in first.', { details: { headers: { 'www-authenticate': 'Bearer' } } })
    }
    return { identities }
  })

  // An empty userinfo shape when nobody is signed in.
  app.get(HOME, async (request, reply) => {
    const identities = (await sessions.load(request.headers.cookie))?.record.identities ?? {}
    if (!wantsHtml(request)) return { identities }
    return reply.type('text/html; charset=utf-8').send(homePage(identities, signInLinks))
  })
  if (!config.routes.some((route) => route.path === '/')) app.get('/', async (_request, reply) => reply.redirect(HOME, 302))
}
