// The PKCE S256 challenge the login sends (src/oauth/state.ts), against RFC 7636's own example and
// against oauth4webapi's implementation (which the login used before).
import { randomBytes } from 'node:crypto'
import * as oauth from 'oauth4webapi'
import { describe, expect, it } from 'vitest'
import { pkceChallenge } from '../../src/oauth/state.js'

describe('pkceChallenge', () => {
  it('is base64url(SHA-256(verifier)), as in RFC 7636 Appendix B', () => {
    expect(pkceChallenge('dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk')).toBe('E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM')
  })

  it('matches oauth4webapi for any verifier', async () => {
    for (let i = 0; i < 50; i++) {
      const verifier = randomBytes(32).toString('base64url')
      expect(pkceChallenge(verifier)).toBe(await oauth.calculatePKCECodeChallenge(verifier))
    }
  })
})
