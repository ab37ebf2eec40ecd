// The one request pipeline (src/access/authorize.ts's Access) driven without a server: real
// Sessions over the in-process store on a clock the test moves, a real TokenRefresher with tokens
// that are fresh (it never asks a provider: it is given none), and a stub signer of assertions. A
// table of requests -> verdicts; the cached fast path answers without a promise; a store or signer
// that fails is `unavailable` and never a rejected promise; and a fast-check property that the
// pipeline allows exactly those identities that a host's rule lists admit (src/access/rules.ts).
// On a route of several providers, the cached path and the store agree on the provider, in every case.
import fc from 'fast-check'
import { pino } from 'pino'
import { afterEach, describe, expect, it } from 'vitest'
import { Access, type AssertionSigner, type Guard, type Verdict } from '../../src/access/authorize.js'
import { compileGate, type GateRoute } from '../../src/access/gate.js'
import { compileRules } from '../../src/access/rules.js'
import type { Rule, RuleLists, SessionConfig } from '../../src/config/types.js'
import { lists, NO_RULES, rule } from '../helpers/rules.js'
import { Providers } from '../../src/oauth/providers.js'
import { TokenRefresher } from '../../src/oauth/refresh.js'
import { Metrics } from '../../src/ops/metrics.js'
import { emptyRecord, withSignIn, type Identity, type TokenSet } from '../../src/session/record.js'
import { keyIdOf, Sealer } from '../../src/session/seal.js'
import { Sessions } from '../../src/session/session.js'
import { MemoryStore } from '../../src/store/memory.js'

const SECRET = 'a-session-secret-of-at-least-32-characters'
/** A cookie of the right shape under the session secret's key id that no session has: it takes a store read. */
const UNKNOWN_COOKIE = `${'A'.repeat(43)}.${keyIdOf(SECRET)}`
const CACHE_TTL_MS = 1000
const CONFIG: SessionConfig = { cookieName: 'gw_session', secret: SECRET, ttlMs: 3_600_000, cookieSecure: true, cacheTtlMs: CACHE_TTL_MS, maxAgeMs: 7 * 86_400_000, previousSecrets: [] }
const START = Date.UTC(2031, 0, 1)
/** Expires an hour after START: fresh unless the test moves the clock that far. */
const FRESH: TokenSet = { access_token: 'at-fresh', expires_at: START / 1000 + 3600 }
/** Expired at START, with nothing to refresh it with: the person must sign in again. */
const EXPIRED: TokenSet = { access_token: 'at-expired', expires_at: START / 1000 - 60 }

// Each with its subject, as this build signs people in (an identity read from a record without one is 1.0's form: untoldGroups).
const alice: Identity = { sub: 'alice', subject: 'alice-subject', email: 'alice@example.org', groups: ['staff'] }
const bob: Identity = { sub: 'bob', subject: 'bob-subject', email: 'bob@elsewhere.net', groups: ['staff', 'contractors'] }

const login = (next: string) => `https://gw.example/oauth/login/demo/?next=${encodeURIComponent(next)}`
const gateOf = (overrides: Partial<GateRoute> = {}) => compileGate({ path: '/app', auth: 'required', provider: 'demo', rules: NO_RULES, public: [], ...overrides }, login)

/** A store whose reads of sessions fail, as a store that cannot be reached does. */
class BrokenStore extends MemoryStore {
  override async getAndTouchBytes (): Promise<Buffer | null> {
    throw new Error('the store cannot be reached')
  }
}

/** A signer that counts its calls and signs `assertion-of-<sub>`, ready or not as the test says. */
function stubSigner (options: { ready: boolean, fails?: boolean }): AssertionSigner & { signed: number } {
  const signer = {
    signed: 0,
    ready: (id: string) => options.ready ? `assertion-of-${id}` : undefined,
    assertion: async (id: string) => {
      signer.signed++
      if (options.fails) throw new Error('the key ring cannot be read')
      return `assertion-of-${id}`
    },
  }
  return signer
}

const stores: MemoryStore[] = []
afterEach(async () => { for (const store of stores.splice(0)) await store.close() })

/** One instance: a store, Sessions and the pipeline on one clock; `broken` reads fail. */
async function setUp (options: { broken?: boolean } = {}) {
  const clock = { ms: START, now (): number { return this.ms } }
  const store = options.broken ? new BrokenStore({ clock }) : new MemoryStore({ clock })
  stores.push(store)
  const sessions = new Sessions(store, new Sealer(SECRET), CONFIG, clock)
  await sessions.listen()
  const log = pino({ level: 'silent' })
  // No providers: a refresh that asked one would fail, and the verdict would say so.
  const refresher = new TokenRefresher(store, sessions, new Providers({}, log), new Metrics(), log, clock)
  const access = new Access(sessions, refresher)
  /** A session signed in at `demo`, as the browser's Cookie header, not in this instance's cache. */
  const signIn = async (identity: Identity | undefined, tokens: TokenSet = FRESH): Promise<string> => {
    const started = await new Sessions(store, new Sealer(SECRET), CONFIG, clock).start(undefined, withSignIn(emptyRecord(clock.ms), 'demo', { tokens, ...(identity ? { identity } : {}) }))
    return `theme=dark; gw_session=${started.cookie}`
  }
  return { clock, store, sessions, access, signIn }
}

const browser = (cookie?: string, target = '/app/page') => ({ method: 'GET', target, address: '127.0.0.1', html: true, cookie })
const api = (cookie?: string, target = '/app/api') => ({ method: 'GET', target, address: '127.0.0.1', html: false, cookie })

describe('Access.authorize', () => {
  it('no cookie, a browser: sign_in with the login URL back to the target', async () => {
    const { access } = await setUp()
    expect(await access.authorize({ gate: gateOf() }, browser(undefined, '/app/page?x=1'))).toEqual({ kind: 'sign_in', loginUrl: login('/app/page?x=1') })
  })

  it('no cookie, an API client: unauthenticated with the login URL and the realm', async () => {
    const { access } = await setUp()
    expect(await access.authorize({ gate: gateOf() }, api())).toEqual({ kind: 'unauthenticated', loginUrl: login('/app/api'), realm: 'demo' })
  })

  it('a cookie the store does not know is no session', async () => {
    const { access } = await setUp()
    expect(await access.authorize({ gate: gateOf() }, api(`gw_session=${'A'.repeat(43)}`))).toMatchObject({ kind: 'unauthenticated' })
    expect(await access.authorize({ gate: gateOf() }, api(`gw_session=${UNKNOWN_COOKIE}`))).toMatchObject({ kind: 'unauthenticated' })
  })

  it('a fresh token: allow with the token and identity; the second request is answered from the cache, with no promise', async () => {
    const { access, signIn } = await setUp()
    const cookie = await signIn(alice)
    const first = access.authorize({ gate: gateOf() }, browser(cookie))
    expect(first).toBeInstanceOf(Promise)
    expect(await first).toEqual({ kind: 'allow', accessToken: FRESH.access_token, identity: alice, assertion: undefined })
    const second = access.authorize({ gate: gateOf() }, browser(cookie))
    expect(second instanceof Promise).toBe(false)
    expect(second).toEqual({ kind: 'allow', accessToken: FRESH.access_token, identity: alice, assertion: undefined })
  })

  it('once the cache window has passed, the store is read again (a promise)', async () => {
    const { access, signIn, clock } = await setUp()
    const cookie = await signIn(alice)
    await access.authorize({ gate: gateOf() }, api(cookie))
    clock.ms += CACHE_TTL_MS + 1
    const again = access.authorize({ gate: gateOf() }, api(cookie))
    expect(again).toBeInstanceOf(Promise)
    expect(await again).toMatchObject({ kind: 'allow', identity: alice })
  })

  it.each([
    ['a browser is sent to sign in', browser, 'sign_in'],
    ['an API client is unauthenticated', api, 'unauthenticated'],
  ] as const)('an expired token with no refresh token: %s', async (_name, client, kind) => {
    const { access, signIn } = await setUp()
    const verdict = await access.authorize({ gate: gateOf() }, client(await signIn(alice, EXPIRED)))
    expect(verdict).toMatchObject({ kind })
  })

  it('a public rule\'s path is public at once, even with a store that cannot be read', async () => {
    const { access } = await setUp({ broken: true })
    const gate = gateOf({ public: [{ method: 'GET', path: '/app/static/*' }] })
    const verdict = access.authorize({ gate }, browser(`gw_session=${'A'.repeat(43)}`, '/app/static/site.css'))
    expect(verdict instanceof Promise).toBe(false)
    expect(verdict).toEqual({ kind: 'public' })
  })

  it('a store that throws on read: unavailable (the promise resolves, it never rejects)', async () => {
    const { access } = await setUp({ broken: true })
    const verdict = access.authorize({ gate: gateOf() }, browser(`gw_session=${UNKNOWN_COOKIE}`))
    expect(verdict).toBeInstanceOf(Promise)
    const settled = await (verdict as Promise<Verdict>).then((value) => ({ value }), (error: unknown) => ({ rejected: error }))
    expect(settled).toEqual({ value: { kind: 'unavailable', error: expect.objectContaining({ message: 'the store cannot be reached' }) } })
  })

  it('`allow` rules that refuse the identity: forbidden, with the identity and a login URL', async () => {
    const { access, signIn } = await setUp()
    const gate = gateOf({ rules: lists([{ domains: ['example.org'] }]) })
    expect(await access.authorize({ gate }, api(await signIn(bob)))).toEqual({ kind: 'forbidden', identity: bob, loginUrl: login('/app/api'), rule: undefined, refusedBy: 'no_allow_rule', address: '127.0.0.1' })
    expect(await access.authorize({ gate }, api(await signIn(alice)))).toMatchObject({ kind: 'allow', identity: alice, rule: 'allow[0]' })
  })

  it('host rule lists: a `deny` that holds is forbidden even though `allow` holds', async () => {
    const { access, signIn } = await setUp()
    const gate = gateOf({ rules: lists([{ groups: ['staff'] }], [{ groups: ['contractors'] }]) })
    expect(await access.authorize({ gate }, api(await signIn(bob)))).toMatchObject({ kind: 'forbidden', identity: bob, rule: 'deny[0]' })
    expect(await access.authorize({ gate }, api(await signIn(alice)))).toMatchObject({ kind: 'allow', identity: alice })
  })

  it('a signer with an assertion ready: the verdict carries it, with no promise', async () => {
    const { access, signIn } = await setUp()
    const cookie = await signIn(alice)
    const signer = stubSigner({ ready: true })
    const first = await access.authorize({ gate: gateOf(), signer }, api(cookie))
    const second = access.authorize({ gate: gateOf(), signer }, api(cookie))
    expect(second instanceof Promise).toBe(false)
    expect(second).toEqual(first)
    expect(second).toMatchObject({ kind: 'allow', assertion: expect.stringMatching(/^assertion-of-/) })
    expect(signer.signed).toBe(0)
  })

  it('a signer with no assertion ready: a promise of the verdict with the one it signs', async () => {
    const { access, signIn } = await setUp()
    const cookie = await signIn(alice)
    const signer = stubSigner({ ready: false })
    await access.authorize({ gate: gateOf() }, api(cookie))
    const verdict = access.authorize({ gate: gateOf(), signer }, api(cookie))
    expect(verdict).toBeInstanceOf(Promise)
    expect(await verdict).toMatchObject({ kind: 'allow', identity: alice, assertion: expect.stringMatching(/^assertion-of-/) })
    expect(signer.signed).toBe(1)
  })

  it('no identity to vouch for: no assertion is signed', async () => {
    const { access, signIn } = await setUp()
    const signer = stubSigner({ ready: false })
    expect(await access.authorize({ gate: gateOf(), signer }, api(await signIn(undefined)))).toEqual({ kind: 'allow', accessToken: FRESH.access_token, identity: undefined, assertion: undefined })
    expect(signer.signed).toBe(0)
  })

  it('a signer that rejects: unavailable (the promise resolves, it never rejects)', async () => {
    const { access, signIn } = await setUp()
    const signer = stubSigner({ ready: false, fails: true })
    const verdict = access.authorize({ gate: gateOf(), signer }, api(await signIn(alice)))
    const settled = await Promise.resolve(verdict).then((value) => ({ value }), (error: unknown) => ({ rejected: error }))
    expect(settled).toEqual({ value: { kind: 'unavailable', error: expect.objectContaining({ message: 'the key ring cannot be read' }) } })
  })
})

const emails = ['alice@example.org', 'bob@example.com', 'carol@elsewhere.net']
const domains = ['example.org', 'example.com', 'elsewhere.net']
const groups = ['staff', 'admins', 'contractors']

const identityArb: fc.Arbitrary<Identity | undefined> = fc.option(fc.record({
  sub: fc.constantFrom('alice', 'bob', 'carol'),
  email: fc.option(fc.constantFrom(...emails), { nil: undefined }),
  unverified: fc.boolean(),
  groups: fc.subarray(groups),
}).map(({ sub, email, unverified, groups }): Identity => ({
  sub, subject: `${sub}-subject`, groups, ...(email ? { email } : {}), ...(email && unverified ? { emailVerified: false as const } : {}),
})), { nil: undefined })

const ruleArb: fc.Arbitrary<Rule> = fc.record({ emails: fc.subarray(emails), domains: fc.subarray(domains), groups: fc.subarray(groups) })
  .map((conditions) => rule(conditions))
const hostRulesArb: fc.Arbitrary<RuleLists> = fc.record({
  allow: fc.option(fc.array(ruleArb, { maxLength: 3 }), { nil: undefined }),
  deny: fc.array(ruleArb, { maxLength: 2 }),
})

describe('the pipeline and the rules agree (fast-check)', () => {
  it('for any identity and host rules, the verdict is allow exactly when the compiled rules admit, else forbidden', async () => {
    const { access, signIn, clock } = await setUp()
    await fc.assert(fc.asyncProperty(identityArb, hostRulesArb, fc.boolean(), async (identity, rules, fromStore) => {
      const cookie = await signIn(identity)
      const guard: Guard = { gate: gateOf({ rules }) }
      // Half the runs read the store (a promise), half are answered from the cache.
      if (!fromStore) await access.authorize(guard, api(cookie))
      const verdict = await access.authorize(guard, api(cookie))
      const admitted = compileRules(rules)(identity, 'GET', '/app/api', undefined).admit
      expect(verdict.kind).toBe(admitted ? 'allow' : 'forbidden')
      clock.ms += 1
    }), { numRuns: 200, seed: 23 })
  })
})

describe('a route of several providers', () => {
  /** Expired, with a refresh token: read() refreshes it (here the refresh fails: no provider is configured). */
  const STALE: TokenSet = { access_token: 'at-stale', refresh_token: 'rt', expires_at: START / 1000 - 60 }
  const TOKENS = [undefined, FRESH, EXPIRED, STALE]
  /** Every pair of the two providers' tokens, in both orders of the route's providers. */
  const CASES = TOKENS.flatMap((demo) => TOKENS.flatMap((partner) => [false, true].map((partnerFirst) => [demo, partner, partnerFirst] as const)))

  /** What read() gives: the first provider (in order) whose token is fresh, unless an earlier one must be refreshed first. */
  function expected (order: string[], tokens: Record<string, TokenSet | undefined>): { kind: string, provider?: string } {
    for (const provider of order) {
      const token = tokens[provider]
      if (token === undefined || token === EXPIRED) continue
      return token === FRESH ? { kind: 'allow', provider } : { kind: 'unavailable' }
    }
    return { kind: 'unauthenticated' }
  }

  it.each(CASES)('judges a session as the same provider on the cached path and from the store, with that provider\'s token (demo %o, partner %o, partner first %s)', async (demo, partner, partnerFirst) => {
    const { access, store, clock } = await setUp()
    let record = emptyRecord(clock.ms)
    if (demo) record = withSignIn(record, 'demo', { tokens: { ...demo, access_token: `demo-${demo.access_token}` }, identity: alice })
    if (partner) record = withSignIn(record, 'partner', { tokens: { ...partner, access_token: `partner-${partner.access_token}` }, identity: bob })
    const started = await new Sessions(store, new Sealer(SECRET), CONFIG, clock).start(undefined, record)
    const order = partnerFirst ? ['partner', 'demo'] : ['demo', 'partner']
    const guard: Guard = { gate: compileGate({ path: '/app', auth: 'required', provider: order[0], providers: order, rules: NO_RULES, public: [] }, login) }
    const want = expected(order, { demo, partner })
    const request = api(`gw_session=${started.cookie}`)
    const fromStore = await access.authorize(guard, request)
    const cached = access.authorize(guard, request)
    for (const verdict of [fromStore, await cached]) {
      expect(verdict.kind).toBe(want.kind)
      if (verdict.kind === 'allow') {
        expect(verdict.provider).toBe(want.provider)
        expect(verdict.accessToken.startsWith(`${want.provider!}-`)).toBe(true)
        // The route's first provider's people keep their name; the other's are `<provider>:<user>`.
        const identity = want.provider === 'demo' ? alice : bob
        expect(verdict.identity).toEqual(want.provider === order[0] ? identity : { ...identity, sub: `${want.provider!}:${identity.sub}`, subject: `${want.provider!}:${identity.subject!}` })
      }
    }
    // A fresh token of the provider read() picks is answered at once, without the store.
    if (want.kind === 'allow') expect(cached).not.toBeInstanceOf(Promise)
  })
})
