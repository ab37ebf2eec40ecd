// A token's `expires_at` is stamped with the clock the gateway is given, not the wall clock: the code
// exchange and the refresh grant called straight (no server but the token endpoint stub), with a
// clock set years away from the wall clock.
import { pino } from 'pino'
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { parseConfig } from '../../src/config/config.js'
import { checkCallback, exchangeCode, refreshTokens } from '../../src/oauth/client.js'
import { Providers, type ResolvedProvider } from '../../src/oauth/providers.js'
import { TEST_SECRET } from '../helpers/gateway.js'
import { startTokenStub, type TokenStub } from '../helpers/token-stub.js'

/** A fixed instant years from the wall clock, so `expires_at` can only come from here. */
const START = Date.UTC(2031, 0, 1)
const clock = { at: START, now: () => clock.at }
const EXPIRES_IN_S = 3600

let stub: TokenStub
let provider: ResolvedProvider

beforeAll(async () => {
  stub = await startTokenStub()
  stub.extra = { expires_in: EXPIRES_IN_S }
  const config = parseConfig(stringify({
    session: { secret: TEST_SECRET },
    providers: { stub: { clientId: 'stub-client', clientSecret: 'stub-secret', authorizeUrl: `${stub.url}/authorize`, tokenUrl: `${stub.url}/token`, scope: 'read' } },
    routes: [{ path: '/', upstream: 'http://127.0.0.1:1', provider: 'stub' }],
  }), {}, 'test.yaml')
  provider = await new Providers(config.providers, pino({ level: 'silent' })).get('stub')
})

afterAll(async () => { await stub?.close() })

beforeEach(() => { clock.at = START })

it('the code exchange stamps expires_at with the injected clock, and follows it when it moves', async () => {
  const first = await exchangeCode(provider, checkCallback(provider, new URLSearchParams({ code: 'c' })), 'http://127.0.0.1/cb', undefined, undefined, clock)
  expect(first.tokens.expires_at).toBe(clock.at / 1000 + EXPIRES_IN_S)
  clock.at += 86_400_000
  const second = await exchangeCode(provider, checkCallback(provider, new URLSearchParams({ code: 'c' })), 'http://127.0.0.1/cb', undefined, undefined, clock)
  expect(second.tokens.expires_at).toBe(clock.at / 1000 + EXPIRES_IN_S)
})

it('the refresh grant stamps expires_at with the injected clock', async () => {
  const refreshed = await refreshTokens(provider, 'a-refresh-token', clock)
  expect(refreshed).not.toBe('refused')
  expect(refreshed !== 'refused' && refreshed.expires_at).toBe(clock.at / 1000 + EXPIRES_IN_S)
})
