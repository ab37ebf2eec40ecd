// Whose address a request is judged by (`networks` rules, the sign-in rate limit, the log): Fastify's
// request.ip under the option the gateway gives it (http/trust-proxy.ts fastifyTrustProxy), and the
// test forward-auth and the proxy ask of a peer (trustTest), which must agree. `trustProxy: true` (a
// gateway on loopback behind the proxy on its machine) trusts that one peer: the client cannot put an
// address of its choosing in front of the one the proxy appends.
import Fastify from 'fastify'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { fastifyTrustProxy, trustTest } from '../../src/http/trust-proxy.js'

async function ipOf (trustProxy: boolean | string[], peer: string, forwardedFor?: string): Promise<string> {
  const app = Fastify({ trustProxy: fastifyTrustProxy(trustProxy) })
  app.get('/', async (request) => request.ip)
  const response = await app.inject({ url: '/', remoteAddress: peer, headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor } })
  await app.close()
  return response.body
}

describe('the client address', () => {
  const TABLE: Array<[boolean | string[], string, string | undefined, string]> = [
    [false, '127.0.0.1', '10.8.0.5', '127.0.0.1'],
    // The proxy on this machine appends the address it saw; what the client wrote before it is not believed.
    [true, '127.0.0.1', '10.8.0.5, 203.0.113.7', '203.0.113.7'],
    [true, '127.0.0.1', '203.0.113.7', '203.0.113.7'],
    [true, '127.0.0.1', undefined, '127.0.0.1'],
    [['127.0.0.1'], '127.0.0.1', '10.8.0.5, 203.0.113.7', '203.0.113.7'],
    [['127.0.0.1'], '127.0.0.9', '10.8.0.5', '127.0.0.9'],
    // Two trusted hops: the address the outer one saw.
    [['127.0.0.1', '10.0.0.2'], '127.0.0.1', '10.8.0.5, 198.51.100.4, 10.0.0.2', '198.51.100.4'],
    [['loopback'], '::1', 'garbage, 203.0.113.7', '203.0.113.7'],
  ]
  it.each(TABLE)('trustProxy %j, peer %s, X-Forwarded-For %j: %s', async (trustProxy, peer, forwardedFor, ip) => {
    expect(await ipOf(trustProxy, peer, forwardedFor)).toBe(ip)
  })

  it('Fastify takes a hop for a proxy exactly when trustTest does (true: the peer alone)', async () => {
    const hop = fc.constantFrom('127.0.0.1', '10.0.0.2', '203.0.113.7', '198.51.100.4')
    await fc.assert(fc.asyncProperty(fc.constantFrom<boolean | string[]>(true, ['127.0.0.1'], ['127.0.0.1', '10.0.0.2']), hop, fc.array(hop, { maxLength: 3 }), async (trustProxy, peer, chain) => {
      // The address proxy-addr's walk stops at: from the peer back through the chain, the first hop not trusted.
      const hops = [peer, ...[...chain].reverse()]
      const trusted = trustTest(trustProxy)
      const stop = hops.findIndex((address, i) => i === hops.length - 1 || !trusted(address, i))
      expect(await ipOf(trustProxy, peer, chain.length === 0 ? undefined : chain.join(', '))).toBe(hops[stop])
    }), { numRuns: 60, seed: 40 })
  })
})
