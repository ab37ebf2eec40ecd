// bearer.claimsFrom: userinfo, at the one place that asks (src/oauth/person-claims.ts), against a real
// HTTP userinfo endpoint on a loopback port: one question per token, kept no longer than the token's
// verification holds (an injected clock) and in a bounded cache; an answer about another subject,
// a refusal, an outage and a provider without the endpoint each have their own outcome.
import { createServer, type Server } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Clock } from '../../src/ops/clock.js'
import { PersonClaims, type TokenFacts } from '../../src/oauth/person-claims.js'
import type { Providers, ResolvedProvider } from '../../src/oauth/providers.js'
import { close, listen } from '../helpers/net.js'

let server: Server
let url: string
const asked: string[] = []

beforeAll(async () => {
  server = createServer((req, res) => {
    const token = String(req.headers.authorization).slice('Bearer '.length)
    asked.push(token)
    if (token === 'revoked') { res.statusCode = 401; res.end(); return }
    if (token === 'broken') { res.statusCode = 500; res.end(); return }
    res.setHeader('content-type', 'application/json')
    res.end(JSON.stringify({ sub: token === 'other' ? 'alice' : token, email: `${token}@example.org` }))
  })
  url = await listen(server)
})

afterAll(async () => { await close(server) })

/** Providers that resolve `demo` with its userinfo endpoint (or none). */
function providers (userinfoUrl: string | undefined): Providers {
  const provider = { name: 'demo', timeoutMs: 2000, userinfoUrl, introspectionUrl: undefined } as unknown as ResolvedProvider
  return { get: async () => provider } as unknown as Providers
}

/** A token verified until `kept` (here its `until` too: the tolerance is access-tokens.ts's to add). */
const facts = (token: string, kept: number): TokenFacts => ({ hash: `h-${token}`, issuer: 'demo', claims: { sub: token === 'other' ? 'eve' : token }, until: kept, kept, introspected: false })

describe('person claims from userinfo', () => {
  it('asks once per token, as long as the token passes unchecked', async () => {
    let now = 0
    const clock: Clock = { now: () => now }
    const person = new PersonClaims(providers(`${url}/userinfo`), clock)
    asked.length = 0
    expect(await person.claims('bob', facts('bob', 1000), 'userinfo')).toEqual({ ok: true, claims: { sub: 'bob', email: 'bob@example.org' }, until: 1000 })
    now = 999
    expect(await person.claims('bob', facts('bob', 1000), 'userinfo')).toMatchObject({ ok: true })
    expect(asked).toEqual(['bob'])
    now = 1000
    expect(await person.claims('bob', facts('bob', 2000), 'userinfo')).toMatchObject({ ok: true })
    expect(asked).toEqual(['bob', 'bob'])
  })

  it('keeps at most its capacity of answers', async () => {
    const person = new PersonClaims(providers(`${url}/userinfo`), { now: () => 0 }, 2)
    asked.length = 0
    for (const token of ['a', 'b', 'c', 'a']) await person.claims(token, facts(token, 1000), 'userinfo')
    expect(asked).toEqual(['a', 'b', 'c', 'a'])
  })

  it('refuses an answer about another subject, and a token the endpoint does not accept; an outage is not a refusal', async () => {
    const person = new PersonClaims(providers(`${url}/userinfo`), { now: () => 0 })
    expect(await person.claims('other', facts('other', 1000), 'userinfo')).toMatchObject({ ok: false, problem: 'wrong_subject' })
    expect(await person.claims('revoked', facts('revoked', 1000), 'userinfo')).toMatchObject({ ok: false, problem: 'inactive' })
    await expect(person.claims('broken', facts('broken', 1000), 'userinfo')).rejects.toMatchObject({ code: 'provider_unavailable' })
  })

  it('names the key when the provider has no userinfo endpoint', async () => {
    const person = new PersonClaims(providers(undefined), { now: () => 0 })
    await expect(person.claims('bob', facts('bob', 1000), 'userinfo')).rejects.toThrow('Provider "demo" has no userinfo endpoint, which bearer.claimsFrom: userinfo reads.')
  })
})
