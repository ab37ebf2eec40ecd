// What a failed code exchange tells the user (src/oauth/client.ts, tokenExchangeError), for errors
// the libraries themselves throw: oauth4webapi processing a token response built here, jose
// verifying a token, an aborted signal. The table there is keyed by the libraries' error classes and
// codes, so an upgrade that renames a code shows here as a changed message.
import { errors as joseErrors, generateKeyPair, jwtVerify, SignJWT } from 'jose'
import * as oauth from 'oauth4webapi'
import { describe, expect, it } from 'vitest'
import { tokenExchangeError } from '../../src/oauth/client.js'
import { KeysUnavailable } from '../../src/oauth/issuer-keys.js'
import { UnreadableAnswer } from '../../src/oauth/provider-http.js'
import type { ResolvedProvider } from '../../src/oauth/providers.js'

const provider = { name: 'op', timeoutMs: 500, tokenUrl: 'https://op.example.test/token?tenant=x' } as ResolvedProvider
const as: oauth.AuthorizationServer = { issuer: 'https://issuer.example', token_endpoint: 'https://issuer.example/token' }
const client: oauth.Client = { client_id: 'client' }
const NONCE = 'n0nce'

const REFUSED = 'The token endpoint refused the request (invalid_grant).'
const NOT_USABLE = 'The token endpoint did not return a usable access token.'
const ID_TOKEN = 'The ID token is invalid.'

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url')
const now = () => Math.floor(Date.now() / 1000)
/** An ID token as oauth4webapi reads it before the signature is checked (jose checks that apart). */
const idToken = (claims: Record<string, unknown>) => `${b64({ alg: 'RS256' })}.${b64(claims)}.c2ln`
const claims = (extra: Record<string, unknown> = {}) => ({ iss: as.issuer, aud: 'client', sub: 'u1', iat: now(), exp: now() + 300, nonce: NONCE, ...extra })

/** What oauth4webapi throws for a token endpoint answer of `status` with `body`. */
async function processing (status: number, body: unknown, contentType = 'application/json'): Promise<unknown> {
  const response = new Response(typeof body === 'string' ? body : JSON.stringify(body), { status, headers: { 'content-type': contentType } })
  return await oauth.processAuthorizationCodeResponse(as, client, response, { expectedNonce: NONCE, requireIdToken: true }).then(
    () => { throw new Error('processed without an error') }, (error: unknown) => error)
}

const token = (extra: Record<string, unknown>) => ({ access_token: 'a', token_type: 'Bearer', ...extra })

describe('tokenExchangeError', () => {
  it.each([
    ['an OAuth error answer', () => processing(400, { error: 'invalid_grant' }), REFUSED],
    ['a 500 without an OAuth error', () => processing(500, 'oops', 'text/plain'), NOT_USABLE],
    ['a body that is not JSON', () => processing(200, 'not json'), NOT_USABLE],
    ['no access_token', () => processing(200, { token_type: 'Bearer' }), NOT_USABLE],
    ['an unknown token_type', () => processing(200, { access_token: 'a', token_type: 'mac' }), NOT_USABLE],
    ['no ID token', () => processing(200, token({})), NOT_USABLE],
    ['an ID token that is not a JWT', () => processing(200, token({ id_token: 'a.b' })), NOT_USABLE],
    ['a wrong nonce', () => processing(200, token({ id_token: idToken(claims({ nonce: 'other' })) })), ID_TOKEN],
    ['a wrong issuer', () => processing(200, token({ id_token: idToken(claims({ iss: 'https://evil.example' })) })), ID_TOKEN],
    ['an expired ID token', () => processing(200, token({ id_token: idToken(claims({ exp: now() - 300 })) })), ID_TOKEN],
    ['an auth_time that is not a number', () => processing(200, token({ id_token: idToken(claims({ auth_time: 'x' })) })), ID_TOKEN],
    ['an ID token without sub', () => processing(200, token({ id_token: idToken(claims({ sub: undefined })) })), ID_TOKEN],
    ['an ID token signed with another alg', () => processing(200, token({ id_token: `${b64({ alg: 'none' })}.${b64(claims())}.` })), ID_TOKEN],
  ] as const)('%s from oauth4webapi', async (_name, thrown, message) => {
    const error = tokenExchangeError(provider, await thrown())
    expect({ code: error.code, message: error.message }).toEqual({ code: 'token_exchange_failed', message })
  })

  it('a signature jose refuses is an invalid ID token, and keys that cannot be read are provider_unavailable, naming them', async () => {
    const signer = await generateKeyPair('RS256')
    const other = await generateKeyPair('RS256')
    const jwt = await new SignJWT(claims()).setProtectedHeader({ alg: 'RS256' }).sign(signer.privateKey)
    const refused = await jwtVerify(jwt, other.publicKey).then(() => undefined, (error: unknown) => error)
    expect(refused).toBeInstanceOf(joseErrors.JWSSignatureVerificationFailed)
    expect(tokenExchangeError(provider, refused).message).toBe(ID_TOKEN)
    const unreadable = tokenExchangeError(provider, new KeysUnavailable(5, 'The signing keys of provider "stub" could not be read; try again in 5 s.'))
    expect({ code: unreadable.code, message: unreadable.message }).toEqual({ code: 'provider_unavailable', message: 'The signing keys of provider "stub" could not be read; try again in 5 s.' })
  })

  it('an aborted or timed-out signal is the provider\'s timeout; a TypeError (fetch failed) is unreachable', () => {
    expect(tokenExchangeError(provider, AbortSignal.abort().reason).message).toBe('The token endpoint did not answer within 0.5s.')
    expect(tokenExchangeError(provider, new DOMException('The operation was aborted due to timeout', 'TimeoutError')).message)
      .toBe('The token endpoint did not answer within 0.5s.')
    expect(tokenExchangeError(provider, new TypeError('fetch failed')).message).toBe('The token endpoint could not be reached.')
    // It answered, too large or cut off (a tester's finding: told as unreachable).
    expect(tokenExchangeError(provider, new UnreadableAnswer('fetch failed')).message).toBe('The token endpoint\'s answer could not be read (too large, or cut off).')
    expect(tokenExchangeError(provider, new Error('anything else')).message).toBe(NOT_USABLE)
  })
})
