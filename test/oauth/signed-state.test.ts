// The state token (src/oauth/signed-state.ts) is a compact HS256 JWS made with node:crypto. jose is
// the reference: what one signs the other must read, for any claims; and a table of hostile tokens
// that must all be refused.
import { createHmac, createSecretKey, randomBytes } from 'node:crypto'
import fc from 'fast-check'
import { SignJWT, jwtVerify } from 'jose'
import { describe, expect, it } from 'vitest'
import { openState, signState, stateKey, stateKeyring } from '../../src/oauth/signed-state.js'

const bytes = randomBytes(32)
const key = stateKey('k1', createSecretKey(bytes))
const ring = stateKeyring([key])
const NOW = 1_700_000_000_000
const b64 = (text: string) => Buffer.from(text).toString('base64url')
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'

const claimsArbitrary = fc.record({
  p: fc.string({ maxLength: 40 }),
  next: fc.webUrl(),
  n: fc.base64String({ maxLength: 30 }),
  s: fc.nat(),
})

describe('signed state', () => {
  it('is read by jose as an HS256 JWT with iat and exp, for any claims', async () => {
    await fc.assert(fc.asyncProperty(claimsArbitrary, fc.integer({ min: 1000, max: 3_600_000 }), async (claims, ttlMs) => {
      // One instant for both: on the wall clock a 1 s state signed late in a second expired before jose read it.
      const token = signState(key, claims, ttlMs, NOW)
      const { payload, protectedHeader } = await jwtVerify(token, bytes, { algorithms: ['HS256'], currentDate: new Date(NOW) })
      expect(protectedHeader).toEqual({ alg: 'HS256', kid: 'k1' })
      expect(payload).toMatchObject(claims)
      expect(payload.exp! - payload.iat!).toBe(Math.ceil(ttlMs / 1000))
    }), { numRuns: 50 })
  })

  it('reads what jose signs with the same header, for any claims', async () => {
    await fc.assert(fc.asyncProperty(claimsArbitrary, async (claims) => {
      const iat = Math.floor(NOW / 1000)
      const token = await new SignJWT({ ...claims }).setProtectedHeader({ alg: 'HS256', kid: 'k1' }).setIssuedAt(iat).setExpirationTime(iat + 300).sign(bytes)
      const opened = openState(ring, token, NOW)
      expect(opened).toEqual({ ok: true, claims: { ...claims, iat, exp: iat + 300 }, kid: 'k1' })
    }), { numRuns: 50 })
  })

  it('counts a state as expired from its exp second on, as jose does with no clock tolerance', () => {
    const token = signState(key, { p: 'demo' }, 300_000, NOW)
    const exp = Math.floor(NOW / 1000) + 300
    expect(openState(ring, token, exp * 1000 - 1).ok).toBe(true)
    // Still the gateway's own claims: a page may read where an expired sign-in was going.
    expect(openState(ring, token, exp * 1000)).toEqual({ ok: false, reason: 'expired', claims: { p: 'demo', iat: exp - 300, exp }, kid: key.kid })
  })

  const good = signState(key, { p: 'demo', next: '/' }, 300_000, NOW)
  const [header, payload, signature] = good.split('.') as [string, string, string]
  it('decodes the differently spelled signature to the same bytes (so the case below tests the spelling alone)', () => {
    const other = `${signature.slice(0, -1)}${ALPHABET[ALPHABET.indexOf(signature.at(-1)!) ^ 1]}`
    expect(other).not.toBe(signature)
    expect(Buffer.from(other, 'base64url')).toEqual(Buffer.from(signature, 'base64url'))
  })
  /** Correctly signed with the key over another header or payload: only the fixed header and a JSON object with a numeric exp pass. */
  const resigned = (h: string, p: string) => `${h}.${p}.${createHmac('sha256', bytes).update(`${h}.${p}`).digest('base64url')}`

  it.each([
    ['an empty string', ''],
    ['two parts', `${header}.${payload}`],
    ['four parts', `${good}.x`],
    ['another key under the same kid', signState(stateKey('k1', createSecretKey(randomBytes(32))), { p: 'demo', next: '/' }, 300_000, NOW)],
    ['a header without kid, as the builds before 1.0.0 wrote (correctly signed)', resigned(b64('{"alg":"HS256"}'), payload)],
    ['a changed payload', `${header}.${b64('{"p":"evil","next":"/","exp":9999999999}')}.${signature}`],
    ['no signature', `${header}.${payload}.`],
    ['a truncated signature', `${header}.${payload}.${signature.slice(0, -1)}`],
    ['the signature spelled with a padding character', `${header}.${payload}.${signature}=`],
    ['the same signature bytes spelled another way (unused low bits set)', `${header}.${payload}.${signature.slice(0, -1)}${ALPHABET[ALPHABET.indexOf(signature.at(-1)!) ^ 1]}`],
    ['alg none', `${b64('{"alg":"none"}')}.${payload}.`],
    ['alg HS512 (correctly signed)', resigned(b64('{"alg":"HS512","kid":"k1"}'), payload)],
    ['a header with typ (correctly signed)', resigned(b64('{"alg":"HS256","kid":"k1","typ":"JWT"}'), payload)],
    ['a header spelled with a space (correctly signed)', resigned(b64('{"alg": "HS256","kid":"k1"}'), payload)],
    ['a payload that is not JSON (correctly signed)', resigned(header, b64('not json'))],
    ['a payload that is an array (correctly signed)', resigned(header, b64('[1,2]'))],
    ['a payload without exp (correctly signed)', resigned(header, b64('{"p":"demo"}'))],
    ['a payload with exp as a string (correctly signed)', resigned(header, b64('{"p":"demo","exp":"9999999999"}'))],
    ['a payload with padding characters', `${header}.${payload}==.${signature}`],
  ])('refuses %s', (_name, token) => {
    expect(openState(ring, token, NOW)).toEqual({ ok: false, reason: 'invalid' })
  })
})
