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
import { JWKS_COOLDOWN_MS } from '../../src/oauth/issuer-keys.js'

const AUD = 'https://gateway.example.com/deploy'
let gateway: TestGateway
let server: Server
let issuer: string
let keys: JWK[] = []
let pairs: Array<{ privateKey: CryptoKey, publicKey: CryptoKey }> = []
/** A second issuer whose key set a test changes (`rotating`), and how often it was read. */
let rotatingServer: Server
let rotatingIssuer: string
let rotatingKeys: JWK[] = []
let rotatingReads = 0
/** The gateway's clock: the wall clock plus an offset a test moves (past the key set's read cooldown). */
const clock = { offset: 0, now: () => Date.now() + clock.offset }

it.beforeAll(async ({ startStack, upstream }) => {
  pairs = await Promise.all([0, 1, 2].map(async () => await generateKeyPair('RS256', { extractable: true })))
  server = createServer((request, response) => {
    const body = request.url === '/.well-known/openid-configuration'
      ? { issuer, jwks_uri: `${issuer}/jwks`, response_types_supported: ['id_token'], subject_types_supported: ['public'], id_token_signing_alg_values_supported: ['RS256'] }
      : request.url === '/jwks' ? { keys } : undefined
    response.writeHead(body === undefined ? 404 : 200, { 'content-type': 'application/json' }).end(JSON.stringify(body ?? {}))
  })
  issuer = await listen(server)
  rotatingServer = createServer((request, response) => {
    if (request.url === '/jwks') rotatingReads++
    const body = request.url === '/.well-known/openid-configuration'
      ? { issuer: rotatingIssuer, jwks_uri: `${rotatingIssuer}/jwks`, response_types_supported: ['id_token'], subject_types_supported: ['public'], id_token_signing_alg_values_supported: ['RS256'] }
      : request.url === '/jwks' ? { keys: rotatingKeys } : undefined
    response.writeHead(body === undefined ? 404 : 200, { 'content-type': 'application/json' }).end(JSON.stringify(body ?? {}))
  })
  rotatingIssuer = await listen(rotatingServer)
  // Two keys under one kid: the first two pairs. The third is published nowhere.
  keys = await Promise.all([0, 1].map(async (i) => ({ ...await exportJWK(pairs[i]!.publicKey), kid: 'k1', alg: 'RS256', use: 'sig' })))
  gateway = await startStack({
    providers: { ci: { issuer }, rotating: { issuer: rotatingIssuer } },
    routes: [
      { path: '/deploy/', upstream: upstream.url, provider: 'demo', bearer: { issuers: ['ci'], audience: AUD }, allow: [{ claims: { repository: ['org/app'] } }] },
      { path: '/rotating/', upstream: upstream.url, provider: 'demo', bearer: { issuers: ['rotating'], audience: AUD } },
    ],
  }, { deps: { clock } })
})

it.afterAll(async () => {
  await gateway?.close()
  await Promise.all([close(server), close(rotatingServer)])
})

async function mint (key: CryptoKey, kid: string | undefined, by = issuer): Promise<string> {
  const now = Math.floor(clock.now() / 1000)
  return await new SignJWT({ sub: 'repo:org/app:ref:refs/heads/main', repository: 'org/app' })
    .setProtectedHeader({ alg: 'RS256', typ: 'JWT', ...(kid === undefined ? {} : { kid }) })
    .setIssuer(by).setAudience(AUD).setIssuedAt(now).setExpirationTime(now + 300).sign(key)
}

async function call (token: string, path = '/deploy/run'): Promise<{ status: number, body: string }> {
  const response = await fetch(`${gateway.url}${path}`, { headers: { accept: 'application/json', authorization: `Bearer ${token}` } })
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

// A reviewer's row: an issuer that re-publishes a key under a kid the gateway already holds (a
// rotation that keeps its kid) had that key's tokens refused as a bad signature until the
// background read, 10 minutes on: a signature that fails with the keys held now reads them once
// more, as an unknown kid does, at most once per cooldown.
it('a key re-published under a kid already held passes once its set can be read again; a forged signature costs at most one read per cooldown', async () => {
  const [old, fresh] = await Promise.all([0, 1].map(async () => await generateKeyPair('RS256', { extractable: true })))
  rotatingKeys = [{ ...await exportJWK(old!.publicKey), kid: 'r1', alg: 'RS256', use: 'sig' }]
  expect((await call(await mint(old!.privateKey, 'r1', rotatingIssuer), '/rotating/x')).status).toBe(200)
  rotatingKeys = [{ ...await exportJWK(fresh!.publicKey), kid: 'r1', alg: 'RS256', use: 'sig' }]
  const reads = rotatingReads
  // Within the cooldown of that read: refused at once, no read.
  expect((await call(await mint(fresh!.privateKey, 'r1', rotatingIssuer), '/rotating/x')).status).toBe(401)
  expect(rotatingReads).toBe(reads)
  clock.offset += JWKS_COOLDOWN_MS
  expect((await call(await mint(fresh!.privateKey, 'r1', rotatingIssuer), '/rotating/x')).status).toBe(200)
  expect(rotatingReads).toBe(reads + 1)
  // A token of a key published nowhere under that kid: one read at most per cooldown, then 401.
  const forged = await mint(pairs[2]!.privateKey, 'r1', rotatingIssuer)
  for (let i = 0; i < 3; i++) expect((await call(forged, '/rotating/x')).status).toBe(401)
  expect(rotatingReads).toBe(reads + 1)
})
