// Where the gateway will be reached: a loopback `server.baseUrl` whose port is not the one the
// gateway listens on (`GATEWAY_PORT=8081` with the shipped `baseUrl` of port 8080) checks fine, and
// then every sign-in sends the browser back to the other port. Only where no proxy can stand between:
// plain http on a loopback host, and no trusted proxy (a local TLS proxy on another port is meant).
import { isLoopbackHost } from './loopback.js'
import type { GatewayConfig } from './types.js'

/** The loopback http `baseUrl` and the port it names, when no proxy can stand between and that port is not `listening`. */
function otherPort (server: GatewayConfig['server'], listening: number): { url: URL, port: number } | undefined {
  const url = new URL(server.baseUrl)
  const port = url.port === '' ? 80 : Number(url.port)
  if (url.protocol !== 'http:' || !isLoopbackHost(url.hostname) || server.trustProxy !== false || port === listening) return undefined
  return { url, port }
}

/** What `--check` and a start say of `server.port` (0: any port the OS gives, told once listening). */
export function baseUrlPortWarnings (server: GatewayConfig['server']): string[] {
  const other = server.port === 0 ? undefined : otherPort(server, server.port)
  if (other === undefined) return []
  const { url, port } = other
  return [`server.baseUrl: ${url.origin} names port ${port}, but the gateway listens on port ${server.port} (server.port): ` +
    `after a sign-in, browsers would be sent to port ${port}; set server.baseUrl (GATEWAY_BASE_URL in the shipped gateway.yaml) to http://${url.hostname}:${server.port}`]
}

/**
 * Once listening on the port the OS picked for `server.port: 0` (`GATEWAY_PORT=0`): the same slip,
 * known only now (a newcomer's reading: nothing was said, and every sign-in went to port 8080).
 */
export function pickedPortWarnings (server: GatewayConfig['server'], picked: number): string[] {
  const other = server.port === 0 ? otherPort(server, picked) : undefined
  if (other === undefined) return []
  const { url, port } = other
  return [`server.baseUrl: ${url.origin} names port ${port}, but the gateway listens on port ${picked}, which the OS picked (server.port 0): ` +
    `after a sign-in, browsers would be sent to port ${port}; give server.port a fixed port (GATEWAY_PORT in the shipped gateway.yaml) and server.baseUrl the same one (GATEWAY_BASE_URL)`]
}
