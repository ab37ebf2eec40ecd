// Review finding: forward-auth reads the original path from X-Forwarded-Uri first and X-Original-URI
// only when the first is absent, and both are headers a client can send. nginx's own auth_request
// example (https://nginx.org/en/docs/http/ngx_http_auth_request_module.html) sets only
// `proxy_set_header X-Original-URI $request_uri;`, which docs/forward-auth.md says the gateway reads;
// the auth subrequest carries every header of the client's request besides, so a client's own
// X-Forwarded-Uri wins over what nginx set, and a `paths` rule judges the path the client names.
// bob asks for /admin/salaries with `X-Forwarded-Uri: /public`; payroll's deny on /admin/* should
// refuse him, and the application gets /admin/salaries. The suggested fix: when both headers are
// present and differ, the path cannot be told (undefined: a deny on paths holds, an allow does not).
import { createServer, type Server } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { frontBinary, startFrontProxy, type FrontProxy } from '../helpers/front-proxy.js'
import { sessionCookie, startForwardAuthGateway, type TestGateway } from '../helpers/gateway.js'
import { close, listen } from '../helpers/net.js'
import type { TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { rawRequest } from '../helpers/raw-http.js'

const PAYROLL = 'payroll.example.com'
const installed = frontBinary('nginx') !== undefined

/** An application that records the path of each request it gets. */
interface Recorder { url: string, paths: string[], close (): Promise<void> }

async function startRecorder (): Promise<Recorder> {
  const recorder: Recorder = { url: '', paths: [], close: async () => {} }
  const server: Server = createServer((req, res) => {
    recorder.paths.push(req.url ?? '')
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end('{"app":true}')
  })
  recorder.url = await listen(server)
  recorder.close = async () => await close(server)
  return recorder
}

/** `GET <path>` through `port` with these header lines; the status (0: closed without an answer). */
async function get (port: number, path: string, lines: string[]): Promise<number> {
  return (await rawRequest(port, path, lines, { host: PAYROLL })).status
}

/** docs/forward-auth/nginx.conf's auth location as nginx's own example writes it: the original URI in X-Original-URI only. */
function nginxExample (config: string): string {
  const forwarded = '        proxy_set_header X-Forwarded-Uri $request_uri;\n'
  const cleared = '        proxy_set_header X-Original-URI "";\n'
  if (!config.includes(forwarded) || !config.includes(cleared)) throw new Error('docs/forward-auth/nginx.conf no longer sets X-Forwarded-Uri as this test expects')
  return config.replace(cleared, '').replace(forwarded, '        proxy_set_header X-Original-URI $request_uri;\n')
}

let redis: TestRedis
let op: TestProvider
let app: Recorder
let gateway: TestGateway
let front: FrontProxy | undefined
let port = 0
let bob = ''
let alice = ''

beforeAll(async () => {
  redis = await startRedis()
  app = await startRecorder()
  ;({ gateway, op } = await startForwardAuthGateway(redis.url, {
    // Staff may use payroll, but only admins its /admin/ pages.
    // And no one deletes through it, not even by `?_method=DELETE` (Laravel, Symfony act on it).
    forwardAuth: { allowedRedirectHosts: [PAYROLL], hosts: { [PAYROLL]: { allow: { groups: ['staff'] }, deny: [{ paths: ['/admin/*'], users: ['bob'] }, { methods: ['DELETE'] }] } } },
  }))
  bob = await sessionCookie(gateway, 'bob')
  alice = await sessionCookie(gateway, 'alice')
  if (!installed) return
  front = await startFrontProxy('nginx', { gateway: `127.0.0.1:${gateway.config.server.port}`, upstream: new URL(app.url).host, host: PAYROLL }, nginxExample)
  port = front.port
})

afterAll(async () => {
  await front?.stop()
  await gateway?.close()
  await Promise.all([op?.close(), app?.close()])
  await redis?.release()
})

describe('forward-auth behind nginx setting X-Original-URI (nginx\'s own auth_request example)', () => {
  it.skipIf(!installed)('refuses bob /admin/salaries, and lets him read /reports', async () => {
    expect(await get(port, '/reports', [`Cookie: ${bob}`])).toBe(200)
    const before = app.paths.length
    expect(await get(port, '/admin/salaries', [`Cookie: ${bob}`])).toBe(403)
    expect(app.paths.slice(before)).toEqual([])
  })

  it.skipIf(!installed).each([
    '/public',
    '/reports',
    '/',
    '/admin',
  ])('never lets bob reach /admin/salaries by his own X-Forwarded-Uri: %s', async (claimed) => {
    const before = app.paths.length
    const status = await get(port, '/admin/salaries', [`Cookie: ${bob}`, `X-Forwarded-Uri: ${claimed}`])
    expect(app.paths.slice(before)).toEqual([])
    expect(status).toBe(403)
  })
})

// Tester's finding (round 4): with the two URI headers disagreeing, the path was unknown but the
// `?_method=` of the request nginx named (X-Original-URI) was not judged at all, so alice's
// `/reports?_method=DELETE` with her own `X-Forwarded-Uri: /reports` passed a host that denies
// DELETE, and the audit line named the URI she chose. (bob is refused either way: his deny names
// paths, and a path that cannot be told is refused.) Now the original request cannot be told:
// its method is unknown too, so a `methods` rule holds (deny) or does not admit (allow), and the
// audit line names no original URL rather than the client's (what was sent is in `originalSent`).
describe('forward-auth when X-Forwarded-Uri and X-Original-URI disagree', () => {
  /** /oauth/auth/ asked directly, as the trusted proxy (127.0.0.1) asks it, for alice. */
  async function ask (method: string, headers: Record<string, string>): Promise<number> {
    const response = await fetch(`${gateway.url}/oauth/auth/demo/`, {
      headers: { cookie: alice, host: PAYROLL, 'x-forwarded-host': PAYROLL, 'x-forwarded-proto': 'http', 'x-forwarded-method': method, accept: 'application/json', ...headers },
    })
    await response.arrayBuffer()
    return response.status
  }

  it.each([
    ['X-Original-URI alone', { 'x-original-uri': '/reports?_method=DELETE' }],
    ['X-Forwarded-Uri alone', { 'x-forwarded-uri': '/reports?_method=DELETE' }],
    ['the client\'s own X-Forwarded-Uri beside it', { 'x-original-uri': '/reports?_method=DELETE', 'x-forwarded-uri': '/reports' }],
    ['the client\'s own X-Original-URI beside it', { 'x-forwarded-uri': '/reports?_method=DELETE', 'x-original-uri': '/reports' }],
  ])('refuses POST /reports?_method=DELETE named in %s', async (_, headers) => {
    expect(await ask('POST', headers)).toBe(403)
  })

  it('refuses a request whose two URI headers disagree, and never logs the client\'s one as the original URL', async () => {
    expect(await ask('POST', { 'x-original-uri': '/reports', 'x-forwarded-uri': '/public' })).toBe(403)
    const line = gateway.logs.map((text) => JSON.parse(text) as Record<string, unknown>).filter((entry) => entry.msg === 'request completed' && String(entry.url).startsWith('/oauth/auth/demo/')).at(-1)
    expect(line).toMatchObject({ statusCode: 403 })
    expect(line).not.toHaveProperty('originalUrl')
    // What was sent is said apart, both values as sent.
    expect(line).toMatchObject({ originalSent: 'x-forwarded-method: POST; x-forwarded-uri: /public; x-original-uri: /reports' })
    // Both agreeing (a proxy that sets both): the request as named.
    expect(await ask('GET', { 'x-original-uri': '/reports', 'x-forwarded-uri': '/reports' })).toBe(200)
  })

  it.skipIf(!installed)('through nginx, never lets alice\'s ?_method=DELETE reach the application by her own X-Forwarded-Uri', async () => {
    const before = app.paths.length
    expect(await get(port, '/reports?_method=DELETE', [`Cookie: ${alice}`])).toBe(403)
    expect(await get(port, '/reports?_method=DELETE', [`Cookie: ${alice}`, 'X-Forwarded-Uri: /reports'])).toBe(403)
    expect(app.paths.slice(before)).toEqual([])
  })
})
