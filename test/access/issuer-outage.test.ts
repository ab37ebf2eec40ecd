// A route whose `bearer.issuers` lists an issuer that cannot be reached (its discovery hangs, or its
// port refuses) beside a healthy one (an outside tester's rows). A JWT of the healthy issuer is
// judged without waiting for the other's discovery (its configured issuer is not the token's
// `iss`); an opaque token the healthy issuer calls active passes although an issuer listed before
// it cannot be read, but not past one that was read and whose introspection fails (a reviewer's
// point: a stranger who gets an issuer rate-limited must not send its tokens on to the next); and
// a token of the unreachable issuer ends 503, naming the provider. Bounds
// are the configured timeouts, never a margin.
import { createServer, type Server } from 'node:http'
import { expect } from 'vitest'
import { oidcClient, type TestGateway } from '../helpers/gateway.js'
import { CI, clientCredentialsToken, startMachineProvider } from '../helpers/machine.js'
import { close, listen, refusedUrl } from '../helpers/net.js'
import type { TestProvider } from '../helpers/oidc.js'
import { test as it } from '../helpers/stack.js'

/** The unreachable issuers' `timeout`. */
const TIMEOUT_MS = 2000
/** `stuck`'s, longer than any test: its discovery, begun when the gateway starts, is pending throughout. */
const STUCK_MS = 120_000

let gateway: TestGateway
let machine: TestProvider
let hung: Server
let hungUrl: string
/** An issuer that is up, whose introspection endpoint answers 429 (rate-limited). */
let limited: Server
let limitedUrl: string

it.beforeAll(async ({ startStack, upstream, gatewayAddress }) => {
  hung = createServer(() => {})
  hungUrl = await listen(hung)
  limited = createServer((request, response) => {
    if (request.url === '/.well-known/openid-configuration') {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ issuer: limitedUrl, authorization_endpoint: `${limitedUrl}/auth`, token_endpoint: `${limitedUrl}/token`, jwks_uri: `${limitedUrl}/jwks`, introspection_endpoint: `${limitedUrl}/introspect`, response_types_supported: ['code'], subject_types_supported: ['public'], id_token_signing_alg_values_supported: ['RS256'] }))
    } else {
      response.writeHead(429, { 'retry-after': '60' }).end()
    }
  })
  limitedUrl = await listen(limited)
  machine = await startMachineProvider(gatewayAddress.baseUrl)
  const orders = { audience: 'api://orders' }
  gateway = await startStack({
    providers: {
      machine: oidcClient(machine.issuer, 'c', 's'),
      down: { ...oidcClient(hungUrl, 'c', 's'), timeout: `${TIMEOUT_MS}ms` },
      stuck: { ...oidcClient(`${hungUrl}/stuck`, 'c', 's'), timeout: `${STUCK_MS}ms` },
      limited: oidcClient(limitedUrl, 'c', 's'),
      refused: { ...oidcClient(await refusedUrl(), 'c', 's'), timeout: `${TIMEOUT_MS}ms` },
    },
    routes: [
      { path: '/hung-first/', upstream: upstream.url, provider: 'demo', bearer: { ...orders, issuers: ['down', 'machine'] } },
      { path: '/stuck-first/', upstream: upstream.url, provider: 'demo', bearer: { ...orders, issuers: ['stuck', 'machine'] } },
      { path: '/ledger-refused/', upstream: upstream.url, provider: 'demo', bearer: { audience: 'api://ledger', issuers: ['refused', 'machine'], introspect: true } },
      { path: '/ledger-hung/', upstream: upstream.url, provider: 'demo', bearer: { audience: 'api://ledger', issuers: ['down', 'machine'], introspect: true } },
      { path: '/ledger-limited/', upstream: upstream.url, provider: 'demo', bearer: { audience: 'api://ledger', issuers: ['limited', 'machine'], introspect: true } },
    ],
  })
})

it.afterAll(async () => {
  await gateway?.close()
  await machine?.close()
  hung.closeAllConnections()
  await Promise.all([close(hung), close(limited)])
})

async function call (path: string, token: string, signal?: AbortSignal): Promise<{ status: number, retryAfter: string | null, body: Record<string, unknown> }> {
  const response = await fetch(`${gateway.url}${path}`, { headers: { accept: 'application/json', authorization: `Bearer ${token}` }, ...(signal ? { signal } : {}) })
  const text = await response.text()
  return { status: response.status, retryAfter: response.headers.get('retry-after'), body: text === '' ? {} : JSON.parse(text) as Record<string, unknown> }
}

it('a JWT of the healthy issuer does not wait for the discovery of the issuer listed before it, pending for the whole test', async () => {
  // Before: it waited for that discovery to end (here, never within the test), so it is asked to
  // answer within another issuer's timeout, the gateway's own bound for a provider call.
  const answer = await call('/stuck-first/x', await clientCredentialsToken(machine, CI, 'api://orders'), AbortSignal.timeout(TIMEOUT_MS))
  expect(answer.status).toBe(200)
})

it('an opaque token the healthy issuer calls active passes although an issuer listed before it refuses connections', async () => {
  expect((await call('/ledger-refused/x', await clientCredentialsToken(machine, CI, 'api://ledger'))).status).toBe(200)
})

it('an opaque token the healthy issuer calls active passes although an issuer listed before it hangs (after that issuer\'s timeout)', async () => {
  expect((await call('/ledger-hung/x', await clientCredentialsToken(machine, CI, 'api://ledger'))).status).toBe(200)
})

it('an issuer that is up but whose introspection fails (429) ends it with 502: its failing never sends a token on to the issuers after it', async () => {
  expect((await call('/ledger-limited/x', await clientCredentialsToken(machine, CI, 'api://ledger'))).status).toBe(502)
})

it('a token of the hung issuer: 503 with Retry-After, naming the provider whose configuration could not be read', async () => {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url')
  const now = Math.floor(Date.now() / 1000)
  const token = `${part({ alg: 'RS256', kid: 'x' })}.${part({ iss: hungUrl, sub: 'x', aud: 'api://orders', exp: now + 300 })}.${part('sig')}`
  const answer = await call('/hung-first/x', token)
  expect(answer.status).toBe(503)
  expect(answer.retryAfter).toMatch(/^[1-9]\d*$/)
  expect(String(answer.body.message)).toContain('provider "down"')
})
