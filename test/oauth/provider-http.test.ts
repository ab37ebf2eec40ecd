// providerFetch (src/oauth/provider-http.ts) stands in for fetch on the provider calls: the callers
// (oauth4webapi, the userinfo and GitHub readers) must see what fetch would show them, against a
// real HTTP server. Each case is compared with Node's own fetch on the same server.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { providerFetch } from '../../src/oauth/provider-http.js'
import { DnsStub } from '../helpers/dns-stub.js'
import { refusedUrl, waitFor } from '../helpers/net.js'

let server: Server
let base: string
const received: Array<{ method: string, headers: IncomingMessage['headers'], body: string }> = []

const routes: Record<string, (req: IncomingMessage, res: ServerResponse) => void> = {
  '/json': (_req, res) => { res.setHeader('content-type', 'application/json'); res.end('{"access_token":"t"}') },
  '/echo': (req, res) => {
    let body = ''
    req.on('data', (chunk: Buffer) => { body += chunk.toString() })
    req.on('end', () => { received.push({ method: req.method!, headers: req.headers, body }); res.end('ok') })
  },
  '/no-content': (_req, res) => { res.statusCode = 204; res.end() },
  '/refused': (_req, res) => { res.statusCode = 400; res.setHeader('content-type', 'application/json'); res.end('{"error":"invalid_grant"}') },
  '/redirect': (_req, res) => { res.statusCode = 302; res.setHeader('location', '/json'); res.end() },
  '/two-cookies': (_req, res) => { res.setHeader('set-cookie', ['a=1', 'b=2']); res.end('x') },
  '/huge': (_req, res) => { res.end(Buffer.alloc(2 * 1024 * 1024, 'a')) },
  '/hang': () => { /* never answers */ },
  '/cut': (req) => { req.socket.destroy() },
}

beforeAll(async () => {
  server = createServer((req, res) => { routes[req.url!]!(req, res) })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
afterAll(async () => {
  server.closeAllConnections()
  await new Promise((resolve) => server.close(resolve))
})

/** What a caller can tell from an answer, or from the error. */
async function seen (call: Promise<Response>): Promise<unknown> {
  try {
    const response = await call
    return { status: response.status, ok: response.ok, type: response.headers.get('content-type'), body: await response.text() }
  } catch (error) {
    return { error: (error as Error).name, message: (error as Error).message }
  }
}

describe('providerFetch', () => {
  it.each(['/json', '/no-content', '/refused', '/redirect'])('answers %s as fetch does (no redirect followed)', async (path) => {
    expect(await seen(providerFetch(`${base}${path}`, { redirect: 'manual' }))).toEqual(await seen(fetch(`${base}${path}`, { redirect: 'manual' })))
  })

  it('sends the method, the headers and a form body as given', async () => {
    received.length = 0
    const body = new URLSearchParams({ grant_type: 'authorization_code', code: 'c&d=e' })
    await providerFetch(`${base}/echo`, { method: 'POST', body, headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: 'Basic eA==' } })
    expect(received[0]).toMatchObject({ method: 'POST', body: 'grant_type=authorization_code&code=c%26d%3De' })
    expect(received[0]!.headers).toMatchObject({ 'content-type': 'application/x-www-form-urlencoded', authorization: 'Basic eA==' })
  })

  it('keeps every value of a repeated header', async () => {
    expect((await providerFetch(`${base}/two-cookies`)).headers.getSetCookie()).toEqual(['a=1', 'b=2'])
  })

  it('throws the signal\'s TimeoutError when the provider does not answer in time, as fetch does', async () => {
    const ours = await seen(providerFetch(`${base}/hang`, { signal: AbortSignal.timeout(100) }))
    expect(ours).toEqual(await seen(fetch(`${base}/hang`, { signal: AbortSignal.timeout(100) })))
    expect(ours).toMatchObject({ error: 'TimeoutError' })
  })

  it('throws a TypeError when the provider cannot be reached or drops the connection, as fetch does', async () => {
    const closed = `${await refusedUrl()}/json`
    expect(await seen(providerFetch(closed))).toEqual({ error: 'TypeError', message: 'fetch failed' })
    expect(await seen(fetch(closed))).toEqual({ error: 'TypeError', message: 'fetch failed' })
    expect(await seen(providerFetch(`${base}/cut`))).toEqual({ error: 'TypeError', message: 'fetch failed' })
  })

  it('refuses an answer larger than 1 MiB (a token or userinfo answer is a few KiB)', async () => {
    expect(await seen(providerFetch(`${base}/huge`))).toEqual({ error: 'TypeError', message: 'fetch failed' })
  })
})

describe('providerFetch beside Node fetch (what oauth4webapi would use without customFetch)', () => {
  it('holds one lookup of a name whose lookup hangs for calls at once, where fetch holds one per call', async () => {
    // A held lookup is a libuv thread-pool thread taken (test/faults/shared-lookup.test.ts): four
    // such fetch calls would stop every file read, scrypt and zlib call of the process.
    const dns = new DnsStub().install()
    dns.hang('ours.localhost')
    dns.hang('fetch.localhost')
    const abort = new AbortController()
    const port = new URL(base).port
    const calls = [0, 1, 2].flatMap(() => [
      providerFetch(`http://ours.localhost:${port}/json`, { signal: abort.signal }).catch(() => undefined),
      fetch(`http://fetch.localhost:${port}/json`, { signal: abort.signal }).catch(() => undefined),
    ])
    try {
      await waitFor(async () => dns.pending('fetch.localhost') === 3, 5000, 'three held lookups for fetch')
      expect(dns.pending('ours.localhost')).toBe(1)
      // Ended by the signal while the lookups still hang, both: fetch loses the sharing, not the abort.
      abort.abort()
      expect(await Promise.all(calls)).toEqual([undefined, undefined, undefined, undefined, undefined, undefined])
    } finally {
      dns.restore()
    }
  })
})
