// RFC 9728 protected resource metadata for each route with `bearer:` or `agents: true`: GET
// /.well-known/oauth-protected-resource<route path> says which authorization servers issue tokens
// for the route and which scopes it needs, so that a client (an MCP client, say) that met a 401 can
// find where to get a token (for `agents: true`, the gateway itself first). Every 401 of such a
// route names this address in `resource_metadata`.
// @see https://www.rfc-editor.org/rfc/rfc9728
import type { FastifyInstance } from 'fastify'
import type { GatewayConfig, RouteConfig } from '../config/types.js'
import { AGENT_SCOPE } from '../agents/endpoints.js'
import { PROTECTED_RESOURCE_WELL_KNOWN as WELL_KNOWN, resourceIdentifier } from '../oauth/urls.js'

/** The metadata document of one route that takes tokens. */
function metadata (config: GatewayConfig, route: RouteConfig): Record<string, unknown> {
  const servers = [
    ...(route.agents ? [config.server.baseUrl] : []),
    ...(route.bearer?.issuers ?? []).flatMap((name) => config.providers[name]?.issuer ?? []),
  ]
  const scopes = [...(route.agents ? [AGENT_SCOPE] : []), ...(route.bearer?.scopes ?? [])]
  return {
    resource: resourceIdentifier(config.server.baseUrl, route.path),
    authorization_servers: [...new Set(servers)],
    bearer_methods_supported: ['header'],
    ...(scopes.length > 0 ? { scopes_supported: scopes } : {}),
  }
}

export async function protectedResources (app: FastifyInstance, { config }: { config: GatewayConfig }): Promise<void> {
  for (const route of config.routes) {
    if (route.bearer === undefined && !route.agents) continue
    const document = JSON.stringify(metadata(config, route))
    app.get(`${WELL_KNOWN}${route.path === '/' ? '' : route.path}`, async (_request, reply) => {
      // Public, and read by clients running in browsers on other origins.
      return reply.header('content-type', 'application/json; charset=utf-8').header('cache-control', 'public, max-age=300')
        .header('access-control-allow-origin', '*').send(document)
    })
  }
}
