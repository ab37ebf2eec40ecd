// A machine client's token on a `bearer:` route, from an issuer whose key set has more than one key
// that fits the token's header (a `kid` published twice during a rotation, or no `kid` among several
// keys; src/oauth/verify-jwt.ts). An outside tester's rows: each was refused with 401 "not a
// well-formed JWT", which tells an RFC 6750 client to throw a good token away and blames the client
// for the issuer's key set. The token is judged by the key that signed it; one of a key the issuer
// does not publish is still refused, as a bad signature.
import { createServer, type Server } from 'node:http'
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey, type JWK } from 'jose'
import { expect } from 'vitest'
import type { TestGateway } from '../helpers/gateway.js'
import { close, listen } from '../helpers/net.js'
import { test as it } from '../helpers/stack.js'

const AUD = 'https://gateway.example.com/deploy'
let gateway: TestGateway
let server: Server
let issuer: string
let keys: JWK[] = []
let pairs: Array<{ privateKey: CryptoKey, publicKey: CryptoKey }> = []

it.beforeAll(async ({ startStack, upstream }) => {
  pairs = await Promise.all([0, 1, 2].map(async () => await generateKeyPair('RS256', { extractable: true })))
  server = createServer((request, response) => {
    const body = request.url === '/.well-known/openid-configuration'
      ? { issuer, jwks_uri: `${issuer}/jwks`, response_types_supported: ['id_token'], subject_types_supported: ['public'], id_token_signing_alg_values_supported: ['RS256'] }
      : request.url === '/jwks' ? { keys } : undefined
    response.writeHead(body === undefined ? 404 : 200, { 'content-type': 'application/json' }).end(JSON.stringify(body ?? {}))
  })
  issuer = await listen(server)
  // Two keys under one kid: the first two pairs. The third is published nowhere.
  keys = await Promise.all([0, 1].map(async (i) => ({ ...await exportJWK(pairs[i]!.publicKey), kid: 'k1', alg: 'RS256', use: 'sig' })))
  gateway = await startStack({
    providers: { ci: { issuer } },
    routes: [{ path: '/deploy/', upstream: upstream.url, provider: 'demo', bearer: { issuers: ['ci'], audience: AUD }, allow: [{ claims: { repository: ['org/app'] } }] }],
  })
})

it.afterAll(async () => {
  await gateway?.close()
  await close(server)
})

async function mint (key: CryptoKey, kid: string | undefined): Promise<string> {
  const now = Math.floor(Date.now() / 1000)
  return await new SignJWT({ sub: 'repo:org/app:ref:refs/heads/main', repository: 'org/app' })
    .setProtectedHeader({ alg: 'RS256', typ: 'JWT', ...(kid === undefined ? {} : { kid }) })
    .setIssuer(issuer).setAudience(AUD).setIssuedAt(now).setExpirationTime(now + 300).sign(key)
}

async function call (token: string): Promise<{ status: number, body: string }> {
  const response = await fetch(`${gateway.url}/deploy/run`, { headers: { accept: 'application/json', authorization: `Bearer ${token}` } })
  return { status: response.status, body: await response.text() }
}

it.each([
  ['the first of two keys sharing its kid', 0, 'k1'],
  ['the second of two keys sharing its kid', 1, 'k1'],
  ['one of the published keys, the token naming no kid', 1, undefined],
] as const)('a token signed by %s passes', async (_case, signer, kid) => {
  const result = await call(await mint(pairs[signer]!.privateKey, kid))
  expect(result.status, result.body).toBe(200)
})

it('a token of a key the issuer does not publish, under the shared kid: 401, a bad signature', async () => {
  const result = await call(await mint(pairs[2]!.privateKey, 'k1'))
  expect(result.status).toBe(401)
  expect(result.body).not.toContain('not a well-formed JWT')
  expect(gateway.logs.join('\n')).toContain('bad_signature')
})
