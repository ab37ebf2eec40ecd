// A stand-in token issuer for machine-client tests where a fault or an answer must be set by the
// test (oidc-provider will neither publish a key before it signs with it, nor fail its JWKS on
// demand, nor introspect its own JWTs): a discovery document, the keys it publishes, and, when the
// test answers it, an RFC 7662 introspection endpoint and a userinfo endpoint. It signs RS256
// access tokens (`at+jwt`) itself, with any of its keys or with one it never publishes.
// @see https://www.rfc-editor.org/rfc/rfc9068
import type { Socket } from 'node:net'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose'
import { close, listen } from './net.js'

/** A signing key: its public JWK (with `kid`) and its private key. */
export interface SigningKey {
  readonly jwk: JWK
  readonly key: CryptoKey
}

export async function signingKey (kid: string): Promise<SigningKey> {
  const pair = await generateKeyPair('RS256', { extractable: true })
  return { jwk: { ...await exportJWK(pair.publicKey), kid, alg: 'RS256', use: 'sig' }, key: pair.privateKey }
}

export interface KeyIssuerOptions {
  /** Answers GET /jwks in place of the published keys when it returns true (a fault the test injects). */
  readonly jwks?: (request: IncomingMessage, response: ServerResponse) => boolean
  /** RFC 7662: the answer for the posted token. Without it, no introspection endpoint is advertised. */
  readonly introspect?: (token: string) => Record<string, unknown>
  /** The userinfo answer (status and JSON) for the bearer token. Without it, no userinfo endpoint is advertised. */
  readonly userinfo?: (token: string) => { status: number, body: Record<string, unknown> }
}

export interface KeyIssuer {
  readonly url: string
  /** What GET /jwks answers: the first key's JWK until the test sets it. */
  published: JWK[]
  /** How many times the keys were read. */
  reads: number
  /** How many introspection and userinfo requests came. */
  readonly asked: { introspect: number, userinfo: number }
  /** The first key, made at the start. */
  readonly key: SigningKey
  /** An RS256 access token for `audience`, issued at `now` (clock ms), living `lifetimeS`. */
  sign (claims: Record<string, unknown>, options: { audience: string, now: number, lifetimeS?: number, by?: SigningKey }): Promise<string>
  close (): Promise<void>
}

export async function startKeyIssuer (options: KeyIssuerOptions = {}): Promise<KeyIssuer> {
  const sockets = new Set<Socket>()
  const key = await signingKey('k1')
  let url = ''
  const server = createServer((request, response) => {
    const json = (status: number, body: unknown): void => { response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body)) }
    const path = request.url ?? ''
    if (path === '/.well-known/openid-configuration') {
      json(200, {
        issuer: url,
        authorization_endpoint: `${url}/authorize`,
        token_endpoint: `${url}/token`,
        jwks_uri: `${url}/jwks`,
        ...(options.introspect === undefined ? {} : { introspection_endpoint: `${url}/introspect` }),
        ...(options.userinfo === undefined ? {} : { userinfo_endpoint: `${url}/userinfo` }),
        response_types_supported: ['code'],
        subject_types_supported: ['public'],
        id_token_signing_alg_values_supported: ['RS256'],
      })
    } else if (path === '/jwks') {
      issuer.reads++
      if (options.jwks?.(request, response) !== true) json(200, { keys: issuer.published })
    } else if (path === '/introspect' && options.introspect !== undefined) {
      const introspect = options.introspect
      let body = ''
      request.on('data', (chunk: Buffer) => { body += chunk.toString() })
      request.on('end', () => {
        issuer.asked.introspect++
        json(200, introspect(new URLSearchParams(body).get('token') ?? ''))
      })
    } else if (path === '/userinfo' && options.userinfo !== undefined) {
      issuer.asked.userinfo++
      const answer = options.userinfo(request.headers.authorization?.replace(/^Bearer /, '') ?? '')
      json(answer.status, answer.body)
    } else {
      json(404, { error: 'not_found' })
    }
  })
  server.on('connection', (socket) => { sockets.add(socket); socket.on('close', () => sockets.delete(socket)) })
  url = await listen(server)
  const issuer: KeyIssuer = {
    url,
    published: [key.jwk],
    reads: 0,
    asked: { introspect: 0, userinfo: 0 },
    key,
    async sign (claims, { audience, now, lifetimeS = 600, by = key }) {
      const at = Math.floor(now / 1000)
      return await new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid: by.jwk.kid!, typ: 'at+jwt' })
        .setIssuer(url).setAudience(audience).setIssuedAt(at).setExpirationTime(at + lifetimeS).sign(by.key)
    },
    async close () {
      // A fault may leave a connection open (a body cut off): closing waits for none.
      for (const socket of sockets) socket.destroy()
      await close(server)
    },
  }
  return issuer
}

/** The `jti` of a compact JWT, unverified (what a stand-in's endpoints key their answers by). */
export function jtiOf (token: string): string | undefined {
  try {
    return (JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString()) as { jti?: string }).jti
  } catch {
    return undefined
  }
}
