// forwardAuth.proxySecret (docs/forward-auth.md, "The proxy's secret"): set, /oauth/auth/ answers
// only the requests that carry it in X-Forward-Auth-Secret. A relay of the gateway's host passes a
// page's own request on with whatever X-Forwarded-Uri its script wrote, which nothing else tells
// from the proxy's auth request; the script does not know the secret. During a change of the secret
// forwardAuth.previousProxySecrets are taken too, each counted, so that the operator sees when the
// proxies in front have all moved to the new one.
import { createHash, timingSafeEqual } from 'node:crypto'
import type { FastifyRequest } from 'fastify'
import type { ForwardAuthConfig } from '../config/types.js'
import type { Metrics } from '../ops/metrics.js'

/** The header that carries forwardAuth.proxySecret from the proxy in front. */
const PROXY_SECRET_HEADER = 'x-forward-auth-secret'

export const NO_PROXY_SECRET = 'Forward-auth answers only the proxy in front, which sends forwardAuth.proxySecret in X-Forward-Auth-Secret with each auth request; ' +
  'this request has none, or another value (docs/forward-auth.md, "The proxy\'s secret")'

/** The SHA-256 digest of a secret: every comparison is of 32 bytes, whatever was sent. */
function digest (text: string): Buffer {
  return createHash('sha256').update(text).digest()
}

/**
 * Whether a request carries the proxy's secret once in X-Forward-Auth-Secret, compared in constant
 * time with the current one and each previous one (all of them, whichever matches). Always true
 * when no secret is set.
 */
export function proxySecretTest ({ proxySecret, previousProxySecrets }: Pick<ForwardAuthConfig, 'proxySecret' | 'previousProxySecrets'>, metrics: Pick<Metrics, 'previousProxySecret'>): (request: FastifyRequest) => boolean {
  if (proxySecret === undefined) return () => true
  const current = digest(proxySecret)
  const previous = previousProxySecrets.map(digest)
  return (request) => {
    const sent = request.raw.headersDistinct[PROXY_SECRET_HEADER]
    if (sent?.length !== 1) return false
    const given = digest(sent[0]!)
    if (timingSafeEqual(given, current)) return true
    const old = previous.reduce((found, each) => timingSafeEqual(given, each) || found, false)
    if (old) metrics.previousProxySecret.inc()
    return old
  }
}
