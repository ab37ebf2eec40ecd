// A token judged by the key it was signed with when more than one published key fits its header
// (src/oauth/verify-jwt.ts): a `kid` the key set lists twice, or no `kid` among several keys. jose
// leaves trying the candidates to the caller; before, every such token was refused as "not a
// well-formed JWT" (machine clients' tokens, ID tokens and logout tokens alike). A token of a key
// that is not published stays refused, and a claim that fails on the right key says so.
import { generateKeyPairSync } from 'node:crypto'
import { SignJWT, createLocalJWKSet, errors, exportJWK, generateKeyPair, jwtVerify, type CryptoKey, type JWK } from 'jose'
import { beforeAll, describe, expect, it } from 'vitest'
import { MAX_CANDIDATES, TooManyCandidates, verifyJwt } from '../../src/oauth/verify-jwt.js'

const ISSUER = 'https://issuer.example'
const NOW_S = 1_800_000_000
const OPTIONS = { issuer: ISSUER, algorithms: ['RS256', 'ES256'], currentDate: new Date(NOW_S * 1000) }
let pairs: Array<{ privateKey: CryptoKey, publicKey: CryptoKey }>
let stranger: { privateKey: CryptoKey }

beforeAll(async () => {
  pairs = await Promise.all([0, 1, 2].map(async () => await generateKeyPair('RS256', { extractable: true })))
  stranger = await generateKeyPair('RS256')
})

async function published (kids: Array<string | undefined>): Promise<JWK[]> {
  return await Promise.all(kids.map(async (kid, i) => ({ ...await exportJWK(pairs[i]!.publicKey), alg: 'RS256', use: 'sig', ...(kid === undefined ? {} : { kid }) })))
}

async function token (key: CryptoKey, kid: string | undefined, expiresAt = NOW_S + 300): Promise<string> {
  return await new SignJWT({ sub: 'ci' }).setProtectedHeader({ alg: 'RS256', ...(kid === undefined ? {} : { kid }) })
    .setIssuer(ISSUER).setIssuedAt(NOW_S).setExpirationTime(expiresAt).sign(key)
}

describe('verifyJwt', () => {
  it.each([
    ['a kid listed twice, the first of its keys', ['k1', 'k1', 'k2'], 0, 'k1'],
    ['a kid listed twice, the second of its keys', ['k1', 'k1', 'k2'], 1, 'k1'],
    ['no kid in the token, several keys published', ['k1', 'k2', 'k3'], 2, undefined],
    ['no kid in the token nor in the key set', [undefined, undefined, undefined], 1, undefined],
  ] as const)('%s: passes, judged by the key that signed it', async (_case, kids, signer, kid) => {
    const keys = createLocalJWKSet({ keys: await published([...kids]) })
    // jose alone refuses it: more than one key fits.
    await expect(jwtVerify(await token(pairs[signer]!.privateKey, kid), keys, OPTIONS)).rejects.toBeInstanceOf(errors.JWKSMultipleMatchingKeys)
    const { payload } = await verifyJwt(await token(pairs[signer]!.privateKey, kid), keys, OPTIONS)
    expect(payload.sub).toBe('ci')
  })

  it('a token of a key that is not published, under a kid listed twice: a bad signature, not a malformed token', async () => {
    const keys = createLocalJWKSet({ keys: await published(['k1', 'k1']) })
    await expect(verifyJwt(await token(stranger.privateKey, 'k1'), keys, OPTIONS)).rejects.toBeInstanceOf(errors.JWSSignatureVerificationFailed)
  })

  it('a claim that fails on the key that signed it says so (expired), whichever candidate comes first', async () => {
    const keys = createLocalJWKSet({ keys: await published(['k1', 'k1']) })
    await expect(verifyJwt(await token(pairs[1]!.privateKey, 'k1', NOW_S - 60), keys, OPTIONS)).rejects.toBeInstanceOf(errors.JWTExpired)
  })

  // A reviewer's rows: a candidate this runtime will not use (an RSA key under 2,048 bits, which
  // jose refuses only when it verifies) ended the loop with a TypeError, a 502, before the key
  // that signed; and past the cap the token was called a bad signature, which it need not be.
  it.each([['k1'], [undefined]] as const)('a 1,024-bit key an issuer still lists first does not stop the key that signed (kid %s)', async (kid) => {
    const legacy = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ format: 'jwk' }) as JWK
    const keys = createLocalJWKSet({ keys: [{ ...legacy, alg: 'RS256', use: 'sig', ...(kid === undefined ? {} : { kid }) }, ...await published([kid])] })
    expect((await verifyJwt(await token(pairs[0]!.privateKey, kid), keys, OPTIONS)).payload.sub).toBe('ci')
  })

  it(`a token that fits more than ${MAX_CANDIDATES} keys, none of those tried its signer: refused as naming no key it can be told by, not as a bad signature`, async () => {
    const more = await Promise.all(Array.from({ length: MAX_CANDIDATES + 1 }, async () => await generateKeyPair('RS256', { extractable: true })))
    const keys = createLocalJWKSet({ keys: await Promise.all(more.map(async (pair) => ({ ...await exportJWK(pair.publicKey), alg: 'RS256', use: 'sig' }))) })
    await expect(verifyJwt(await token(more.at(-1)!.privateKey, undefined), keys, OPTIONS)).rejects.toBeInstanceOf(TooManyCandidates)
    expect((await verifyJwt(await token(more[MAX_CANDIDATES - 1]!.privateKey, undefined), keys, OPTIONS)).payload.sub).toBe('ci')
  })

  it('one key for the kid: as jose, nothing tried twice', async () => {
    const keys = createLocalJWKSet({ keys: await published(['k1', 'k2']) })
    expect((await verifyJwt(await token(pairs[1]!.privateKey, 'k2'), keys, OPTIONS)).protectedHeader.kid).toBe('k2')
    await expect(verifyJwt(await token(pairs[0]!.privateKey, 'k2'), keys, OPTIONS)).rejects.toBeInstanceOf(errors.JWSSignatureVerificationFailed)
  })
})
