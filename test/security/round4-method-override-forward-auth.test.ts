// Security round 4, through forward-auth: the docs' nginx and Caddy files in front of an application
// that honours `_method`, whose forwardAuth.hosts rule denies DELETE.
// Forward-auth never sees the body, but it sees the original URI and the client's headers: a POST
// whose `?_method=` or method-override header names DELETE is refused before the application sees
// it; one naming an allowed method passes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { frontBinary, startFrontProxy, type FrontKind, type FrontProxy } from '../helpers/front-proxy.js'
import { sessionCookie, startForwardAuthGateway, type TestGateway } from '../helpers/gateway.js'
import type { TestProvider } from '../helpers/oidc.js'
import { startOverrideUpstream, type OverrideUpstream } from '../helpers/override-upstream.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { rawRequest } from '../helpers/raw-http.js'

const ADMIN = 'admin.example.com'
const FRONTS: FrontKind[] = ['nginx', 'caddy']
const missing = FRONTS.filter((kind) => !frontBinary(kind))
if (missing.length > 0) console.warn(`!!! ${missing.join(' and ')} not installed: the _method tests behind ${missing.join(' and ')} are SKIPPED (.ci/run installs them) !!!`)

/** A form POST of `_method`-free `a=1` to `target` through `port` as admin.example.com, with these header lines; the status (0: no answer). */
async function post (port: number, target: string, lines: string[]): Promise<number> {
  return (await rawRequest(port, target, ['Content-Type: application/x-www-form-urlencoded', ...lines], { method: 'POST', host: ADMIN, body: 'a=1' })).status
}

let redis: TestRedis
let op: TestProvider
let app: OverrideUpstream
let gateway: TestGateway
let session: string

beforeAll(async () => {
  redis = await startRedis()
  app = await startOverrideUpstream()
  ;({ gateway, op } = await startForwardAuthGateway(redis.url, {
    forwardAuth: { allowedRedirectHosts: [ADMIN], hosts: { [ADMIN]: { deny: [{ methods: ['DELETE'] }] } } },
  }))
  session = await sessionCookie(gateway, 'alice')
})

afterAll(async () => {
  await gateway?.close()
  await Promise.all([op?.close(), app?.close()])
  await redis?.release()
})

describe.each(FRONTS)('the docs\' %s snippet, a host whose rules deny DELETE', (kind) => {
  let front: FrontProxy | undefined
  let port = 0

  beforeAll(async () => {
    if (missing.includes(kind)) return
    front = await startFrontProxy(kind, { gateway: `127.0.0.1:${gateway.config.server.port}`, upstream: new URL(app.url).host, host: ADMIN })
    port = front.port
  })

  afterAll(async () => {
    await front?.stop()
  })

  /** The status, and the method the application acted on (undefined: not reached). */
  async function through (target: string, lines: string[] = []): Promise<{ status: number, acted: string | undefined }> {
    const before = app.handled.length
    const status = await post(port, target, [`Cookie: ${session}`, ...lines])
    return { status, acted: app.handled.slice(before)[0]?.method }
  }

  it.skipIf(missing.includes(kind)).each([
    ['/pay?_method=DELETE', []],
    ['/pay?x=1&_method=delete', []],
    ['/pay?_%6Dethod=DELETE', []],
    ['/pay', ['X-HTTP-Method-Override: DELETE']],
    ['/pay', ['X-Method-Override: delete']],
  ] as Array<[string, string[]]>)('refuses a POST to %s %j before the application sees it', async (target, lines) => {
    expect(await through(target, lines)).toEqual({ status: 403, acted: undefined })
  })

  it.skipIf(missing.includes(kind))('admits a POST whose ?_method= names an allowed method, and a plain POST', async () => {
    expect(await through('/pay?_method=PATCH')).toEqual({ status: 200, acted: 'PATCH' })
    expect(await through('/pay')).toEqual({ status: 200, acted: 'POST' })
  })
})
