// Review finding: behind the docs' nginx snippet (docs/forward-auth/nginx.conf), a `methods`
// condition of forwardAuth.hosts judges whatever X-Forwarded-Method the *client* sent. nginx's
// auth_request subrequest is a GET carrying the client's own request headers, and the
// `/_gateway_auth` location sets X-Forwarded-Uri but never X-Forwarded-Method, so the client's
// header reaches the gateway from a trusted peer. bob, allowed only to read, sends DELETE with
// `X-Forwarded-Method: GET` and the application gets the DELETE; his plain GET, without the header,
// is refused (the method "cannot be told"). Caddy's forward_auth sets X-Forwarded-Method itself,
// so the same file passes there: the test is about the nginx snippet (and the gateway trusting a
// header the docs' proxy never sets).
import { createServer, type Server } from 'node:http'
import { connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { frontBinary, startFrontProxy, type FrontKind, type FrontProxy } from '../helpers/front-proxy.js'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { close, freePort, listen } from '../helpers/net.js'
import { startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'

const PAYROLL = 'payroll.example.com'
const FRONTS: FrontKind[] = ['nginx', 'caddy']
const missing = FRONTS.filter((kind) => !frontBinary(kind))

/** An application that records the method of each request it gets. */
interface Recorder { url: string, methods: string[], close (): Promise<void> }

async function startRecorder (): Promise<Recorder> {
  const recorder: Recorder = { url: '', methods: [], close: async () => {} }
  const server: Server = createServer((req, res) => {
    recorder.methods.push(req.method ?? '')
    req.resume()
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end(JSON.stringify({ app: true, method: req.method }))
  })
  recorder.url = await listen(server)
  recorder.close = async () => await close(server)
  return recorder
}

/** `<method> /pay` through `port` with these header lines; the status (0: closed without an answer). */
async function send (port: number, method: string, lines: string[]): Promise<number> {
  return await new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write([`${method} /pay HTTP/1.1`, `Host: ${PAYROLL}`, 'Accept: application/json', 'Connection: close', 'Content-Length: 0', ...lines, '', ''].join('\r\n'))
    })
    let data = ''
    socket.setEncoding('latin1')
    socket.setTimeout(10_000, () => socket.destroy(new Error('no answer within 10 s')))
    socket.on('data', (chunk: string) => { data += chunk })
    socket.on('error', reject)
    socket.on('close', () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1] ?? 0)))
  })
}

let redis: TestRedis
let op: TestProvider
let app: Recorder
let gateway: TestGateway
let bob = ''
const fronts: Partial<Record<FrontKind, FrontProxy & { port: number }>> = {}

beforeAll(async () => {
  redis = await startRedis()
  app = await startRecorder()
  const server = await reserveBaseUrl()
  op = await startOidcProvider([{ client_id: 'fa', client_secret: 'fa-secret', redirect_uris: [`${server.baseUrl}/oauth/authorized/demo/`] }])
  gateway = await startGateway({
    server: { ...server, trustProxy: ['127.0.0.1'] },
    store: { type: 'redis', url: redis.url },
    providers: { demo: oidcClient(op.issuer, 'fa', 'fa-secret', 'openid email groups') },
    routes: [],
    // Admins may do anything on payroll; everyone else may only read.
    forwardAuth: { allowedRedirectHosts: [PAYROLL], hosts: { [PAYROLL]: { allow: [{ groups: ['admins'] }, { methods: ['GET', 'HEAD'] }] } } },
  })
  const browser = new Browser()
  expect((await browser.navigate(`${gateway.url}/oauth/login/demo/?next=/oauth/`, { login: 'bob' })).status).toBe(200)
  bob = browser.cookieHeader(`${gateway.url}/`)!.split('; ').find((cookie) => cookie.startsWith('gw_session='))!
  for (const kind of FRONTS.filter((name) => !missing.includes(name))) {
    const port = await freePort()
    const front = await startFrontProxy(kind, { port, gateway: `127.0.0.1:${gateway.config.server.port}`, upstream: new URL(app.url).host, host: PAYROLL })
    fronts[kind] = Object.assign(front, { port })
  }
})

afterAll(async () => {
  await Promise.all(Object.values(fronts).map(async (front) => await front.stop()))
  await gateway?.close()
  await Promise.all([op?.close(), app?.close()])
  await redis?.release()
})

describe.each(FRONTS)('the docs\' %s snippet and a host rule on methods (bob may only read payroll)', (kind) => {
  it.skipIf(missing.includes(kind))('lets bob read (GET) payroll', async () => {
    const before = app.methods.length
    expect(await send(fronts[kind]!.port, 'GET', [`Cookie: ${bob}`])).toBe(200)
    expect(app.methods.slice(before)).toEqual(['GET'])
  })

  it.skipIf(missing.includes(kind)).each([
    ['DELETE', 'GET'],
    ['POST', 'GET'],
    ['PUT', 'head'],
    ['PATCH', 'GET'],
  ])('never lets bob\'s %s through by his own X-Forwarded-Method: %s', async (method, claimed) => {
    const before = app.methods.length
    const status = await send(fronts[kind]!.port, method, [`Cookie: ${bob}`, `X-Forwarded-Method: ${claimed}`])
    expect(app.methods.slice(before)).toEqual([])
    expect(status).toBe(403)
  })
})
