// An issuer's JWKS that fails in the ways an HTTP answer can fail once the connection is up: the
// connection closed before any answer, an answer cut off mid-body, a body over the gateway's 1 MiB
// cap. A machine client gets 503 issuer_keys_unavailable with Retry-After within the provider's
// timeout, the keys already read keep passing, and the log carries one warning, `signing keys could
// not be read`, whose cause says why (an outside tester's finding: its reason was "fetch failed" for
// all three, the HTTP client's own message). Each fault is one outage: an `ok` read in between ends
// the previous one ("signing keys read again"). The gateway's clock is injected: the cooldown is
// passed by moving it, never by waiting.
import { randomUUID } from 'node:crypto'
import { SignJWT } from 'jose'
import { expect } from 'vitest'
import { BACKCHANNEL_LOGOUT_EVENT } from '../../src/oauth/backchannel.js'
import { JWKS_COOLDOWN_MS } from '../../src/oauth/issuer-keys.js'
import { ONE_ANSWER_MS } from '../helpers/bounds.js'
import type { TestGateway } from '../helpers/gateway.js'
import { startKeyIssuer, type KeyIssuer } from '../helpers/key-issuer.js'
import { test as it } from '../helpers/stack.js'

const TIMEOUT_MS = 1500
type Mode = 'ok' | 'reset' | 'cut' | 'huge'

let mode: Mode = 'ok'
let issuer: KeyIssuer
let gateway: TestGateway
const start = Date.now()
const clock = { offset: 0, now: () => start + clock.offset }

it.beforeAll(async ({ startStack, upstream }) => {
  issuer = await startKeyIssuer({
    jwks: (request, response) => {
      if (mode === 'ok') return false
      if (mode === 'reset') {
        request.socket.destroy()
      } else if (mode === 'cut') {
        response.writeHead(200, { 'content-type': 'application/json', 'content-length': '5000' })
        response.write('{"keys":[{"kty":"RSA",')
        setTimeout(() => request.socket.destroy(), 20)
      } else {
        // huge: 2 MiB of a well-formed key set, over the gateway's 1 MiB cap
        response.writeHead(200, { 'content-type': 'application/json' })
        response.end(JSON.stringify({ keys: issuer.published, padding: 'x'.repeat(2 * 1024 * 1024) }))
      }
      return true
    },
  })
  gateway = await startStack({
    store: { type: 'memory' },
    providers: { corp: { clientId: 'c', clientSecret: 's', issuer: issuer.url, scope: 'openid', timeout: `${TIMEOUT_MS}ms` } },
    routes: [{ path: '/orders/', upstream: upstream.url, provider: 'corp', bearer: { audience: 'api://orders' } }],
  }, { deps: { clock } })
})

it.afterAll(async () => {
  await gateway?.close()
  await issuer?.close()
})

async function token (kid: string): Promise<string> {
  return await issuer.sign({ client_id: 'ci', sub: 'ci' }, { audience: 'api://orders', now: clock.now(), by: { ...issuer.key, jwk: { ...issuer.key.jwk, kid } } })
}

async function call (kid: string): Promise<{ status: number, error: string | undefined, retryAfter: string | null, ms: number }> {
  const began = Date.now()
  const response = await fetch(`${gateway.url}/orders/x`, { headers: { authorization: `Bearer ${await token(kid)}`, accept: 'application/json' } })
  const body = await response.text()
  return { status: response.status, error: response.status === 200 ? undefined : (JSON.parse(body) as { error: string }).error, retryAfter: response.headers.get('retry-after'), ms: Date.now() - began }
}

const warnings = (): Array<Record<string, unknown>> => gateway.logs.map((line) => JSON.parse(line) as Record<string, unknown>)
  .filter((line) => typeof line.msg === 'string' && line.msg.startsWith('signing keys could not be read'))

// What each fault's warning names besides "fetch failed", the HTTP client's message for all three.
const CAUSES: Array<[Mode, RegExp]> = [
  ['reset', /"other side closed","errno":"UND_ERR_SOCKET"/],
  ['cut', /"other side closed","errno":"UND_ERR_SOCKET"/],
  ['huge', /the answer is larger than 1048576 bytes/],
]

it.for(CAUSES)('a JWKS whose answer fails (%s): 503 issuer_keys_unavailable within the timeout, and one warning that names the cause', async ([fault, cause]) => {
  // The keys read well first (or again, ending the previous outage).
  mode = 'ok'
  clock.offset += JWKS_COOLDOWN_MS
  expect((await call(`before-${fault}`)).status).toBe(401)
  expect((await call('k1')).status).toBe(200)
  const before = warnings().length

  mode = fault
  clock.offset += JWKS_COOLDOWN_MS
  const answer = await call(`new-${fault}`)
  expect(answer.status).toBe(503)
  expect(answer.error).toBe('issuer_keys_unavailable')
  expect(Number(answer.retryAfter)).toBeGreaterThanOrEqual(1)
  expect(answer.ms).toBeLessThan(TIMEOUT_MS + ONE_ANSWER_MS)
  // The key already read keeps passing.
  expect((await call('k1')).status).toBe(200)

  const said = warnings().slice(before)
  expect(said).toHaveLength(1)
  expect(said[0]!.provider).toBe('corp')
  expect(said[0]!.url).toBe(`${issuer.url}/jwks`)
  // The reason is the cause, not only "fetch failed".
  expect(JSON.stringify(said[0]!.cause)).toMatch(cause)
})

// A back-channel logout in the same outage: the provider is told 502 (it sends the token again),
// and the outage's one warning is not buried under an error line per logout token (an outside
// tester's finding).
it('back-channel logouts while the keys cannot be read: 502 each within the timeout, no error line per logout token', async () => {
  // Signed with a key published since the last read (a kid the gateway has not read): the keys are read again, and fail.
  const logout = async (): Promise<{ status: number, ms: number }> => {
    const token = await new SignJWT({ sid: randomUUID(), events: { [BACKCHANNEL_LOGOUT_EVENT]: {} }, jti: randomUUID() })
      .setProtectedHeader({ alg: 'RS256', kid: 'k-rotated', typ: 'logout+jwt' })
      .setIssuer(issuer.url).setAudience('c').setIssuedAt(Math.floor(clock.now() / 1000)).sign(issuer.key.key)
    const began = Date.now()
    const response = await fetch(`${gateway.url}/oauth/backchannel-logout/corp/`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ logout_token: token }) })
    await response.arrayBuffer()
    return { status: response.status, ms: Date.now() - began }
  }
  // The keys read well first, ending the last row's outage.
  mode = 'ok'
  clock.offset += JWKS_COOLDOWN_MS
  expect((await call('before-logouts')).status).toBe(401)
  mode = 'reset'
  const from = gateway.logs.length
  for (let i = 0; i < 3; i++) {
    clock.offset += JWKS_COOLDOWN_MS
    const answer = await logout()
    expect(answer.status).toBe(502)
    expect(answer.ms).toBeLessThan(TIMEOUT_MS + ONE_ANSWER_MS)
  }
  mode = 'ok'
  const said = gateway.logs.slice(from).map((line) => JSON.parse(line) as { level: number, msg: string })
  expect(said.filter((line) => line.msg.startsWith('signing keys could not be read'))).toHaveLength(1)
  expect(said.filter((line) => line.level >= 50)).toEqual([])
})
