// GET /.well-known/jwks.json: the public keys that verify the gateway's identity assertions (the
// current key, and the previous one during a rotation), for upstreams and their JOSE libraries.
// @see https://www.rfc-editor.org/rfc/rfc7517#section-5 (JWK Set) and #section-8.5.1 (media type)
import type { FastifyInstance } from 'fastify'
import { PUBLISH_LEAD_MS, type KeyRing } from '../assertion/keys.js'

/** Cacheable for as long as a new key is published before it signs: a cached set always verifies. */
const CACHE_CONTROL = `public, max-age=${PUBLISH_LEAD_MS / 1000}`

export async function jwksRoute (app: FastifyInstance, { keys }: { keys: KeyRing }): Promise<void> {
  app.get('/.well-known/jwks.json', async (_request, reply) => {
    const set = await keys.jwks()
    return reply.header('cache-control', CACHE_CONTROL).type('application/jwk-set+json').send(set)
  })
}
