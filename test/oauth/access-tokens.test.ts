// The access-token verifier on its own (oauth/access-tokens.ts), against real authorization
// servers: what it caches (by hash, for the token's lifetime, within its bound), how it shares one
// introspection among concurrent requests without mixing issuers, and how an introspection
// endpoint that is down or hangs ends (`provider_unavailable`, within the provider's timeout).
import { createHash } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import { decodeJwt } from 'jose'
import { pino } from 'pino'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { parseConfig } from '../../src/config/config.js'
import type { GatewayConfig } from '../../src/config/types.js'
import { GatewayError } from '../../src/errors.js'
import { AccessTokens, CLOCK_TOLERANCE_S, type TokenCheck } from '../../src/oauth/access-tokens.js'
import { Providers, type ResolvedProvider } from '../../src/oauth/providers.js'
import { ONE_ANSWER_MS } from '../helpers/bounds.js'
import { oidcClient, TEST_SECRET } from '../helpers/gateway.js'
import { clientCredentialsToken } from '../helpers/machine.js'
import { close, listen, refusedUrl } from '../helpers/net.js'
import { startOidcProvider, type TestProvider } from '../helpers/oidc.js'

const CI = { id: 'ci-job', secret: 'ci-secret' }
const RESOURCES = { 'api://orders': { scope: 'orders.read' }, 'api://ledger': { scope: 'ledger.read', format: 'opaque' as const } }
const clock = { offset: 0, now: () => Date.now() + clock.offset }

let op: TestProvider
let other: TestProvider
let config: GatewayConfig
let providers: Providers

beforeAll(async () => {
  const start = async (client: string) => await startOidcProvider([{ client_id: client, client_secret: 's', redirect_uris: ['http://127.0.0.1:9/cb'] }],
    { machineClients: [{ client_id: CI.id, client_secret: CI.secret }], resources: RESOURCES })
  op = await start('c')
  other = await start('c2')
  config = parseConfig(stringify({
    session: { secret: TEST_SECRET },
    providers: { demo: { ...oidcClient(op.issuer, 'c', 's'), timeout: '300ms' }, other: oidcClient(other.issuer, 'c2', 's') },
    routes: [{ path: '/', upstream: 'http://127.0.0.1:9', provider: 'demo' }],
  }), {}, 'test.yaml')
  providers = new Providers(config.providers, pino({ level: 'silent' }))
})

afterEach(() => { clock.offset = 0 })
afterAll(async () => { await Promise.all([op?.close(), other?.close()]) })

const jwt = async (): Promise<string> => await clientCredentialsToken(op, CI, 'api://orders', 'orders.read')
const opaque = async (): Promise<string> => await clientCredentialsToken(op, CI, 'api://ledger', 'ledger.read')
const sha256 = (token: string): string => createHash('sha256').update(token).digest('base64url')

/** The keys of the verifier's cache: read here to show what they are (they are no part of its API). */
const cacheOf = (tokens: AccessTokens): Map<string, unknown> => Reflect.get(Reflect.get(tokens, 'cache') as object, 'entries') as Map<string, unknown>

describe('the verification cache', () => {
  it('answers a token verified before at once (no promise) until its exp plus the clock tolerance, then verifies it again', async () => {
    // A clock that moves only when told: the bound is one millisecond either side.
    const frozen = { time: Date.now(), now: () => frozen.time }
    const tokens = new AccessTokens(providers, frozen)
    const token = await jwt()
    const first = await tokens.check(token, ['demo'], [])
    expect(first).toMatchObject({ ok: true, token: { issuer: 'demo', hash: sha256(token) } })
    const again = tokens.check(token, ['demo'], [])
    expect(again).not.toBeInstanceOf(Promise)
    expect(again).toEqual(first)
    // Past its exp, it still verifies for CLOCK_TOLERANCE_S: it is not verified again meanwhile.
    frozen.time = (decodeJwt(token).exp! + CLOCK_TOLERANCE_S) * 1000 - 1
    expect(tokens.check(token, ['demo'], [])).toEqual(first)
    frozen.time += 1
    const afterTolerance = tokens.check(token, ['demo'], [])
    expect(afterTolerance).toBeInstanceOf(Promise)
    expect(await afterTolerance).toMatchObject({ ok: false, problem: 'expired' })
  })

  it('keys entries by the token\'s SHA-256, never the token', async () => {
    const tokens = new AccessTokens(providers, clock)
    const issued = [await jwt(), await opaque()]
    for (const token of issued) expect(await tokens.check(token, ['demo'], ['demo'])).toMatchObject({ ok: true })
    const keys = [...cacheOf(tokens).keys()]
    expect(keys.sort()).toEqual(issued.map(sha256).sort())
    for (const token of issued) expect(keys).not.toContain(token)
  })

  it('holds at most maxEntries tokens, however many distinct ones arrive', async () => {
    const tokens = new AccessTokens(providers, clock, 3)
    const issued = await Promise.all(Array.from({ length: 10 }, async () => await jwt()))
    for (const token of issued) expect(await tokens.check(token, ['demo'], [])).toMatchObject({ ok: true })
    expect(tokens.size).toBe(3)
    // The most recent ones are the ones kept.
    expect(tokens.check(issued[9]!, ['demo'], [])).not.toBeInstanceOf(Promise)
    expect(tokens.check(issued[0]!, ['demo'], [])).toBeInstanceOf(Promise)
  })
})

describe('hostile JWTs are refused, never taken for a provider outage', () => {
  const b64 = (value: unknown): string => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url')
  let kid: string
  beforeAll(async () => {
    kid = ((await (await fetch(`${op.issuer}/jwks`)).json()) as { keys: Array<{ kid: string }> }).keys[0]!.kid
  })
  const payload = (extra: Record<string, unknown> = {}): Record<string, unknown> =>
    ({ iss: op.issuer, aud: 'api://orders', sub: 'x', scope: 'orders.read', exp: Math.floor(Date.now() / 1000) + 300, ...extra })
  // Each a header and a payload; the signature is made up (the point is what happens before it matters).
  const rows: Array<[string, () => [unknown, unknown]]> = [
    ['an algorithm the key is not for', () => [{ alg: 'ES256', kid }, payload()]],
    ['EdDSA with the RSA key\'s kid', () => [{ alg: 'EdDSA', kid }, payload()]],
    ['a kid that is a number', () => [{ alg: 'RS256', kid: 123 }, payload()]],
    ['a kid that is an object', () => [{ alg: 'RS256', kid: { $ne: null } }, payload()]],
    ['no kid', () => [{ alg: 'RS256' }, payload()]],
    ['an unknown critical extension', () => [{ alg: 'RS256', kid, crit: ['exp-x'], 'exp-x': 1 }, payload()]],
    ['an unencoded payload (b64: false)', () => [{ alg: 'RS256', kid, crit: ['b64'], b64: false }, payload()]],
    ['an embedded key (jwk)', () => [{ alg: 'RS256', kid, jwk: { kty: 'oct', k: 'AAAA' } }, payload()]],
    ['a header that is not JSON', () => ['{"alg":', payload()]],
    ['a header that is an array', () => [['RS256'], payload()]],
    ['a payload that is not JSON', () => [{ alg: 'RS256', kid }, 'not json']],
    ['a payload that is an array', () => [{ alg: 'RS256', kid }, [1, 2]]],
    ['an iss that is a number', () => [{ alg: 'RS256', kid }, payload({ iss: 1 })]],
    ['an exp far beyond any date', () => [{ alg: 'RS256', kid }, payload({ exp: 1e300 })]],
    ['an exp that is negative', () => [{ alg: 'RS256', kid }, payload({ exp: -1 })]],
    ['an nbf that is a string', () => [{ alg: 'RS256', kid }, payload({ nbf: 'soon' })]],
  ]
  it.each(rows)('%s', async (_name, make) => {
    const tokens = new AccessTokens(providers, clock)
    const [header, body] = make()
    const token = `${b64(header)}.${b64(body)}.${b64('not-a-signature')}`
    await expect(Promise.resolve(tokens.check(token, ['demo'], []))).resolves.toMatchObject({ ok: false })
  })
})

describe('introspection', () => {
  it('asks once for one token that many requests bring at the same moment', async () => {
    const tokens = new AccessTokens(providers, clock)
    const before = op.requests('/token/introspection')
    const answers = await Promise.all(Array.from({ length: 20 }, async () => await tokens.check('made-up-opaque-token-0123456789', ['demo'], ['demo'])))
    expect(answers.every((answer) => !answer.ok && answer.problem === 'inactive')).toBe(true)
    expect(op.requests('/token/introspection')).toBe(before + 1)
  })

  it('does not hand a route one issuer\'s answer when the route accepts only another issuer, even at the same moment', async () => {
    const tokens = new AccessTokens(providers, clock)
    const token = await opaque()
    const [fromDemo, fromOther] = await Promise.all([tokens.check(token, ['demo'], ['demo']), tokens.check(token, ['other'], ['other'])])
    expect(fromDemo).toMatchObject({ ok: true, token: { issuer: 'demo' } })
    expect(fromOther).toMatchObject({ ok: false, problem: 'inactive' })
    // And once the answer is cached, the other route is not handed it either.
    expect(await tokens.check(token, ['other'], ['other'])).toMatchObject({ ok: false, problem: 'inactive' })
  })

  it('does not let a route that does not introspect accept an opaque token another route had introspected', async () => {
    const tokens = new AccessTokens(providers, clock)
    const token = await opaque()
    expect(await tokens.check(token, ['demo'], ['demo'])).toMatchObject({ ok: true })
    expect(await tokens.check(token, ['demo'], [])).toMatchObject({ ok: false, problem: 'not_a_jwt' })
  })

  describe('an endpoint that fails', () => {
    let hanging: Server
    let hangingUrl: string
    beforeAll(async () => {
      // Takes the request and never answers.
      hanging = createServer(() => {})
      hangingUrl = await listen(hanging)
    })
    afterAll(async () => { await close(hanging) })

    /** The verifier with provider `demo` as discovered, but its introspection endpoint at `url`. */
    async function withEndpoint (url: string): Promise<{ tokens: AccessTokens, provider: ResolvedProvider }> {
      const provider: ResolvedProvider = { ...await providers.get('demo'), introspectionUrl: url }
      const lookup = { get: async () => provider } as unknown as Providers
      return { tokens: new AccessTokens(lookup, clock), provider }
    }

    /** What the check ends with: its answer, or the error it rejects with. */
    async function settle (pending: TokenCheck | Promise<TokenCheck>): Promise<TokenCheck | unknown> {
      try {
        return await pending
      } catch (error) {
        return error
      }
    }

    it('rejects with provider_unavailable when the endpoint refuses the connection', async () => {
      const { tokens } = await withEndpoint(`${await refusedUrl()}/token/introspection`)
      const outcome = await settle(tokens.check(await opaque(), ['demo'], ['demo']))
      expect(outcome).toBeInstanceOf(GatewayError)
      expect(outcome).toMatchObject({ code: 'provider_unavailable', statusCode: 502 })
    })

    it('rejects with provider_unavailable once the provider\'s timeout has passed when the endpoint never answers', async () => {
      const { tokens, provider } = await withEndpoint(`${hangingUrl}/token/introspection`)
      expect(provider.timeoutMs).toBe(300)
      const token = await opaque()
      const started = performance.now()
      const outcome = await settle(tokens.check(token, ['demo'], ['demo']))
      expect(outcome).toMatchObject({ code: 'provider_unavailable', statusCode: 502 })
      expect(performance.now() - started).toBeLessThan(provider.timeoutMs + ONE_ANSWER_MS)
      // The failure is not remembered as an answer: the next request asks again.
      expect(tokens.size).toBe(0)
    })
  })
})
