// Who is a trusted proxy: server.trustProxy as the same test Fastify applies before it reads
// X-Forwarded-For/-Host/-Proto. Forward-auth (whose X-Forwarded-Uri/-Host to believe) and the proxy
// (whose X-Forwarded-Host to pass on) both ask it, so neither can trust a peer the other does not.
import proxyAddr from '@fastify/proxy-addr'

/** proxy-addr's trust function: is the hop at `address` (0 = the peer) a trusted proxy? */
export type TrustFn = (address: string, hop: number) => boolean

/**
 * server.trustProxy compiled: true trusts every peer and that peer only (one hop: the proxy on this
 * machine that `true` is for; trusting every hop would believe the addresses a client writes in front
 * of the proxy's own), false none, a list is compiled by the proxy-addr Fastify itself uses (a
 * dependency of ours at Fastify's range, so npm installs one copy for both: the two can never disagree
 * on who is trusted; test/runtime-dependencies.test.ts checks it). Fastify is given this function too.
 */
export function trustTest (trustProxy: boolean | string[]): TrustFn {
  if (trustProxy === true) return (_address, hop) => hop === 0
  if (trustProxy === false) return () => false
  return proxyAddr.compile(trustProxy)
}

/** Fastify's `trustProxy` option for server.trustProxy: the same test, or false (then request.ip is the peer's, read for free). */
export function fastifyTrustProxy (trustProxy: boolean | string[]): false | TrustFn {
  return trustProxy === false ? false : trustTest(trustProxy)
}
