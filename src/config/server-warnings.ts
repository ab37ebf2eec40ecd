// Where the gateway will be reached: a loopback `server.baseUrl` whose port is not the one the
// gateway listens on (`GATEWAY_PORT=8081` with the shipped `baseUrl` of port 8080) checks fine, and
// then every sign-in sends the browser back to the other port. Only where no proxy can stand between:
// plain http on a loopback host, and no trusted proxy (a local TLS proxy on another port is meant).
import { isLoopbackHost } from './loopback.js'
import type { GatewayConfig } from './types.js'

export function baseUrlPortWarnings (server: GatewayConfig['server']): string[] {
  const url = new URL(server.baseUrl)
  const port = url.port === '' ? 80 : Number(url.port)
  if (url.protocol !== 'http:' || !isLoopbackHost(url.hostname) || server.trustProxy !== false || server.port === 0 || port === server.port) return []
  return [`server.baseUrl: ${url.origin} names port ${port}, but the gateway listens on port ${server.port} (server.port): ` +
    `after a sign-in, browsers would be sent to port ${port}; set server.baseUrl (GATEWAY_BASE_URL in the shipped gateway.yaml) to http://${url.hostname}:${server.port}`]
}
