// The X-Forwarded-Host the gateway sends upstream: the host of server.baseUrl (the name the gateway
// is published under), or the one value a proxy that server.trustProxy admits sent; never the
// client's own Host, which an upstream that builds absolute links from X-Forwarded-Host would
// otherwise print into its pages (host header poisoning: password-reset links, cache keys).
// @see https://www.rfc-editor.org/rfc/rfc7239#section-5.3
import { trustTest } from '../http/trust-proxy.js'

/** A host with an optional port, as Host carries it (RFC 9110 §7.2); no list, no spaces, no path. */
const HOST = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::\d{1,5})?$/

/**
 * Compiles the X-Forwarded-Host rule for one gateway.
 * @param baseUrl server.baseUrl: its host is the default
 * @param trustProxy server.trustProxy: whose X-Forwarded-Host is believed
 * @returns for a request's X-Forwarded-Host (as Node gives it: several lines joined with ", ") and
 *   its peer's address, the host to send upstream: the value of a trusted peer that sent exactly one
 *   host (one line, no list), else baseUrl's host
 */
export function forwardedHostOf (baseUrl: string, trustProxy: boolean | string[]): (sent: string | string[] | undefined, peer: string | undefined) => string {
  const own = new URL(baseUrl).host
  const trusted = trustTest(trustProxy)
  return (sent, peer) => {
    if (typeof sent !== 'string' || !trusted(peer ?? '', 0)) return own
    const value = sent.trim()
    return value.length <= 255 && HOST.test(value) ? value : own
  }
}
