// GET /oauth/choose/?next=<path>: where a browser without a session goes on a route with several
// providers (`providers: [corp, github]`): the route's name and one sign-in button per provider,
// each returning to `next` (and carrying a kept form's binding, `form`). The route is the one the
// proxy would serve `next` with (the longest prefix covering it); a `next` no such route serves
// goes to its own route's sign-in, or home.
import type { FastifyInstance } from 'fastify'
import { routeFor } from '../access/step-up-route.js'
import { canonicalTarget } from '../config/canonical.js'
import type { GatewayConfig, RouteConfig } from '../config/types.js'
import { chooserPage, sendUnframed } from '../http/pages.js'
import { parseFormBinding } from '../oauth/preserved-body.js'
import { HOME, loginUrl, nextParameter, safeNext } from '../oauth/urls.js'

export const CHOOSER = '/oauth/choose/'

/** The chooser's address for a route with several providers, returning to `next`. */
export function chooserUrl (config: Pick<GatewayConfig, 'server'>, next: string): string {
  return `${config.server.baseUrl}${CHOOSER}?next=${nextParameter(next)}`
}

/** Each provider's sign-in address for the route, returning to `next`. */
export function loginUrlsOf (config: Pick<GatewayConfig, 'server'>, route: Pick<RouteConfig, 'providers'>, next: string): Record<string, string> {
  return Object.fromEntries(route.providers.map((provider) => [provider, loginUrl(config, provider, next)]))
}

/** The route the proxy serves `next` with, or undefined. */
function servingRoute (config: GatewayConfig, next: string): RouteConfig | undefined {
  const target = canonicalTarget(next)
  return target.ok ? routeFor(config.routes, target.url) : undefined
}

export function chooserRoutes (app: FastifyInstance, config: GatewayConfig): void {
  app.get<{ Querystring: { next?: unknown, form?: unknown } }>(CHOOSER, async (request, reply) => {
    const next = safeNext(request.query.next)
    const form = parseFormBinding(request.query.form)
    const route = next === HOME ? undefined : servingRoute(config, next)
    const withForm = (href: string): string => form === undefined ? href : `${href}&form=${form}`
    if (route === undefined || route.auth !== 'required' || route.providers.length === 0) return await reply.redirect(HOME, 302)
    if (route.providers.length === 1) return await reply.redirect(withForm(loginUrl(config, route.providers[0]!, next)), 302)
    const links = route.providers.map((name) => ({ name, href: withForm(loginUrl(config, name, next)) }))
    reply.header('cache-control', 'no-store')
    // Its address holds `next`: never framed, and never told to the provider a choice leads to.
    return await sendUnframed(reply, chooserPage(route.path === '/' ? '/' : `${route.path}/`, links))
  })
}
