// An issuer that moves its signing key to another algorithm under the same `kid` (a fixed kid such
// as `default`): a token of the new key is read once the cooldown allows, not refused until the
// background read 10 minutes later (a re-reading's finding against "a kid held whose alg differs is
// refused at once"). A stub JWKS: the keys must change at will. Time is the set's clock.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { IssuerKeys, JWKS_COOLDOWN_MS, verifiedClaims } from '../../src/oauth/issuer-keys.js'

let server: Server
let url: string
let keys: JWK[] = []
let served = 0

beforeAll(async () => {
  server = createServer((_request, response) => {
    served++
    response.writeHead(200, { 'content-type': 'application/json' })
    response.end(JSON.stringify({ keys }))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`
})

afterAll(async () => {
  server.closeAllConnections()
  await new Promise((resolve) => server.close(resolve))
})

describe('an issuer that changes algorithm under the same kid', () => {
  it('a token of the new key is accepted once the cooldown allows a read (not refused for 10 minutes)', async () => {
    const clock = { at: Date.UTC(2031, 0, 1), now: () => clock.at }
    const set = new IssuerKeys('demo', url, 2000, clock, undefined)
    const ec = await generateKeyPair('ES256', { extractable: true })
    keys = [{ ...await exportJWK(ec.publicKey), kid: 'default', alg: 'ES256', use: 'sig' }]
    const options = { issuer: 'https://op.example', audience: 'c', currentDate: new Date(clock.at) }
    const sign = async (key: Parameters<SignJWT['sign']>[0], alg: string) => await new SignJWT({ sub: 'alice' })
      .setProtectedHeader({ alg, kid: 'default' }).setIssuer('https://op.example').setAudience('c')
      .setIssuedAt(Math.floor(clock.at / 1000)).setExpirationTime(Math.floor(clock.at / 1000) + 300).sign(key)
    expect((await verifiedClaims(await sign(ec.privateKey, 'ES256'), set, options)).sub).toBe('alice')

    // The issuer rotates to RS256, keeping its kid.
    const rsa = await generateKeyPair('RS256', { extractable: true })
    keys = [{ ...await exportJWK(rsa.publicKey), kid: 'default', alg: 'RS256', use: 'sig' }]
    clock.at += JWKS_COOLDOWN_MS * 2
    const before = served
    const token = await sign(rsa.privateKey, 'RS256')
    let outcome: string
    try {
      outcome = (await verifiedClaims(token, set, options)).sub ?? 'no sub'
    } catch (error) {
      outcome = `${(error as Error).name} (JWKS reads: ${served - before})`
    }
    expect(outcome).toBe('alice')
  })
})
