// A token endpoint that answers, but badly (a reliability tester's file): it accepts the connection
// and trickles one byte a second, answers 200 with text that is not JSON, an HTML page, tens of MB,
// closes the connection in the middle of its body, or answers a JSON error that is no verdict on the
// refresh token (429, the gateway's own invalid_client, temporarily_unavailable). At the sign-in
// callback and at the refresh of an expired token: 502 token_exchange_failed within the provider's
// `timeout` (plus one answer's work), one log line naming the cause, no code, secret or token in
// the log, and the session neither lost nor changed (the same cookie works once the provider is
// back). At the refresh of a token still valid (due 30 s before it expires): that token goes on.
// Only invalid_grant (and the other verdicts on the grant) ends the session's tokens.
// The shared stack (real Redis, the worker's gateway address); a small stub provider injects the
// faults. The gateway's clock is injected: no waiting for expiry.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { expect } from 'vitest'
import { ONE_ANSWER_MS } from '../helpers/bounds.js'
import { Browser } from '../helpers/browser.js'
import { startGateway, type TestGateway } from '../helpers/gateway.js'
import { close, listen, refusedUrl } from '../helpers/net.js'
import { test as it } from '../helpers/stack.js'

/** The stub provider's `timeout`. */
const TIMEOUT_MS = 500
const WITHIN_MS = TIMEOUT_MS + ONE_ANSWER_MS
/** Tokens from the stub live this long; they count as expired 30 s before. */
const TOKEN_TTL_S = 60
const clock = { offset: 0, now: () => Date.now() + clock.offset }
const CLIENT_SECRET = 'stub-client-secret-DO-NOT-LOG'

type Mode = 'ok' | 'trickle' | 'invalid-json' | 'html' | 'huge' | 'cut' | 'rate-limited' | 'invalid-client' | 'temporarily-unavailable' | 'invalid-grant' | 'interaction-required'
let mode: Mode = 'ok'
let issued = 0
const timers = new Set<NodeJS.Timeout>()

function tokenAnswer (req: IncomingMessage, res: ServerResponse): void {
  res.on('error', () => {})
  req.socket.on('error', () => {})
  const json = (status: number, value: unknown) => { res.writeHead(status, { 'content-type': 'application/json' }); res.end(JSON.stringify(value)) }
  switch (mode) {
    case 'ok': {
      issued++
      return json(200, { access_token: `at-secret-${issued}`, token_type: 'Bearer', expires_in: TOKEN_TTL_S, refresh_token: `rt-secret-${issued}` })
    }
    case 'trickle': {
      // Headers at once, then one byte a second of a token answer.
      const body = Buffer.from(JSON.stringify({ access_token: 'at-trickled-secret', token_type: 'Bearer', expires_in: 3600 }))
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(body.length) })
      let i = 0
      const timer = setInterval(() => { if (i < body.length) res.write(body.subarray(i, ++i)) }, 1000)
      timers.add(timer)
      res.write(body.subarray(0, ++i))
      res.on('close', () => { clearInterval(timer); timers.delete(timer) })
      return
    }
    case 'invalid-json': res.writeHead(200, { 'content-type': 'application/json' }); res.end('{"access_token": "at-broken-secret", '); return
    case 'html': res.writeHead(200, { 'content-type': 'text/html' }); res.end('<html><body>Maintenance at-html-secret</body></html>'); return
    case 'huge': {
      // 32 MiB of one JSON answer, written as fast as the gateway reads it.
      res.writeHead(200, { 'content-type': 'application/json' })
      res.write('{"access_token":"at-huge-secret","token_type":"Bearer","pad":"')
      const chunk = Buffer.alloc(1024 * 1024, 'a')
      let left = 32
      const more = () => {
        while (left > 0) {
          left--
          if (!res.write(chunk)) { res.once('drain', more); return }
        }
        res.end('"}')
      }
      more()
      return
    }
    case 'cut': {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '200' })
      res.write('{"access_token":"at-cut-secret","token_')
      setImmediate(() => req.socket.destroy())
      return
    }
    case 'rate-limited':
      res.setHeader('retry-after', String(PAUSE_S))
      return json(429, { error: 'too_many_requests', error_description: 'Global limit has been reached' })
    case 'invalid-client': return json(401, { error: 'invalid_client' })
    case 'temporarily-unavailable': return json(400, { error: 'temporarily_unavailable' })
    case 'invalid-grant': return json(400, { error: 'invalid_grant', error_description: 'Token is not active' })
    case 'interaction-required': return json(400, { error: 'interaction_required', error_description: 'AADSTS50076: you must use multi-factor authentication' })
  }
}

/** The pause a 429 asks for (Retry-After, seconds). */
const PAUSE_S = 7
/** Requests the token endpoint got. */
let tokenCalls = 0

const server = createServer((req, res) => {
  tokenCalls++
  // The request body is read whole before any answer (the refresh token in it is checked below).
  req.resume()
  req.on('end', () => tokenAnswer(req, res))
})
let stubUrl = ''
let gateway: TestGateway

/**
 * A second instance on the same store, whose `stub` provider is an OIDC issuer it cannot read (an
 * instance started while the provider's discovery failed): its refreshes fail with provider_unavailable.
 */
let unreadIssuer: TestGateway

it.beforeAll(async ({ startStack, upstream, redis }) => {
  stubUrl = await listen(server)
  gateway = await startStack({
    providers: { stub: { clientId: 'stub-client', clientSecret: CLIENT_SECRET, authorizeUrl: `${stubUrl}/authorize`, tokenUrl: `${stubUrl}/token`, scope: 'read', timeout: `${TIMEOUT_MS}ms` } },
    routes: [{ path: '/stub/', upstream: upstream.url, provider: 'stub' }],
  }, { deps: { clock } })
  unreadIssuer = await startGateway({
    store: { type: 'redis', url: redis.url },
    providers: { stub: { clientId: 'stub-client', clientSecret: CLIENT_SECRET, issuer: await refusedUrl(), scope: 'openid', timeout: `${TIMEOUT_MS}ms` } },
    routes: [{ path: '/stub/', upstream: upstream.url, provider: 'stub' }],
  }, { deps: { clock } })
})

it.afterAll(async () => {
  await unreadIssuer?.close()
  for (const timer of timers) clearInterval(timer)
  server.closeAllConnections()
  await close(server)
})

it.beforeEach(() => {
  mode = 'ok'
  clock.offset = 0
})

/** The callback of a sign-in at the stub, with a code of our own; the browser keeps its cookies. */
async function callback (browser: Browser, code: string): Promise<{ response: Response, ms: number }> {
  const login = await browser.fetch(`${gateway.url}/oauth/login/stub/?next=/stub/`)
  const state = new URL(login.headers.get('location')!).searchParams.get('state')!
  const start = performance.now()
  const response = await browser.fetch(`${gateway.url}/oauth/authorized/stub/?code=${code}&state=${encodeURIComponent(state)}`)
  return { response, ms: performance.now() - start }
}

async function signedIn (): Promise<Browser> {
  const browser = new Browser()
  const { response } = await callback(browser, 'good-code')
  expect(response.status).toBe(302)
  expect(await status(browser)).toBe(200)
  return browser
}

async function status (browser: Browser): Promise<number> {
  const response = await browser.fetch(`${gateway.url}/stub/data`, { headers: { accept: 'application/json' } })
  await response.arrayBuffer()
  return response.status
}

/** The log lines since `from` that carry error `code`, parsed. */
function errorLines (from: number, code: string): Array<Record<string, unknown>> {
  return gateway.logs.slice(from).map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.error === code)
}

const BODY_FAULTS: Array<[Mode, RegExp]> = [
  ['trickle', /did not answer within|timeout|aborted/i],
  ['invalid-json', /JSON/],
  ['html', /content-type|JSON/i],
  ['huge', /larger than/],
  ['cut', /closed|terminated|socket|premature|aborted/i],
]

it.for(BODY_FAULTS)('sign-in: a token endpoint that answers %s ends in 502 token_exchange_failed within the timeout, the cause logged, no secret logged', async ([fault, cause]) => {
  const from = gateway.logs.length
  mode = fault
  const code = `code-${fault}-SECRET`
  const { response, ms } = await callback(new Browser(), code)
  expect(response.status).toBe(502)
  expect(await response.text()).toContain('token_exchange_failed')
  expect(ms).toBeLessThan(WITHIN_MS)
  const lines = errorLines(from, 'token_exchange_failed')
  expect(lines).toHaveLength(1)
  expect(JSON.stringify(lines[0])).toMatch(cause)
  const logs = gateway.logs.slice(from).join('\n')
  for (const secret of [code, CLIENT_SECRET, 'secret"', '-secret']) expect(logs).not.toContain(secret)
})

it.for(BODY_FAULTS)('refresh of an expired token: a token endpoint that answers %s ends in 502 within the timeout, and the session is kept for the next try', async ([fault, cause]) => {
  const browser = await signedIn()
  const cookie = browser.cookieHeader(`${gateway.url}/stub/`)
  clock.offset = (TOKEN_TTL_S + 10) * 1000
  mode = fault
  const from = gateway.logs.length
  const start = performance.now()
  const response = await browser.fetch(`${gateway.url}/stub/data`, { headers: { accept: 'application/json' } })
  const ms = performance.now() - start
  expect(response.status).toBe(502)
  expect((await response.json() as { error: string }).error).toBe('token_exchange_failed')
  expect(response.headers.getSetCookie()).toEqual([])
  expect(ms).toBeLessThan(WITHIN_MS)
  expect(JSON.stringify(errorLines(from, 'token_exchange_failed'))).toMatch(cause)
  for (const secret of [CLIENT_SECRET, 'rt-secret-', 'at-secret-']) expect(gateway.logs.slice(from).join('\n')).not.toContain(secret)
  // The provider is back: the same cookie refreshes and passes, no new sign-in.
  mode = 'ok'
  expect(browser.cookieHeader(`${gateway.url}/stub/`)).toBe(cookie)
  expect(await status(browser)).toBe(200)
})

/** The token the upstream was given for a request of `browser` (the echo upstream answers with what it got). */
async function upstreamToken (browser: Browser): Promise<string | undefined> {
  const response = await browser.fetch(`${gateway.url}/stub/data`, { headers: { accept: 'application/json' } })
  expect(response.status).toBe(200)
  return (await response.json() as { headers: Record<string, string> }).headers.authorization
}

// A tester's finding: a refresh is due 30 s before the token expires, and one that failed then
// (a provider down for a minute, its 5xx, an answer it cut off) was a 502 for a token that was
// still good; every request of the session asked the failing provider again, each waiting its timeout.
it.for(BODY_FAULTS)('refresh of a token still valid: a token endpoint that answers %s does not fail the request: that token goes on, one warn line names the cause, and it is not asked again at once', async ([fault, cause]) => {
  const browser = await signedIn()
  const token = await upstreamToken(browser)
  clock.offset = (TOKEN_TTL_S - 20) * 1000
  mode = fault
  const from = gateway.logs.length
  const before = tokenCalls
  const start = performance.now()
  expect(await upstreamToken(browser)).toBe(token)
  expect(performance.now() - start).toBeLessThan(WITHIN_MS)
  // The failure stands for the provider's timeout plus 5 s: the next request does not wait for it again.
  expect(await upstreamToken(browser)).toBe(token)
  expect(tokenCalls - before).toBe(1)
  const lines = gateway.logs.slice(from).map((line) => JSON.parse(line) as Record<string, unknown>)
  const warned = lines.filter((line) => String(line.msg).startsWith('token refresh failed; the current token is still valid'))
  expect(warned).toHaveLength(1)
  expect(warned[0]).toMatchObject({ level: 40, provider: 'stub' })
  // 20 s left, give or take the second the token's expiry was rounded to.
  expect([19, 20]).toContain(warned[0]!.expiresInS)
  expect(JSON.stringify(warned[0])).toMatch(cause)
  expect(errorLines(from, 'token_exchange_failed')).toEqual([])
  for (const secret of [CLIENT_SECRET, 'rt-secret-', 'at-secret-']) expect(gateway.logs.slice(from).join('\n')).not.toContain(secret)
  // Expired meanwhile, with the provider back: asked again at once, and refreshed.
  mode = 'ok'
  clock.offset = (TOKEN_TTL_S + 10) * 1000
  expect(await upstreamToken(browser)).not.toBe(token)
  expect(tokenCalls - before).toBe(2)
})

it('refresh of a token still valid at an instance that cannot read its provider\'s configuration (provider_unavailable): that token goes on', async () => {
  const browser = await signedIn()
  const token = await upstreamToken(browser)
  clock.offset = (TOKEN_TTL_S - 20) * 1000
  const cookie = browser.cookieHeader(`${gateway.url}/stub/`)!
  const from = unreadIssuer.logs.length
  // An attacker's finding: each request wrote the line (the failure, before the lock, was not marked).
  for (let i = 0; i < 4; i++) {
    const response = await fetch(`${unreadIssuer.url}/stub/data`, { headers: { accept: 'application/json', cookie } })
    expect(response.status).toBe(200)
    expect((await response.json() as { headers: Record<string, string> }).headers.authorization).toBe(token)
  }
  const warned = unreadIssuer.logs.slice(from).map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => String(line.msg).startsWith('token refresh failed;'))
  expect(warned).toEqual([expect.objectContaining({ provider: 'stub', reason: 'The OpenID configuration of provider "stub" (its discovery document, from its issuer) could not be read.' })])
  // Expired, it is 502 there as an expired token's failed refresh is anywhere.
  clock.offset = (TOKEN_TTL_S + 10) * 1000
  const expired = await fetch(`${unreadIssuer.url}/stub/data`, { headers: { accept: 'application/json', cookie } })
  expect(expired.status).toBe(502)
  expect((await expired.json() as { error: string }).error).toBe('provider_unavailable')
})

it('a failed sign-in does not touch the session the browser already has', async () => {
  const browser = await signedIn()
  mode = 'cut'
  const { response } = await callback(browser, 'second-code')
  expect(response.status).toBe(502)
  mode = 'ok'
  expect(await status(browser)).toBe(200)
})

// A tester's finding: an OAuth error that is no verdict on the refresh token (the provider
// rate-limits, the gateway's own client credentials are refused, the provider is briefly
// unavailable) was taken for a refusal: the session's tokens were dropped, and every signed-in
// person had to sign in again.
it.for(['invalid-client', 'temporarily-unavailable'] as const)('refresh: a token endpoint that answers %s is a failure to retry (502), not a refusal: the token is kept', async (fault) => {
  const browser = await signedIn()
  clock.offset = (TOKEN_TTL_S + 10) * 1000
  mode = fault
  const response = await browser.fetch(`${gateway.url}/stub/data`, { headers: { accept: 'application/json' } })
  const body = await response.json() as { error: string }
  mode = 'ok'
  const after = await status(browser)
  expect({ status: response.status, error: body.error, after }).toEqual({ status: 502, error: 'token_exchange_failed', after: 200 })
})

// A tester's finding: an answer the gateway gave up reading (larger than 1 MiB, or cut off in its
// body) was told to the person as "The token endpoint could not be reached.": it was reached.
it.for(['huge', 'cut'] as const)('sign-in: a token endpoint that answers %s is not told as one that "could not be reached"', async (fault) => {
  mode = fault
  const { response } = await callback(new Browser(), `code-${fault}-message`)
  expect(response.status).toBe(502)
  const page = await response.text()
  expect(page).not.toContain('could not be reached')
  expect(page).toContain('answer could not be read')
})

// An attacker's finding: Microsoft Entra answers a refresh that Conditional Access or MFA now blocks
// with interaction_required, which a retry never passes: the session was stuck at 502.
it.for(['invalid-grant', 'interaction-required'] as const)('refresh: %s is a verdict on the grant: the tokens are dropped, and the person signs in again', async (verdict) => {
  const browser = await signedIn()
  clock.offset = (TOKEN_TTL_S - 20) * 1000
  mode = verdict
  const response = await browser.fetch(`${gateway.url}/stub/data`, { headers: { accept: 'application/json' } })
  expect(response.status).toBe(401)
  await response.arrayBuffer()
  mode = 'ok'
  expect(await status(browser)).toBe(401)
})

// An attacker's finding: with a provider answering 429, every request of every session whose token
// had expired asked the token endpoint again at once, adding to what it refused. Its Retry-After is
// a pause for this instance's refreshes at that provider: a token still valid goes on meanwhile,
// an expired one is 502 at once with the Retry-After, and nothing is asked until the pause is over.
it('refresh: a 429 pauses the refreshes at that provider for its Retry-After', async () => {
  const browser = await signedIn()
  mode = 'rate-limited'
  clock.offset = (TOKEN_TTL_S - 20) * 1000
  expect(await status(browser)).toBe(200)
  clock.offset = (TOKEN_TTL_S + 60) * 1000
  const before = tokenCalls
  const answers: Array<[number, string | null]> = []
  for (let i = 0; i < 5; i++) {
    const response = await browser.fetch(`${gateway.url}/stub/data`, { headers: { accept: 'application/json' } })
    await response.arrayBuffer()
    answers.push([response.status, response.headers.get('retry-after')])
  }
  expect(answers.map(([code]) => code)).toEqual([502, 502, 502, 502, 502])
  expect(answers.every(([, after]) => after !== null && Number(after) >= 1 && Number(after) <= PAUSE_S)).toBe(true)
  expect(tokenCalls - before).toBe(1)
  // The pause over and the provider back: the same cookie refreshes (the pause ends here, for the next tests).
  mode = 'ok'
  clock.offset += PAUSE_S * 1000
  expect(await status(browser)).toBe(200)
  expect(tokenCalls - before).toBe(2)
})
