// jose's jwtVerify over a provider's published keys, where more than one key fits the token's
// header: a `kid` the key set lists twice (a key re-published during a rotation), or no `kid` and
// several keys for its algorithm. jose then throws JWKSMultipleMatchingKeys, which is iterable over
// the candidates, and leaves trying them to the caller; a `kid` is only a hint (RFC 7515 §4.1.4),
// so each is tried in turn, as jose documents, and the token is judged by the one it was signed
// with. Every token of such an issuer was refused as "not a well-formed JWT" before (an outside
// tester's finding).
// @see https://github.com/panva/jose/blob/main/docs/jwks/local/functions/createLocalJWKSet.md
import { errors, jwtVerify, type CryptoKey, type JWTVerifyGetKey, type JWTVerifyOptions, type JWTVerifyResult, type KeyObject } from 'jose'

/** Candidates tried at most: a token without a `kid` costs one signature check per key, never more than this. */
const MAX_CANDIDATES = 10

export async function verifyJwt (token: string, keys: JWTVerifyGetKey, options: JWTVerifyOptions): Promise<JWTVerifyResult> {
  try {
    return await jwtVerify(token, keys, options)
  } catch (error) {
    if (!(error instanceof errors.JWKSMultipleMatchingKeys)) throw error
    let tried = 0
    for await (const key of error as unknown as AsyncIterable<CryptoKey | KeyObject>) {
      if (++tried > MAX_CANDIDATES) break
      try {
        return await jwtVerify(token, key, options)
      } catch (inner) {
        if (!(inner instanceof errors.JWSSignatureVerificationFailed)) throw inner
      }
    }
    throw new errors.JWSSignatureVerificationFailed()
  }
}
