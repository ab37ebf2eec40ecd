// Tracing end to end: a real gateway (Redis, oidc-provider, an echo upstream) exporting to a real
// OTLP/HTTP receiver. The span tree of a sign-in and a proxied request, one traceparent upstream
// (the gateway's), no secret in any byte the collector gets; the OTEL_* variables; sampling; a
// collector that is down or stuck; hostile incoming trace context; and, off, nothing loaded at all.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { TracingEnvError, tracingSettings } from '../../src/ops/tracing-settings.js'
import type { TracingConfig } from '../../src/config/types.js'
import { Browser } from '../helpers/browser.js'
import { startGateway, startGatewayWithProvider, type TestGateway } from '../helpers/gateway.js'
import { refusedUrl, waitFor } from '../helpers/net.js'
import { Children } from '../helpers/processes.js'
import { rawRequest } from '../helpers/raw-http.js'
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'
import { stringify } from 'yaml'

let redis: TestRedis
let upstream: Upstream
const children = new Children()

beforeAll(async () => {
  redis = await startRedis()
  upstream = await startUpstream()
})
afterAll(async () => {
  await children.end()
  await upstream?.close()
  await redis?.release()
})

const CONFIG: TracingConfig = { otlp: undefined, serviceName: 'oauth-gateway', sampleRatio: 1 }

describe('tracing settings', () => {
  it.each([
    ['off with neither', CONFIG, {}, undefined],
    ['tracing.otlp', { ...CONFIG, otlp: 'http://c:4318' }, {}, 'http://c:4318/v1/traces'],
    ['tracing.otlp over the variables', { ...CONFIG, otlp: 'http://c:4318' }, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://env:4318' }, 'http://c:4318/v1/traces'],
    ['the base variable, /v1/traces added', CONFIG, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://env:4318/' }, 'http://env:4318/v1/traces'],
    ['a base with a path', CONFIG, { OTEL_EXPORTER_OTLP_ENDPOINT: 'https://env/otlp' }, 'https://env/otlp/v1/traces'],
    ['the traces variable as it is, over the base', CONFIG, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://base:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t:4318/custom' }, 'http://t:4318/custom'],
    ['blank variables count as unset', CONFIG, { OTEL_EXPORTER_OTLP_ENDPOINT: '  ', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '' }, undefined],
    ['OTEL_SDK_DISABLED=true turns it off', { ...CONFIG, otlp: 'http://c:4318' }, { OTEL_SDK_DISABLED: 'TRUE' }, undefined],
    ['OTEL_SDK_DISABLED=false leaves it on', CONFIG, { OTEL_SDK_DISABLED: 'false', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://env:4318' }, 'http://env:4318/v1/traces'],
  ])('%s', (_name, config, env, tracesUrl) => {
    expect(tracingSettings(config, env)?.tracesUrl).toBe(tracesUrl)
  })

  it('takes OTEL_SERVICE_NAME over tracing.serviceName, and the configured ratio', () => {
    expect(tracingSettings({ ...CONFIG, otlp: 'http://c', sampleRatio: 0.5 }, { OTEL_SERVICE_NAME: 'edge' })).toEqual({ tracesUrl: 'http://c/v1/traces', serviceName: 'edge', sampleRatio: 0.5, exportTimeoutMs: 10_000 })
    expect(tracingSettings({ ...CONFIG, otlp: 'http://c', serviceName: 'mine' }, {})?.serviceName).toBe('mine')
  })

  it.each([
    ['the default', {}, 10_000],
    ['OTEL_EXPORTER_OTLP_TIMEOUT', { OTEL_EXPORTER_OTLP_TIMEOUT: '2500' }, 2500],
    ['the traces variable over the general one', { OTEL_EXPORTER_OTLP_TIMEOUT: '2500', OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: ' 700 ' }, 700],
    ['a blank traces variable counts as unset', { OTEL_EXPORTER_OTLP_TIMEOUT: '2500', OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: '' }, 2500],
  ])('takes an export timeout from %s', (_name, env, ms) => {
    expect(tracingSettings({ ...CONFIG, otlp: 'http://c' }, env)?.exportTimeoutMs).toBe(ms)
  })

  it('reads no timeout while tracing is off: a malformed one does not count then', () => {
    expect(tracingSettings(CONFIG, { OTEL_EXPORTER_OTLP_TIMEOUT: 'soon' })).toBeUndefined()
  })

  it.each([
    ['OTEL_EXPORTER_OTLP_TIMEOUT', '0', 'OTEL_EXPORTER_OTLP_TIMEOUT: must be a number of milliseconds from 1 to 120000, got "0"'],
    ['OTEL_EXPORTER_OTLP_TIMEOUT', '10s', 'OTEL_EXPORTER_OTLP_TIMEOUT: must be a number of milliseconds from 1 to 120000, got "10s"'],
    ['OTEL_EXPORTER_OTLP_TRACES_TIMEOUT', '-5', 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: must be a number of milliseconds from 1 to 120000, got "-5"'],
    ['OTEL_EXPORTER_OTLP_TRACES_TIMEOUT', '1e9', 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: must be a number of milliseconds from 1 to 120000, got "1e9"'],
    ['OTEL_EXPORTER_OTLP_TIMEOUT', '999999', 'OTEL_EXPORTER_OTLP_TIMEOUT: must be a number of milliseconds from 1 to 120000, got "999999"'],
  ])('refuses %s=%s naming the variable', (name, value, message) => {
    expect(() => tracingSettings({ ...CONFIG, otlp: 'http://c' }, { [name]: value })).toThrow(new TracingEnvError(message))
  })

  it.each([
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'collector:4318', 'OTEL_EXPORTER_OTLP_ENDPOINT: must be an http or https URL, got "collector:4318"'],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'not a url', 'OTEL_EXPORTER_OTLP_ENDPOINT: must be an http or https URL, got "not a url"'],
    ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'grpc://c:4317', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: must be an http or https URL, got "grpc://c:4317"'],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'http://c:4318/?token=x', 'OTEL_EXPORTER_OTLP_ENDPOINT: must have no query or fragment, got "http://c:4318/?token=***"'],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'http://u:hunter2@c:4318', 'OTEL_EXPORTER_OTLP_ENDPOINT: must not carry a user name or password (they would be logged), got "http://u:***@c:4318"; give the collector\'s token in OTEL_EXPORTER_OTLP_HEADERS'],
  ])('refuses %s=%s naming the variable', (name, value, message) => {
    expect(() => tracingSettings(CONFIG, { [name]: value })).toThrow(new TracingEnvError(message))
  })

  it('refuses a malformed variable at --check, naming it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'gw-tracing-'))
    const file = join(dir, 'gateway.yaml')
    await writeFile(file, 'routes: []\n')
    const env = { ...process.env, OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }
    const check = spawnSync(process.execPath, ['dist/src/main.js', '--check', '--config', file], { env, encoding: 'utf8' })
    expect(check.status).toBe(1)
    expect(check.stderr).toContain('OTEL_EXPORTER_OTLP_ENDPOINT: must be an http or https URL, got "collector:4318"')
  })
})

/**
 * Records, in a child process, every module URL resolved while a gateway is built and serves one
 * request: a resolve hook in the loading thread (module.registerHooks, Node 22.15 and later) that
 * keeps each URL in a list. The off-thread `module.register` hooks that did it before cost 10 s of
 * the suite: every resolve of a few thousand crossed to the hooks' thread and appended to a file.
 */
const RECORDER = `
import { registerHooks } from 'node:module'
globalThis.resolvedUrls = []
registerHooks({ resolve (specifier, context, next) { const result = next(specifier, context); globalThis.resolvedUrls.push(result.url); return result } })
`
const SERVE_ONE = `
const { parseConfig } = await import('./dist/src/config/config.js')
await import('./dist/src/main.js')
const { buildGateway } = await import('./dist/src/gateway.js')
const { Writable } = await import('node:stream')
const config = parseConfig('session: { secret: test-session-secret-0123456789-abcdefghij }\\nroutes: [{ path: /pub/, upstream: "http://127.0.0.1:9", auth: none }]', {}, 'test.yaml')
const app = await buildGateway(config, { logStream: new Writable({ write (_c, _e, done) { done() } }) })
await app.ready()
const answer = await app.inject({ url: '/readyz' })
await app.close()
const resolvedUrls = globalThis.resolvedUrls
const packages = resolvedUrls.map((url) => /\\/node_modules\\/(@opentelemetry\\/[^/]+|@fastify\\/otel)\\//.exec(url)?.[1]).filter(Boolean)
process.stdout.write(JSON.stringify({ status: answer.statusCode, packages: [...new Set(packages)].sort(), seen: resolvedUrls.length }))
`

describe('tracing off', () => {
  async function loadedModules (env: Record<string, string>): Promise<{ status: number, packages: string[], seen: number }> {
    const { OTEL_EXPORTER_OTLP_ENDPOINT: _a, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: _b, ...rest } = process.env
    // Asynchronously, so that the two processes (tracing off, tracing on) load side by side.
    const child = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', '--import', `data:text/javascript,${encodeURIComponent(RECORDER)}`, '--input-type=module', '-e', SERVE_ONE], { env: { ...rest, ...env } })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => { stdout += chunk })
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => { stderr += chunk })
    await new Promise((resolve) => child.on('close', resolve))
    expect(stderr).toBe('')
    return JSON.parse(stdout) as { status: number, packages: string[], seen: number }
  }

  it('loads no OpenTelemetry SDK, exporter or instrumentation (and the recorder sees them when it is on)', async () => {
    // Tracing on exports to a collector that answers: to a refused one, the exporter's retries kept
    // the process alive for 8 s after its one request.
    const receiver = await startOtlpReceiver()
    const [off, on] = await Promise.all([loadedModules({}), loadedModules({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url })]).finally(async () => { await receiver.close() })
    expect(off.status).toBe(200)
    expect(off.seen).toBeGreaterThan(50)
    // prom-client 15 itself requires @opentelemetry/api (the API only, for its exemplars), with or without tracing.
    expect(off.packages.filter((name) => name !== '@opentelemetry/api')).toEqual([])
    expect(on.packages).toEqual(expect.arrayContaining(['@fastify/otel', '@opentelemetry/sdk-trace', '@opentelemetry/exporter-trace-otlp-http', '@opentelemetry/instrumentation-undici']))
  })

  it('passes a client\'s traceparent and tracestate upstream as they came', async () => {
    const gateway = await startGateway({ store: { type: 'memory' }, routes: [{ path: '/pub/', upstream: upstream.url, auth: 'none' }] })
    try {
      const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'
      const response = await rawRequest(port(gateway), '/pub/off', [`traceparent: ${traceparent}`, 'tracestate: vendor=1'])
      expect(response.status).toBe(200)
      expect(seenUpstream('/pub/off')).toMatchObject({ traceparent, tracestate: 'vendor=1' })
    } finally {
      await gateway.close()
    }
  })
})

/**
 * The headers the upstream got for `path`. Requests that carry trace context go on a raw socket:
 * the undici instrumentation is process-wide, so this test process's own fetch would get spans and
 * a traceparent of its own added (the gateway's process has no such client).
 */
function port (gateway: TestGateway): number {
  return Number(new URL(gateway.url).port)
}

function seenUpstream (path: string): Record<string, string | string[] | undefined> {
  const seen = upstream.seen.filter((request) => request.url === path)
  expect(seen, `one upstream request for ${path}`).toHaveLength(1)
  return seen[0]!.headers
}

/** The spans whose parent is `span`. */
function childrenOf (spans: ReceivedSpan[], span: ReceivedSpan): ReceivedSpan[] {
  return spans.filter((other) => other.parentSpanId === span.spanId)
}

/** The request span of `path` (its `url.path`). */
function requestSpan (spans: ReceivedSpan[], path: string): ReceivedSpan {
  const found = spans.filter((span) => span.attributes['fastify.root'] === '@fastify/otel' && span.attributes['url.path'] === path)
  expect(found, `one request span for ${path}`).toHaveLength(1)
  return found[0]!
}

describe('tracing on', () => {
  let receiver: OtlpReceiver
  beforeAll(async () => { receiver = await startOtlpReceiver() })
  afterAll(async () => { await receiver?.close() })

  it('exports the request, store, provider and upstream spans as one tree, with no secret in any byte', async () => {
    const { gateway, op, close } = await startGatewayWithProvider({
      store: { type: 'redis', url: redis.url },
      // No session cache: the proxied request reads the store, and that read is its span.
      session: { cacheTtl: 0 },
      routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }],
      tracing: { otlp: receiver.url, serviceName: 'edge-test' },
    })
    const tokens: string[] = []
    // Every token the provider hands the gateway (access, ID, refresh), from its token answers.
    op.provider.on('grant.success', (ctx) => {
      for (const value of Object.values(ctx.body as Record<string, unknown>)) if (typeof value === 'string' && value.length > 20) tokens.push(value)
    })
    try {
      const browser = new Browser()
      const signedIn = await browser.navigate(`${gateway.url}/oauth/login/demo/?next=/app/x`, { login: 'alice' })
      expect(signedIn.status).toBe(200)
      const callback = new URL(browser.hops.find((hop) => hop.url.includes('/oauth/authorized/demo/'))!.url)
      const incoming = { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7' }
      const cookie = browser.cookies.get('gw_session')!.value
      const response = await rawRequest(port(gateway), '/app/y?q=TheQueryValue42&x=1', ['User-Agent: AgentOfChaos/1.0', `Cookie: gw_session=${cookie}`, `traceparent: 00-${incoming.traceId}-${incoming.spanId}-01`, 'tracestate: vendor=kept'])
      expect(response.status).toBe(200)
      await gateway.app.tracing!.forceFlush()

      const spans = receiver.spans
      expect(new Set(spans.map((span) => span.service))).toEqual(new Set(['edge-test']))
      // The callback: its store spans and the token call under one request span, one trace.
      const authorized = requestSpan(spans, '/oauth/authorized/demo/')
      expect(authorized.name).toMatch(/^GET \/oauth\/authorized\//)
      expect(authorized.attributes['http.response.status_code']).toBe(302)
      const underCallback = childrenOf(spans, authorized)
      expect(underCallback.every((span) => span.traceId === authorized.traceId)).toBe(true)
      const tokenCall = underCallback.find((span) => span.name === 'POST')
      expect(tokenCall?.attributes['url.full']).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/token$/)
      expect(underCallback.map((span) => span.name)).toEqual(expect.arrayContaining(['store.set']))
      expect(underCallback.find((span) => span.name === 'store.set')?.attributes).toEqual({ 'db.system.name': 'redis', 'db.operation.name': 'set' })

      // The proxied request continues the client's trace; the upstream got the gateway's span, once.
      const proxied = requestSpan(spans, '/app/y')
      expect(proxied.traceId).toBe(incoming.traceId)
      expect(proxied.parentSpanId).toBe(incoming.spanId)
      expect(proxied.attributes['http.route']).toBe('/app/*')
      const underProxied = childrenOf(spans, proxied)
      expect(underProxied.some((span) => span.name.startsWith('store.'))).toBe(true)
      const upstreamCall = underProxied.find((span) => span.name === 'GET')!
      expect(upstreamCall.attributes['url.full']).toBe(`${upstream.url}/app/y`)
      expect(upstreamCall.attributes['url.query']).toBeUndefined()
      expect(Object.keys(upstreamCall.attributes).filter((key) => /header|user_agent/.test(key))).toEqual([])
      const seen = seenUpstream('/app/y?q=TheQueryValue42&x=1')
      expect(seen.traceparent).toBe(`00-${incoming.traceId}-${upstreamCall.spanId}-01`)
      expect(seen.tracestate).toBe('vendor=kept')

      // Nothing secret in what the collector received.
      const received = Buffer.concat(receiver.bodies).toString()
      const accessToken = String(seen.authorization).replace(/^Bearer /, '')
      const secrets = [
        accessToken, ...tokens, cookie,
        callback.searchParams.get('code')!, callback.searchParams.get('state')!, 'TheQueryValue42', 'x=1', 'AgentOfChaos',
      ]
      expect(tokens.length).toBeGreaterThan(0)
      for (const secret of secrets) {
        expect(secret.length).toBeGreaterThan(2)
        expect(received.includes(secret), `a secret reached the collector: ${secret.slice(0, 12)}...`).toBe(false)
      }
      expect(received).not.toMatch(/authorization|cookie/i)
    } finally {
      await close()
    }
  })

  it('reads the OTEL_* variables when gateway.yaml has no tracing.otlp', async () => {
    const gateway = await startGateway({ store: { type: 'memory' }, routes: [{ path: '/pub/', upstream: upstream.url, auth: 'none' }] }, {
      deps: { env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: 'from-env' } },
    })
    try {
      expect((await fetch(`${gateway.url}/pub/env`)).status).toBe(200)
      await gateway.app.tracing!.forceFlush()
      expect(requestSpan(receiver.spans, '/pub/env').service).toBe('from-env')
    } finally {
      await gateway.close()
    }
  })

  it('with sampleRatio 0 records no trace begun here, but follows a caller\'s sampled one', async () => {
    const gateway = await startGateway({ store: { type: 'memory' }, routes: [{ path: '/pub/', upstream: upstream.url, auth: 'none' }], tracing: { otlp: receiver.url, sampleRatio: 0 } })
    try {
      expect((await rawRequest(port(gateway), '/pub/unsampled')).status).toBe(200)
      // Not recorded, still propagated: the upstream can tell it was not sampled.
      expect(seenUpstream('/pub/unsampled').traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/)
      expect((await rawRequest(port(gateway), '/pub/followed', ['traceparent: 00-11111111111111111111111111111111-2222222222222222-01'])).status).toBe(200)
      await gateway.app.tracing!.forceFlush()
      expect(receiver.spans.filter((span) => span.attributes['url.path'] === '/pub/unsampled')).toEqual([])
      expect(requestSpan(receiver.spans, '/pub/followed').traceId).toBe('11111111111111111111111111111111')
    } finally {
      await gateway.close()
    }
  })

  const VALID_ID = '0af7651916cd43dd8448eb211c80319c'
  const VALID = `traceparent: 00-${VALID_ID}-b7ad6b7169203331-01`
  it.each([
    ['garbage', ['traceparent: not a traceparent']],
    ['an empty one', ['traceparent: ']],
    ['version ff', [`traceparent: ff-${VALID_ID}-b7ad6b7169203331-01`]],
    ['an all-zero trace id', ['traceparent: 00-00000000000000000000000000000000-b7ad6b7169203331-01']],
    ['an all-zero parent id', [`traceparent: 00-${VALID_ID}-0000000000000000-01`]],
    ['upper-case hex', [`traceparent: 00-${VALID_ID.toUpperCase()}-B7AD6B7169203331-01`]],
    ['version 00 with more fields', [`${VALID}-extra`]],
    ['a short trace id', [`traceparent: 00-${VALID_ID.slice(2)}-b7ad6b7169203331-01`]],
    ['non-hex ids', ['traceparent: 00-zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz-b7ad6b7169203331-01']],
    ['8 KiB of it', [`${VALID}${'-'.repeat(8000)}`]],
    ['latin-1 bytes', [`${VALID}\u00ff\u00e9`]],
    ['two of them', [VALID, `traceparent: 00-${VALID_ID}-b7ad6b7169203332-01`]],
    ['a hundred of them', Array.from({ length: 100 }, () => VALID)],
    ['a valid one with a hostile tracestate', [VALID, `tracestate: ${'k=v,'.repeat(1500)}=,,=x,${'a'.repeat(300)}=1`]],
    ['a valid one with many tracestate headers', [VALID, ...Array.from({ length: 100 }, (_, i) => `tracestate: k${i}=v`)]],
  ])('answers a request with %s, never an error, and sends one well-formed traceparent upstream', async (name, headers) => {
    const gateway = await startGateway({ store: { type: 'memory' }, routes: [{ path: '/pub/', upstream: upstream.url, auth: 'none' }], tracing: { otlp: receiver.url } })
    try {
      const path = `/pub/hostile-${name.replace(/\W+/g, '-')}`
      expect((await rawRequest(port(gateway), path, headers)).status).toBe(200)
      const seen = seenUpstream(path)
      expect(seen.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/)
      await gateway.app.tracing!.forceFlush()
      const span = requestSpan(receiver.spans, path)
      const continued = name.startsWith('a valid one')
      // A malformed one starts a new trace; the upstream's traceparent names the gateway's span either way.
      expect(span.traceId === VALID_ID).toBe(continued)
      expect(span.parentSpanId === undefined).toBe(!continued)
      expect(String(seen.traceparent).slice(3, 35)).toBe(span.traceId)
      expect(String(seen.tracestate ?? '').length).toBeLessThanOrEqual(512)
    } finally {
      await gateway.close()
    }
  })
})

describe('tracing with a collector that does not answer', () => {
  it('still answers every request when the collector is down, and says so once', async () => {
    // Each export gives up at its timeout, before the exporter's first retry (a second or so later).
    const env = { OTEL_EXPORTER_OTLP_TIMEOUT: '300' }
    const gateway = await startGateway({ store: { type: 'memory' }, routes: [{ path: '/pub/', upstream: upstream.url, auth: 'none' }], tracing: { otlp: await refusedUrl() } }, { deps: { env } })
    try {
      for (let batch = 0; batch < 3; batch++) {
        for (let i = 0; i < 5; i++) expect((await fetch(`${gateway.url}/pub/down-${i}`)).status).toBe(200)
        // The export fails: forceFlush says so, and nothing else may.
        await gateway.app.tracing!.forceFlush().catch(() => {})
      }
      expect(gateway.logs.filter((line) => line.includes('the collector does not take spans'))).toHaveLength(1)
    } finally {
      await gateway.close()
    }
  })

  it('still answers every request when the collector hangs, and closes within its bound', async () => {
    const stuck = await startOtlpReceiver({ hang: true })
    const gateway = await startGateway({ store: { type: 'memory' }, routes: [{ path: '/pub/', upstream: upstream.url, auth: 'none' }], tracing: { otlp: stuck.url } })
    try {
      for (let i = 0; i < 5; i++) expect((await fetch(`${gateway.url}/pub/hung-${i}`)).status).toBe(200)
      // An export is under way and will not end: closing waits for it no longer than its bound.
      gateway.app.tracing!.forceFlush().catch(() => {})
      await waitFor(async () => stuck.requests.length > 0, 5000, 'an export to the stuck collector')
      const started = performance.now()
      await gateway.app.tracing!.shutdown(200)
      expect(performance.now() - started).toBeLessThan(2000)
      expect(stuck.requests.some((request) => request.path === '/v1/traces' && request.contentType === 'application/json')).toBe(true)
    } finally {
      await gateway.close()
      await stuck.close()
    }
  })
})

/** The port a gateway process says it listens on (its own log line), or why it exited first: no clock. */
async function listeningPort (child: ChildProcess, exited: Promise<number | null>): Promise<number> {
  let output = ''
  const listening = new Promise<number>((resolve) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString()
      const port = /Server listening at http:\/\/127\.0\.0\.1:(\d+)/.exec(output)?.[1]
      if (port !== undefined) resolve(Number(port))
    })
  })
  return await Promise.race([listening, exited.then((code) => { throw new Error(`the gateway exited (${code}) before it listened:\n${output}`) })])
}

describe('tracing in the CLI', () => {
  it('sends the spans still queued when SIGTERM comes, then exits 0', async () => {
    const receiver = await startOtlpReceiver()
    try {
      const dir = await mkdtemp(join(tmpdir(), 'gw-tracing-'))
      const file = join(dir, 'gateway.yaml')
      // Port 0: the gateway takes a port from the OS itself and says which (no port freed for it
      // beforehand that another socket could take meanwhile).
      await writeFile(file, stringify({ server: { host: '127.0.0.1', port: 0 }, session: { secret: 'test-session-secret-0123456789-abcdefghij' }, store: { type: 'memory' }, routes: [{ path: '/pub/', upstream: upstream.url, auth: 'none' }] }))
      const env = { ...process.env, OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '' }
      const child = children.add(spawn(process.execPath, ['dist/src/main.js', '--config', file], { env, stdio: ['ignore', 'pipe', 'pipe'] }))
      const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
      const port = await listeningPort(child, exited)
      expect((await rawRequest(port, '/pub/cli')).status).toBe(200)
      // The batch is sent every 5 s: right away, only a flush at shutdown can have sent it.
      expect(receiver.spans.filter((span) => span.attributes['url.path'] === '/pub/cli')).toEqual([])
      child.kill('SIGTERM')
      expect(await exited).toBe(0)
      expect(receiver.spans.some((span) => span.attributes['url.path'] === '/pub/cli')).toBe(true)
    } finally {
      await receiver.close()
    }
  })
})
