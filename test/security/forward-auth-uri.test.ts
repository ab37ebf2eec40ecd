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
import { connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { frontBinary, startFrontProxy, type FrontProxy } from '../helpers/front-proxy.js'
import { sessionCookie, startForwardAuthGateway, type TestGateway } from '../helpers/gateway.js'
import { close, listen } from '../helpers/net.js'
import type { TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'

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
  return await new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write([`GET ${path} HTTP/1.1`, `Host: ${PAYROLL}`, 'Accept: application/json', 'Connection: close', ...lines, '', ''].join('\r\n'))
    })
    let data = ''
    socket.setEncoding('latin1')
    socket.setTimeout(10_000, () => socket.destroy(new Error('no answer within 10 s')))
    socket.on('data', (chunk: string) => { data += chunk })
    socket.on('error', reject)
    socket.on('close', () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1] ?? 0)))
  })
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

beforeAll(async () => {
  redis = await startRedis()
  app = await startRecorder()
  ;({ gateway, op } = await startForwardAuthGateway(redis.url, {
    // Staff may use payroll, but only admins its /admin/ pages.
    forwardAuth: { allowedRedirectHosts: [PAYROLL], hosts: { [PAYROLL]: { allow: { groups: ['staff'] }, deny: { paths: ['/admin/*'], users: ['bob'] } } } },
  }))
  bob = await sessionCookie(gateway, 'bob')
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
