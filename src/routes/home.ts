// GET /oauth/ (the home page; the userinfo shape for API clients), GET /oauth/userinfo/ (who is
// signed in, per provider), and GET / leading to the home page unless a route serves it. The home
// page links the applications the signed-in person can open: each protected route at a provider
// they are signed in with, judged by the access gate itself (access/gate.ts, the rules the proxy
// applies) for a GET of the route's path; a route with `agents: true` (an MCP server, an API for
// CLIs) is no page to open, so its address is shown for a client instead.
import type { FastifyInstance } from 'fastify'
import { named, nameSpaces } from '../access/name-spaces.js'
import { compileGate, covers, decide, signedIn, type RouteGate } from '../access/gate.js'
import type { GatewayConfig } from '../config/types.js'
import { GatewayError } from '../errors.js'
import { canonicalTarget } from '../config/canonical.js'
import { wantsHtml } from '../http/error-handler.js'
import { homePage, sendUnframed, type HomeApp } from '../http/pages.js'
import { HOME, loginUrl, safeNext, switchAccountUrl } from '../oauth/urls.js'
import type { Identity } from '../session/record.js'
import type { OAuthContext } from './oauth-context.js'

/** What browsers ask every site for. */
const FAVICON = '/favicon.ico'

/** A protected route the home page may link, with its gate compiled as the proxy compiles it. */
interface AppRoute {
  /** The path linked and judged: the route's path with a slash; an agents route's own path (as its consent judges it). */
  readonly href: string
  /** An `agents: true` route (an MCP server, an API for CLIs): shown as the address to give a client, not linked. */
  readonly agents: boolean
  /** The providers whose people may open it (`providers:`, or its one `provider`). */
  readonly providers: readonly string[]
  readonly gate: RouteGate
}

/**
 * Whether a browser opens `href` as written: a plain same-origin path by safeNext's rule, and none
 * of the characters a browser percent-encodes in a path (a quote, `<`, a backtick...), so that the
 * address the person clicks is the one judged here.
 */
function openable (href: string): boolean {
  return safeNext(href) === href && !/["<>`{}]/.test(href)
}

/** The protected routes a link can open, in the config's order. */
function appRoutes (config: GatewayConfig): AppRoute[] {
  return config.routes.flatMap((route) => {
    const provider = route.provider
    const href = route.path === '/' || route.agents ? route.path : `${route.path}/`
    // An agents route's address is shown, not linked: no browser sends it.
    if (route.auth !== 'required' || provider === undefined || (!route.agents && !openable(href))) return []
    return [{ href, agents: route.agents, providers: route.providers, gate: compileGate({ ...route, spaces: nameSpaces(config.providers) }, (next) => loginUrl(config, provider, next)) }]
  })
}

/**
 * Whether the gate lets `identity` GET `target` (canonical): the decision the proxy acts on. The
 * token is not the page's to read; only the decision's kind counts.
 */
function admits (route: AppRoute, identities: Record<string, Identity>, target: string, address: string | undefined): boolean {
  // At any of its providers the person is signed in with, as the proxy picks the first of them.
  const provider = route.providers.find((name) => Object.hasOwn(identities, name))
  if (provider === undefined) return false
  // Named as the proxy names it: the people of a provider other than the route's first are `<provider>:<user>`.
  const identity = named(identities[provider]!, provider, route.providers[0], route.gate.spaces)
  const kind = decide(route.gate, { method: 'GET', target, address }, true, signedIn('', identity, false, route.providers.length > 1 ? provider : undefined)).kind
  return kind === 'allow' || kind === 'public'
}

/**
 * The applications the person signed in with `identities` can open; first, the page they came from
 * (`next`, as safeNext left it) when the route that serves it lets them in, judged from `address`.
 */
function openApps (routes: readonly AppRoute[], identities: Record<string, Identity>, next: string, address: string | undefined): HomeApp[] {
  const apps = routes
    .filter((route) => !route.agents && admits(route, identities, route.href, address))
    .map(({ href }) => ({ label: href, href }))
  const target = next === HOME || !openable(next) ? undefined : canonicalTarget(next)
  if (apps.length === 0 || target === undefined || !target.ok) return apps
  // The route that serves `next` is the one the router picks: the longest prefix covering it (an
  // agents route's address is no page: never first).
  const serving = routes.filter((route) => covers(route.gate.prefix ?? '/', target.url)).sort((a, b) => (b.gate.prefix ?? '/').length - (a.gate.prefix ?? '/').length)[0]
  if (serving === undefined || serving.agents || !admits(serving, identities, target.url, address)) return apps
  return [{ label: next, href: next }, ...apps.filter(({ href }) => href !== next)]
}

/** The addresses of the `agents: true` routes the person may use, as a client is given them: the gateway's base URL and the route's path. */
function agentAddresses (routes: readonly AppRoute[], identities: Record<string, Identity>, baseUrl: string, address: string | undefined): string[] {
  return routes.filter((route) => route.agents && admits(route, identities, route.href, address))
    .map(({ href }) => `${baseUrl}${href === '/' ? '' : href}`)
}

export function homeRoutes (app: FastifyInstance, { config, sessions, signInLinks }: OAuthContext): void {
  const routes = appRoutes(config)

  app.get('/oauth/userinfo/', async (request) => {
    const identities = (await sessions.load(request.headers.cookie))?.record.identities ?? {}
    if (Object.keys(identities).length === 0) {
      throw new GatewayError('unauthenticated', 'No signed-in identity: sign in first.', { details: { headers: { 'www-authenticate': 'Bearer' } } })
    }
    return { identities }
  })

  // An empty userinfo shape when nobody is signed in.
  app.get<{ Querystring: { next?: string } }>(HOME, async (request, reply) => {
    const identities = (await sessions.load(request.headers.cookie))?.record.identities ?? {}
    if (!wantsHtml(request)) return { identities }
    const next = safeNext(request.query.next)
    const apps = openApps(routes, identities, next, request.ip)
    const agents = agentAddresses(routes, identities, config.server.baseUrl, request.ip)
    // A sign-in from here goes back to where the person was going, else to the provider's first page.
    const links = next === HOME ? signInLinks : signInLinks.map(({ name }) => ({ name, href: loginUrl(config, name, next) }))
    const page = homePage(identities, links, apps, (provider) => switchAccountUrl(config, provider, HOME), agents)
    // Unframed: its "Sign out everywhere" is a same-origin POST that a framing page could trick out of a click.
    return sendUnframed(reply, page)
  })
  if (!config.routes.some((route) => route.path === '/')) app.get('/', async (_request, reply) => reply.redirect(HOME, 302))
  // Every browser asks for it on every page of the gateway's own: no icon, and no `request rejected`
  // log line each time (a newcomer's reading), where no route serves it.
  if (!config.routes.some((route) => covers(route.path, FAVICON))) {
    app.get(FAVICON, async (_request, reply) => reply.code(204).send())
  }
}
