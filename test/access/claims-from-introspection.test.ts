// `bearer.claimsFrom: introspection` on a JWT: the issuer's RFC 7662 answer is kept at most 60 s,
// never past `exp` (SPEC; machine-clients.md), as for an opaque token. A token the issuer has since
// revoked (`active: false`), or whose person has since lost the group the route's allow names, is
// refused once the answer is older than that (an outside tester's finding: the first answer was kept
// until the JWT's `exp`, an hour here, both in the claims cache and in the route's identity cache).
//
// The issuer is a stand-in (oidc-provider will not introspect its own JWTs): discovery, JWKS and an
// RFC 7662 endpoint answering as a test sets it, with RS256 JWTs it signs itself. The gateway's clock
// is injected.
import { createServer, type Server } from 'node:http'
import { SignJWT, exportJWK, generateKeyPair, type JWK } from 'jose'
import { afterAll, afterEach, expect } from 'vitest'
import type { TestGateway } from '../helpers/gateway.js'
import { close, listen } from '../helpers/net.js'
import { test as it } from '../helpers/stack.js'

/** The gateway's clock: the wall clock moved by `offset` ms. */
const clock = { offset: 0, now: () => Date.now() + clock.offset }

/** What the stand-in's introspection endpoint says of each token (by its `jti`). */
const answers = new Map<string, Record<string, unknown>>()
let introspections = 0
let issuer = ''
let server: Server
let sign: (claims: Record<string, unknown>) => Promise<string>
let gateway: TestGateway

it.beforeAll(async ({ startStack, upstream }) => {
  const { privateKey, publicKey } = await generateKeyPair('RS256')
  const jwk: JWK = { ...await exportJWK(publicKey), kid: 'stand-key', alg: 'RS256', use: 'sig' }
  server = createServer((req, res) => {
    const json = (status: number, body: unknown): void => { res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body)) }
    if (req.url === '/.well-known/openid-configuration') {
      json(200, {
        issuer,
        authorization_endpoint: `${issuer}/authorize`,
        token_endpoint: `${issuer}/token`,
        jwks_uri: `${issuer}/jwks`,
        introspection_endpoint: `${issuer}/introspect`,
        response_types_supported: ['code'],
        subject_types_supported: ['public'],
        id_token_signing_alg_values_supported: ['RS256'],
      })
      return
    }
    if (req.url === '/jwks') {
      json(200, { keys: [jwk] })
      return
    }
    if (req.url === '/introspect') {
      let body = ''
      req.on('data', (chunk: Buffer) => { body += chunk.toString() })
      req.on('end', () => {
        introspections++
        const token = new URLSearchParams(body).get('token') ?? ''
        const jti = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString() || '{}').jti as string
        json(200, answers.get(jti) ?? { active: false })
      })
      return
    }
    json(404, { error: 'not_found' })
  })
  issuer = await listen(server)
  sign = async (claims) => {
    const now = Math.floor(Date.now() / 1000)
    return await new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid: jwk.kid, typ: 'at+jwt' })
      .setIssuer(issuer).setAudience('api://orders').setIssuedAt(now).setExpirationTime(now + 3600).sign(privateKey)
  }
  gateway = await startStack({
    providers: { stand: { issuer, clientId: 'c', clientSecret: 's', scope: 'openid' } },
    routes: [
      { path: '/intro/', upstream: upstream.url, provider: 'stand', allow: { groups: ['staff'] }, bearer: { audience: 'api://orders', claimsFrom: 'introspection' } },
    ],
  }, { deps: { clock } })
})

afterEach(() => { clock.offset = 0 })
afterAll(async () => {
  await gateway?.close()
  if (server) await close(server)
})

async function call (token: string): Promise<number> {
  const response = await fetch(`${gateway.url}/intro/x`, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } })
  await response.arrayBuffer()
  return response.status
}

it('a JWT the issuer has revoked is refused once the introspection answer is older than 60 s', async () => {
  const token = await sign({ sub: 'bob', jti: 'revoked' })
  answers.set('revoked', { active: true, sub: 'bob', groups: ['staff'] })
  expect(await call(token)).toBe(200)
  // The issuer revokes it (RFC 7662: active false from now on).
  answers.set('revoked', { active: false })
  const before = introspections
  clock.offset = 61_000
  // Expected: asked again (the answer is older than 60 s), inactive, 401. Found: 200, not asked.
  expect({ status: await call(token), asked: introspections - before }).toEqual({ status: 401, asked: 1 })
})

it('a JWT whose person the issuer no longer puts in `staff` is refused by the allow once the answer is older than 60 s', async () => {
  const token = await sign({ sub: 'carol', jti: 'demoted' })
  answers.set('demoted', { active: true, sub: 'carol', groups: ['staff'] })
  expect(await call(token)).toBe(200)
  answers.set('demoted', { active: true, sub: 'carol', groups: [] })
  clock.offset = 61_000
  expect(await call(token)).toBe(403)
})
