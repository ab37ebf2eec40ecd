// RFC 9728 protected resource metadata for each route with `bearer:`: GET
// /.well-known/oauth-protected-resource<route path> says which authorization servers issue tokens
// for the route and which scopes it needs, so that a client (an MCP client, say) that met a 401 can
// find where to get a token. Every 401 of such a route names this address in `resource_metadata`.
// @see https://www.rfc-editor.org/rfc/rfc9728
import type { FastifyInstance } from 'fastify'
import type { GatewayConfig, RouteConfig } from '../config/types.js'

const WELL_KNOWN = '/.well-known/oauth-protected-resource'

/** The route's resource identifier: `{baseUrl}<path>` (the root route: `{baseUrl}` itself). */
export function resourceIdentifier (baseUrl: string, path: string): string {
  return path === '/' ? baseUrl : `${baseUrl}${path}`
}

/** Where the route's metadata is served: the well-known segment between the origin and the resource's path (RFC 9728 §3.1). */
export function resourceMetadataUrl (baseUrl: string, path: string): string {
  const resource = new URL(resourceIdentifier(baseUrl, path))
  return `${resource.origin}${WELL_KNOWN}${resource.pathname === '/' ? '' : resource.pathname}`
}

/** The metadata document of one bearer route. */
function metadata (config: GatewayConfig, route: RouteConfig & { bearer: NonNullable<RouteConfig['bearer']> }): Record<string, unknown> {
  const servers = route.bearer.issuers.flatMap((name) => config.providers[name]?.issuer ?? [])
  return {
    resource: resourceIdentifier(config.server.baseUrl, route.path),
    authorization_servers: servers,
    bearer_methods_supported: ['header'],
    ...(route.bearer.scopes.length > 0 ? { scopes_supported: route.bearer.scopes } : {}),
  }
}

export async function protectedResources (app: FastifyInstance, { config }: { config: GatewayConfig }): Promise<void> {
  for (const route of config.routes) {
    const bearer = route.bearer
    if (bearer === undefined) continue
    const document = JSON.stringify(metadata(config, { ...route, bearer }))
    app.get(`${WELL_KNOWN}${route.path === '/' ? '' : route.path}`, async (_request, reply) => {
      // Public, and read by clients running in browsers on other origins.
      return reply.header('content-type', 'application/json; charset=utf-8').header('cache-control', 'public, max-age=300')
        .header('access-control-allow-origin', '*').send(document)
    })
  }
}
