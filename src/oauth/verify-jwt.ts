// jose's jwtVerify over a provider's published keys, where more than one key fits the token's
// header: a `kid` the key set lists twice (a key re-published during a rotation), or no `kid` and
// several keys for its algorithm. jose then throws JWKSMultipleMatchingKeys, which is iterable over
// the candidates, and leaves trying them to the caller; a `kid` is only a hint (RFC 7515 §4.1.4),
// so each is tried in turn, as jose documents, and the token is judged by the one it was signed
// with. Every token of such an issuer was refused as "not a well-formed JWT" before (an outside
// tester's finding).
// @see https://github.com/panva/jose/blob/main/docs/jwks/local/functions/createLocalJWKSet.md
import { errors, jwtVerify, type CryptoKey, type JWTVerifyGetKey, type JWTVerifyOptions, type JWTVerifyResult, type KeyObject } from 'jose'

/**
 * Candidates tried at most: each costs a signature check, and a token without a `kid` is anyone's
 * to send. Past them the token is refused for naming no key among too many (`TooManyCandidates`),
 * never as a bad signature, which it may not be.
 */
export const MAX_CANDIDATES = 4

/** A token that fits more of the issuer's keys than {@link MAX_CANDIDATES}, none of those tried its signer. */
export class TooManyCandidates extends errors.JOSEError {}

/**
 * What one candidate's failure says: the claims failed on a signature that verified (the right
 * key: its answer is the token's), or the key is not the one (a bad signature, or a key this
 * runtime will not use, such as a 1,024-bit RSA key an issuer still lists while it moves off it).
 */
function signedByThisKey (error: unknown): boolean {
  return error instanceof errors.JWTClaimValidationFailed || error instanceof errors.JWTExpired || error instanceof errors.JWTInvalid
}

export async function verifyJwt (token: string, keys: JWTVerifyGetKey, options: JWTVerifyOptions): Promise<JWTVerifyResult> {
  try {
    return await jwtVerify(token, keys, options)
  } catch (error) {
    if (!(error instanceof errors.JWKSMultipleMatchingKeys)) throw error
    let tried = 0
    for await (const key of error as unknown as AsyncIterable<CryptoKey | KeyObject>) {
      if (++tried > MAX_CANDIDATES) throw new TooManyCandidates(`the token fits more than ${MAX_CANDIDATES} of the issuer's keys`)
      try {
        return await jwtVerify(token, key, options)
      } catch (inner) {
        if (signedByThisKey(inner)) throw inner
      }
    }
    throw new errors.JWSSignatureVerificationFailed()
  }
}
