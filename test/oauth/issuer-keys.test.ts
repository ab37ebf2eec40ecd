// One issuer's key set for machine clients' tokens (src/oauth/issuer-keys.ts), asked straight, against
// a real JWKS server on a loopback port that can answer well, answer garbage, answer 500, or hang:
// a failed read keeps the keys already read, an unknown kid is "try again" (KeysUnavailable, with
// the seconds until the next read) until a read begun after it was met lacks it, a read that hangs
// ends at the provider's timeout, and concurrent callers share one read. The clock is injected.
import { createServer, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { errors as joseErrors, exportJWK, generateKeyPair, type FlattenedJWSInput, type JWK } from 'jose'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { IssuerKeys, KeysUnavailable } from '../../src/oauth/issuer-keys.js'
import { JWKS_COOLDOWN_MS } from '../../src/oauth/issuer-keys.js'
import { ONE_ANSWER_MS } from '../helpers/bounds.js'

type Mode = 'ok' | 'garbage' | 'error' | 'empty' | 'hang'

let server: Server
let url: string
let mode: Mode = 'ok'
let keys: JWK[] = []
let served = 0
const hanging = new Set<ServerResponse>()

beforeAll(async () => {
  server = createServer((_request, response) => {
    served++
    if (mode === 'hang') { hanging.add(response); return }
    if (mode === 'error') { response.writeHead(500).end(); return }
    response.writeHead(200, { 'content-type': 'application/json' })
    response.end(mode === 'garbage' ? '<html>maintenance</html>' : JSON.stringify({ keys: mode === 'empty' ? [] : keys }))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`
})

afterAll(async () => {
  for (const response of hanging) response.destroy()
  server.closeAllConnections()
  await new Promise((resolve) => server.close(resolve))
})

async function publicKey (kid: string): Promise<JWK> {
  const { publicKey } = await generateKeyPair('RS256', { extractable: true })
  return { ...await exportJWK(publicKey), kid, alg: 'RS256', use: 'sig' }
}

/** A token of `kid`: the one a client sends again and again (the gateway knows a token by its signature), or another of that kid. */
const tokenOf = (kid: string | undefined, which = ''): FlattenedJWSInput => ({ payload: '', signature: `${kid ?? ''}${which}` })
const header = (kid: string | undefined) => kid === undefined ? { alg: 'RS256' } : { alg: 'RS256', kid }

/** A fresh set on its own clock, read through the server above. */
function keySet (timeoutMs = 2000): { set: IssuerKeys, clock: { at: number, now (): number } } {
  const clock = { at: Date.UTC(2031, 0, 1), now: () => clock.at }
  return { set: new IssuerKeys('demo', url, timeoutMs, clock, undefined), clock }
}

/** What a lookup of `kid` (none: a token that names no key) comes to: the key, a refusal, or "try again" with its seconds. */
async function outcome (set: IssuerKeys, kid: string | undefined, which = ''): Promise<string> {
  try {
    await set.getKey(header(kid), tokenOf(kid, which))
    return 'key'
  } catch (error) {
    if (error instanceof KeysUnavailable) return `try again in ${error.retryAfterS}`
    if (error instanceof joseErrors.JWKSNoMatchingKey) return 'refused'
    throw error
  }
}

describe('an issuer\'s key set for machine clients', () => {
  it('keeps the keys already read through answers that are no key set, and says when to try again', async () => {
    keys = [await publicKey('k1')]
    mode = 'ok'
    const { set, clock } = keySet()
    expect(await outcome(set, 'k1')).toBe('key')
    for (const bad of ['garbage', 'error'] as const) {
      mode = bad
      clock.at += JWKS_COOLDOWN_MS
      const before = served
      expect(await outcome(set, 'k2')).toBe(`try again in ${JWKS_COOLDOWN_MS / 1000}`)
      expect(served).toBe(before + 1)
      expect(await outcome(set, 'k1')).toBe('key')
      clock.at += 2000
      expect(await outcome(set, 'k2')).toBe(`try again in ${JWKS_COOLDOWN_MS / 1000 - 2}`)
      expect(served).toBe(before + 1)
    }
  })

  it('an empty key set withdraws every key (RFC 7517: a key set): their tokens are refused, not kept passing, and said once', async () => {
    keys = [await publicKey('k1')]
    mode = 'ok'
    const clock = { at: Date.UTC(2031, 0, 1), now: () => clock.at }
    const warnings: string[] = []
    const log = { warn: (_fields: unknown, message: string) => { warnings.push(message) }, info: () => {} }
    const set = new IssuerKeys('demo', url, 2000, clock, log as unknown as ConstructorParameters<typeof IssuerKeys>[4])
    expect(await outcome(set, 'k1')).toBe('key')
    // The issuer revokes its only key before it has another: k1 is refused once a read has seen it gone.
    mode = 'empty'
    clock.at += JWKS_COOLDOWN_MS
    expect(await outcome(set, 'made-up')).toBe('refused')
    expect(await outcome(set, 'k1')).toBe('refused')
    // A token that names no key, within the cooldown (a tester's finding: "try again", 503).
    expect(await outcome(set, undefined)).toBe('refused')
    clock.at += JWKS_COOLDOWN_MS
    expect(await outcome(set, 'other')).toBe('refused')
    expect(await outcome(set, 'k1')).toBe('refused')
    expect(warnings).toEqual(['the issuer publishes no signing key: every token of it is refused until it publishes one'])
    // It publishes a new key: that one passes, k1 stays refused.
    mode = 'ok'
    keys = [await publicKey('k2')]
    clock.at += JWKS_COOLDOWN_MS
    expect(await outcome(set, 'k2')).toBe('key')
    expect(await outcome(set, 'k1')).toBe('refused')
  })

  it('refuses a token of an unknown kid only after a read begun since that token first came, and at once a key the issuer dropped', async () => {
    keys = [await publicKey('k1')]
    mode = 'ok'
    const { set, clock } = keySet()
    expect(await outcome(set, 'k1')).toBe('key')
    // Met within the cooldown of the read: it may be newer than the set.
    expect(await outcome(set, 'new')).toBe(`try again in ${JWKS_COOLDOWN_MS / 1000}`)
    keys = [await publicKey('new')]
    clock.at += JWKS_COOLDOWN_MS
    expect(await outcome(set, 'new')).toBe('key')
    // k1 left the set: refused within the cooldown, no read needed.
    const before = served
    expect(await outcome(set, 'k1')).toBe('refused')
    expect(await outcome(set, 'made-up')).toBe(`try again in ${JWKS_COOLDOWN_MS / 1000}`)
    clock.at += JWKS_COOLDOWN_MS
    expect(await outcome(set, 'made-up')).toBe('refused')
    expect(await outcome(set, 'made-up')).toBe('refused')
    // Another token of that kid, first come within the cooldown of that read: its key may have been
    // published since (an issuer that signs before it publishes), so try again (an outside tester's finding).
    expect(await outcome(set, 'made-up', 'another')).toBe(`try again in ${JWKS_COOLDOWN_MS / 1000}`)
    expect(served).toBe(before + 1)
  })

  it('a stranger flooding made-up tokens cannot keep a client with a foreign kid at "try again" past one retry', async () => {
    keys = [await publicKey('k1')]
    mode = 'ok'
    const { set, clock } = keySet()
    expect(await outcome(set, 'k1')).toBe('key')
    // The client's token of a kid the issuer does not publish, 1 s after that read: 503 first.
    clock.at += 1000
    expect(await outcome(set, 'foreign')).toBe(`try again in ${JWKS_COOLDOWN_MS / 1000 - 1}`)
    const seen: string[] = []
    for (let cycle = 0; cycle < 3; cycle++) {
      // Within the cooldown the stranger sends 1,000 distinct made-up tokens (a re-reader's finding:
      // they pushed the client's entry out of a list of 1,000), then begins the next read.
      const before = served
      for (let i = 0; i < 1000; i++) await outcome(set, `junk-${cycle}`, `-${i}`)
      clock.at += JWKS_COOLDOWN_MS
      await outcome(set, `junk-${cycle}`, '-last')
      expect(served).toBe(before + 1)
      // A read begun after the client's token first came lacked its kid: its retry is refused.
      seen.push(await outcome(set, 'foreign'))
    }
    expect(seen).toEqual(['refused', 'refused', 'refused'])
  })

  it('ends a read that hangs at the provider\'s timeout, then tries again no sooner than the cooldown', async () => {
    keys = [await publicKey('k1')]
    mode = 'hang'
    const timeoutMs = 300
    const { set, clock } = keySet(timeoutMs)
    const started = Date.now()
    expect(await outcome(set, 'k1')).toBe(`try again in ${JWKS_COOLDOWN_MS / 1000}`)
    expect(Date.now() - started).toBeLessThan(timeoutMs + ONE_ANSWER_MS)
    const before = served
    expect(await outcome(set, 'k1')).toBe(`try again in ${JWKS_COOLDOWN_MS / 1000}`)
    expect(served).toBe(before)
    mode = 'ok'
    clock.at += JWKS_COOLDOWN_MS
    expect(await outcome(set, 'k1')).toBe('key')
  })

  it('shares one read among concurrent callers, for the first read and for an unknown kid', async () => {
    keys = [await publicKey('k1')]
    mode = 'ok'
    const { set, clock } = keySet()
    const before = served
    expect(await Promise.all(Array.from({ length: 20 }, async () => await outcome(set, 'k1')))).toEqual(Array.from({ length: 20 }, () => 'key'))
    expect(served).toBe(before + 1)
    keys = [...keys, await publicKey('k2')]
    clock.at += JWKS_COOLDOWN_MS
    expect(await Promise.all(Array.from({ length: 20 }, async () => await outcome(set, 'k2')))).toEqual(Array.from({ length: 20 }, () => 'key'))
    expect(served).toBe(before + 2)
  })
})
