// An answer the gateway sends for a person is kept out of shared caches in front of it (a CDN, a
// company proxy): such a cache sees the request with only the gateway's cookie, not the
// Authorization and identity headers the upstream answered. An outside tester's finding: an
// upstream's `max-age` (right for a request with Authorization), `public` with a Vary on headers no
// browser sends, or no directive at all, reached the client as it was, and a cache in front could
// serve alice's page to bob. Answers of public paths and `auth: none` routes keep their own.
import { createServer, type Server } from 'node:http'
import { afterAll, describe, expect, it as unit } from 'vitest'
import { signIn, type SignedIn } from '../helpers/browser.js'
import type { TestGateway } from '../helpers/gateway.js'
import { close, listen } from '../helpers/net.js'
import { test as it } from '../helpers/stack.js'
import { personalCacheControl } from '../../src/proxy/headers.js'

/** Each path's Cache-Control, as the upstream answers it (none: no header). */
const ANSWERS: Record<string, string | undefined> = {
  'max-age': 'max-age=600',
  public: 'public, max-age=600, s-maxage=3600',
  none: undefined,
  private: 'private, max-age=60',
  'no-store': 'no-store',
  cdn: 'max-age=600',
}

let gateway: TestGateway
let upstream: Server
let alice: SignedIn

it.beforeAll(async ({ startStack }) => {
  upstream = createServer((req, res) => {
    const cacheControl = ANSWERS[(req.url ?? '').split('/').pop()!]
    // `cdn`: the headers CDNs read ahead of Cache-Control too (a re-reading's finding).
    const cdn = req.url?.endsWith('/cdn') ? { 'cdn-cache-control': 'public, max-age=3600', 'cloudflare-cdn-cache-control': 'max-age=3600', 'surrogate-control': 'max-age=3600', 'edge-control': 'cache-maxage=1h' } : {}
    res.writeHead(200, { 'content-type': 'text/plain', vary: 'Authorization, X-Forwarded-User', ...cdn, ...(cacheControl === undefined ? {} : { 'cache-control': cacheControl }) })
    res.end(`hello ${String(req.headers['x-forwarded-user'] ?? 'nobody')}`)
  })
  const url = await listen(upstream)
  gateway = await startStack({
    routes: [
      { path: '/app/', upstream: url, provider: 'demo', public: ['GET /app/open/*'] },
      { path: '/site/', upstream: url, auth: 'none' },
    ],
  })
  alice = await signIn(`${gateway.url}/app/max-age`, 'alice')
})

afterAll(async () => {
  await gateway?.close()
  if (upstream) await close(upstream)
})

async function cacheControlOf (path: string, cookie?: string): Promise<string | null> {
  const response = await fetch(`${gateway.url}${path}`, { headers: cookie === undefined ? {} : { cookie } })
  await response.arrayBuffer()
  expect(response.status).toBe(200)
  return response.headers.get('cache-control')
}

describe('an answer made for a signed-in person', () => {
  it.each([
    ['max-age', 'private, max-age=600'],
    ['public', 'private, max-age=600'],
    ['none', 'private'],
    ['private', 'private, max-age=60'],
    ['no-store', 'no-store'],
  ])('upstream %s: Cache-Control %s', async (path, expected) => {
    expect(await cacheControlOf(`/app/${path}`, alice.cookie)).toBe(expected)
  })
})

describe('a CDN\'s own control headers on an answer made for a person', () => {
  it('are dropped; an answer made for nobody keeps them', async () => {
    const mine = await fetch(`${gateway.url}/app/cdn`, { headers: { cookie: alice.cookie } })
    await mine.arrayBuffer()
    expect(['cdn-cache-control', 'cloudflare-cdn-cache-control', 'surrogate-control', 'edge-control'].map((name) => mine.headers.get(name))).toEqual([null, null, null, null])
    expect(mine.headers.get('cache-control')).toBe('private, max-age=600')
    const anyone = await fetch(`${gateway.url}/site/cdn`)
    await anyone.arrayBuffer()
    expect(anyone.headers.get('cdn-cache-control')).toBe('public, max-age=3600')
  })
})

describe('an answer made for nobody', () => {
  it.each(['/app/open/public', '/site/public', '/site/none'])('%s keeps the upstream\'s own', async (path) => {
    expect(await cacheControlOf(path)).toBe(ANSWERS[path.split('/').pop()!] ?? null)
  })
})

describe('personalCacheControl', () => {
  unit.each([
    [undefined, 'private'],
    ['max-age=0', 'private, max-age=0'],
    ['PUBLIC, Max-Age=5', 'private, Max-Age=5'],
    ['no-cache, s-maxage=10', 'private, no-cache'],
    [['public', 'max-age=5'], 'private, max-age=5'],
    ['Private', undefined],
    ['max-age=5, no-store', undefined],
    // Only Set-Cookie kept from shared caches: the rest is not private.
    ['private="set-cookie", max-age=5', 'private, private="set-cookie", max-age=5'],
  ])('%j is %j', (value, expected) => {
    expect(personalCacheControl(value)).toBe(expected)
  })
})
