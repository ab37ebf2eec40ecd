// Rotations out of order, and a stranger in between, as a machine client sees them:
// - The issuer signs a token with its new key k2 before it publishes k2 (a multi-region issuer whose
//   JWKS replica lags its signer). The first k2 token costs a read that lacks k2 and is refused 401
//   (docs/machine-clients.md). Then the issuer publishes k2, and another client brings a k2 token
//   within 5 s of that read: 503 with Retry-After, and the retry passes, never 401, since the key may
//   be newer than the read (an outside tester's finding: it was 401, because the gateway judged by
//   when it first met the kid, not by when this token came; a kid a stranger sent once before was
//   refused the same way).
// - A client whose token's key the issuer does not publish is refused by its retry, though a
//   stranger's made-up kid begins each read just before it (a re-reader's finding: judged by this
//   request alone, not by when the token first came, it was 503 at every retry, never told to get a
//   new token).
// The clock is injected; no waiting.
import { expect } from 'vitest'
import { JWKS_COOLDOWN_MS } from '../../src/oauth/issuer-keys.js'
import type { TestGateway } from '../helpers/gateway.js'
import { signingKey, startKeyIssuer, type KeyIssuer, type SigningKey } from '../helpers/key-issuer.js'
import { test as it } from '../helpers/stack.js'

let issuer: KeyIssuer
let gateway: TestGateway
const start = Date.now()
const clock = { offset: 0, now: () => start + clock.offset }

const k2 = await signingKey('k2')
/** A key the issuer rotated out before this gateway started: never published to it. */
const k0 = await signingKey('k0')

it.beforeAll(async ({ startStack, upstream }) => {
  issuer = await startKeyIssuer()
  gateway = await startStack({
    store: { type: 'memory' },
    providers: { corp: { clientId: 'c', clientSecret: 's', issuer: issuer.url, scope: 'openid' } },
    routes: [{ path: '/orders/', upstream: upstream.url, provider: 'corp', bearer: { audience: 'api://orders' } }],
  }, { deps: { clock } })
})

it.afterAll(async () => {
  await gateway?.close()
  await issuer?.close()
})

async function token (signer: SigningKey | 'k1', client: string): Promise<string> {
  return await issuer.sign({ client_id: client, sub: client }, { audience: 'api://orders', now: clock.now(), by: signer === 'k1' ? issuer.key : signer })
}

async function call (bearer: string): Promise<{ status: number, error: string | undefined, retryAfter: string | null }> {
  const response = await fetch(`${gateway.url}/orders/x`, { headers: { authorization: `Bearer ${bearer}`, accept: 'application/json' } })
  const body = await response.text()
  return { status: response.status, error: response.status === 200 ? undefined : (JSON.parse(body) as { error: string }).error, retryAfter: response.headers.get('retry-after') }
}

it('a token of a key published after the last read is "try again" (503), never 401, though its kid was met before that read', async () => {
  expect((await call(await token('k1', 'warm-up'))).status).toBe(200)
  clock.offset += JWKS_COOLDOWN_MS

  // The signer runs ahead of the JWKS: one early k2 token, one read without k2, refused (documented).
  const early = await call(await token(k2, 'early-job'))
  expect(early.status).toBe(401)
  const readsThen = issuer.reads

  // The issuer publishes k2 now, 1 s after the gateway's last read. Another job's k2 token.
  issuer.published = [issuer.key.jwk, k2.jwk]
  clock.offset += 1000
  const later = await call(await token(k2, 'deploy-job'))
  expect(issuer.reads).toBe(readsThen)
  // The documented answer: 503 issuer_keys_unavailable with Retry-After (the retry passes), not 401.
  expect(later).toEqual({ status: 503, error: 'issuer_keys_unavailable', retryAfter: '4' })

  clock.offset += JWKS_COOLDOWN_MS
  expect((await call(await token(k2, 'deploy-job'))).status).toBe(200)
})

it('a token whose key the issuer does not publish is refused (401) by its retry, though a stranger begins each read just before it', async () => {
  clock.offset += JWKS_COOLDOWN_MS
  expect((await call(await token('k1', 'warm-up'))).status).toBe(200)
  clock.offset += JWKS_COOLDOWN_MS
  const old = await token(k0, 'batch-job')
  const answers: number[] = []
  for (let attempt = 0; attempt < 4; attempt++) {
    // The stranger's made-up kid comes first, once the cooldown allows a read: it begins that read.
    const readsBefore = issuer.reads
    expect((await call(await token({ ...k0, jwk: { ...k0.jwk, kid: `made-up-${attempt}` } }, 'stranger'))).status).toBe(401)
    expect(issuer.reads).toBe(readsBefore + 1)
    // The client's same token, a moment later, then again as its Retry-After said.
    const answer = await call(old)
    answers.push(answer.status)
    if (answer.status !== 503) break
    clock.offset += Number(answer.retryAfter) * 1000
  }
  expect(answers).toEqual([503, 401])
})
