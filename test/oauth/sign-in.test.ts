// The sign-in callback's protocol steps (src/oauth/sign-in.ts's completeSignIn) called straight,
// with no gateway server: a flow begun with `Flows` over the in-process store, as the login route
// begins it (src/routes/sign-in-endpoints.ts), then the callback's query and the flow cookie handed in. The
// provider is the token endpoint stub as a plain OAuth 2.0 provider with a userinfo endpoint. A good
// callback gives tokens, identity and `next`; a missing or foreign state is `invalid_state`; the
// provider's `error=access_denied` is `access_denied`; an unverified address as the user name is
// `forbidden`. Every refusal carries a loginUrl that starts the sign-in over toward the flow's `next`.
import { pino } from 'pino'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { parseConfig } from '../../src/config/config.js'
import type { GatewayConfig } from '../../src/config/types.js'
import { GatewayError, MESSAGES } from '../../src/errors.js'
import { Providers } from '../../src/oauth/providers.js'
import { completeSignIn, type SignInDeps } from '../../src/oauth/sign-in.js'
import { Flows, formatFlowCookie, parseFlowCookie } from '../../src/oauth/state.js'
import { loginUrl } from '../../src/oauth/urls.js'
import { Sealer } from '../../src/session/seal.js'
import { MemoryStore } from '../../src/store/memory.js'
import { TEST_SECRET } from '../helpers/gateway.js'
import { startTokenStub, type TokenStub } from '../helpers/token-stub.js'

/** A fixed instant, so `expires_at` can only come from the injected clock. */
const START = Date.UTC(2031, 0, 1)
const clock = { at: START, now: () => clock.at }
const NEXT = '/app/reports?month=3'

let stub: TokenStub
let config: GatewayConfig
let deps: SignInDeps
let store: MemoryStore

beforeAll(async () => {
  stub = await startTokenStub()
  const provider = { clientId: 'stub-client', clientSecret: 'stub-secret', authorizeUrl: `${stub.url}/authorize`, tokenUrl: `${stub.url}/token`, userinfoUrl: `${stub.url}/userinfo`, scope: 'read' }
  config = parseConfig(stringify({
    server: { baseUrl: 'https://gw.example' },
    session: { secret: TEST_SECRET },
    providers: {
      stub: provider,
      // The same provider, but its user name is the e-mail address.
      mail: { ...provider, claims: { user: 'email' } },
    },
    routes: [{ path: '/app', upstream: 'http://127.0.0.1:1', provider: 'stub' }],
  }), {}, 'test.yaml')
  store = new MemoryStore({ clock })
  deps = {
    config,
    providers: new Providers(config.providers, pino({ level: 'silent' })),
    flows: new Flows(store, new Sealer(TEST_SECRET), config.state.ttlMs, clock),
    clock,
  }
})

afterAll(async () => {
  await store?.close()
  await stub?.close()
})

beforeEach(() => {
  clock.at = START
  stub.mode = 'ok'
  stub.requests.length = 0
  stub.extra = { refresh_token: 'rt-1' }
  stub.userinfo = { sub: 'alice', email: 'Alice@Example.org', name: 'Alice', groups: ['staff'] }
})

/** A flow begun as the login route begins one: its state, and the flow cookie's value as the browser keeps it. */
async function beginFlow (provider = 'stub', next = NEXT, cookie?: string): Promise<{ state: string, cookie: string }> {
  const { pkce, openid } = config.providers[provider]!
  const flow = await deps.flows.begin(parseFlowCookie(cookie), { provider, next, pkce, openid })
  return { state: flow.state, cookie: formatFlowCookie(flow.cookie) }
}

/** The GatewayError completeSignIn throws (the test fails if it resolves or throws anything else). */
async function refusal (provider: string, query: string, cookie: string | undefined): Promise<GatewayError> {
  const error: unknown = await completeSignIn(deps, provider, query, cookie).then(() => undefined, (thrown: unknown) => thrown)
  expect(error).toBeInstanceOf(GatewayError)
  return error as GatewayError
}

const query = (parameters: Record<string, string>) => new URLSearchParams(parameters).toString()

describe('completeSignIn', () => {
  it('a good callback gives the tokens (stamped by the injected clock), the identity and next', async () => {
    const flow = await beginFlow()
    const completed = await completeSignIn(deps, 'stub', query({ code: 'c-1', state: flow.state }), flow.cookie)
    expect(completed.next).toBe(NEXT)
    expect(completed.signIn.tokens).toEqual({ access_token: expect.stringMatching(/^stub-token-/), refresh_token: 'rt-1', expires_at: START / 1000 + 3600 })
    expect(completed.signIn.identity).toEqual({ sub: 'alice', subject: 'alice', iss: stub.url, email: 'alice@example.org', name: 'Alice', groups: ['staff'] })
    // The code went to the token endpoint with the flow's PKCE verifier.
    const exchange = new URLSearchParams(stub.requests.at(-1)!.body)
    expect(exchange.get('code')).toBe('c-1')
    expect(exchange.get('code_verifier')).toMatch(/^[A-Za-z0-9_-]{43}$/)
  })

  it('the same state is usable once', async () => {
    const flow = await beginFlow()
    await completeSignIn(deps, 'stub', query({ code: 'c-1', state: flow.state }), flow.cookie)
    const error = await refusal('stub', query({ code: 'c-2', state: flow.state }), flow.cookie)
    expect(error.code).toBe('invalid_state')
    expect(error.message).toBe(MESSAGES.staleSignIn)
    // Which check failed is the cause: the log's, not the person's.
    expect((error.cause as Error).message).toBe('the state has already been used')
    // The state was the gateway's own: "Start again" goes back toward where the sign-in was going.
    expect(error.details.loginUrl).toBe(loginUrl(config, 'stub', NEXT))
  })

  it.each([
    ['no state parameter', (_flow: { state: string, cookie: string }) => query({ code: 'c' }), (flow: { cookie: string }) => flow.cookie, '/oauth/', MESSAGES.noSignIn],
    ['a tampered state', (flow: { state: string }) => query({ code: 'c', state: `${flow.state}x` }), (flow: { cookie: string }) => flow.cookie, '/oauth/', MESSAGES.staleSignIn],
    // The state is the gateway's own, but another browser's: where it was going is not said (it may
    // carry an application's token; test/security/state-next.test.ts).
    ['no flow cookie (another browser)', (flow: { state: string }) => query({ code: 'c', state: flow.state }), () => undefined, '/oauth/', MESSAGES.staleSignIn],
  ])('%s is invalid_state, with a loginUrl', async (_name, callback, cookie, next, message) => {
    const flow = await beginFlow()
    const error = await refusal('stub', callback(flow), cookie(flow))
    expect(error.code).toBe('invalid_state')
    expect(error.message).toBe(message)
    expect(error.details.loginUrl).toBe(loginUrl(config, 'stub', next))
    expect(stub.requests.length).toBe(0)
  })

  it('a state begun in another browser is invalid_state, with a loginUrl', async () => {
    const mine = await beginFlow()
    const theirs = await beginFlow()
    expect(parseFlowCookie(theirs.cookie)!.binding).not.toBe(parseFlowCookie(mine.cookie)!.binding)
    const error = await refusal('stub', query({ code: 'c', state: theirs.state }), mine.cookie)
    expect(error.code).toBe('invalid_state')
    expect((error.cause as Error).message).toBe('the sign-in was started in another browser')
    expect(error.details.loginUrl).toMatch(/^https:\/\/gw\.example\/oauth\/login\/stub\//)
  })

  it('a state issued for another provider is invalid_state', async () => {
    const flow = await beginFlow('mail')
    const error = await refusal('stub', query({ code: 'c', state: flow.state }), flow.cookie)
    expect(error.code).toBe('invalid_state')
    expect((error.cause as Error).message).toBe('the state was issued for another provider')
    expect(error.details.loginUrl).toBe(loginUrl(config, 'stub', '/oauth/'))
  })

  it('the provider\'s error=access_denied is access_denied, with a loginUrl back to the flow\'s next', async () => {
    const flow = await beginFlow()
    const error = await refusal('stub', query({ error: 'access_denied', state: flow.state }), flow.cookie)
    expect(error.code).toBe('access_denied')
    expect(error.details.loginUrl).toBe(loginUrl(config, 'stub', NEXT))
    expect(error.details.loginUrl).toContain(encodeURIComponent(NEXT))
    expect(stub.requests.length).toBe(0)
  })

  it('an unverified e-mail address as the user name is forbidden: no session is made of it', async () => {
    stub.userinfo = { email: 'alice@example.org', email_verified: false }
    const flow = await beginFlow('mail')
    const error = await refusal('mail', query({ code: 'c', state: flow.state }), flow.cookie)
    expect(error.code).toBe('forbidden')
    expect(error.details.loginUrl).toBe(loginUrl(config, 'mail', NEXT))
  })

  it('a verified e-mail address as the user name signs in', async () => {
    stub.userinfo = { email: 'alice@example.org', email_verified: true }
    const flow = await beginFlow('mail')
    const completed = await completeSignIn(deps, 'mail', query({ code: 'c', state: flow.state }), flow.cookie)
    expect(completed.signIn.identity).toEqual({ sub: 'alice@example.org', subject: 'alice@example.org', iss: stub.url, email: 'alice@example.org', groups: [] })
  })
})
