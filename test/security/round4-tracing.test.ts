// Security round 4: tracing records no error message, and a client's `baggage` never reaches the
// upstream. A real gateway (Redis, oidc-provider, an echo upstream) exporting to a real OTLP/HTTP
// receiver: alice, refused by a `deny` rule on her e-mail (a 403 whose message names her), and a
// call to an upstream that refuses connections (an error whose message names the address) leave
// spans with an ERROR status and no message, no exception event, and her address in no byte the
// collector gets. With tracing on and off, a client's `baggage` is not forwarded (nor re-made by
// propagation).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { refusedUrl } from '../helpers/net.js'
import { startOidcProvider } from '../helpers/oidc.js'
import { startOtlpReceiver, type OtlpReceiver } from '../helpers/otlp-receiver.js'
import { rawRequest } from '../helpers/raw-http.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

const EMAIL = 'alice@example.test'

let redis: TestRedis
let upstream: Upstream
let receiver: OtlpReceiver

beforeAll(async () => {
  redis = await startRedis()
  upstream = await startUpstream()
  receiver = await startOtlpReceiver()
})
afterAll(async () => {
  await upstream?.close()
  await receiver?.close()
  await redis?.release()
})

function port (gateway: TestGateway): number {
  return Number(new URL(gateway.url).port)
}

/** The spans' status objects as the receiver got them (the helper decodes ids, names and attributes only). */
function statuses (bodies: Buffer[]): Array<{ code?: number, message?: string }> {
  type Body = { resourceSpans?: Array<{ scopeSpans?: Array<{ spans?: Array<{ status?: { code?: number, message?: string } }> }> }> }
  return bodies.flatMap((body) => ((JSON.parse(body.toString()) as Body).resourceSpans ?? [])
    .flatMap((resource) => (resource.scopeSpans ?? []).flatMap((scope) => (scope.spans ?? []).map((span) => span.status ?? {}))))
}

describe('tracing records no error message', () => {
  it('a refusal naming the person and an upstream that refuses connections leave ERROR spans with no message, no exception event, no e-mail', async () => {
    const server = await reserveBaseUrl()
    const op = await startOidcProvider([{ client_id: 'c', client_secret: 's', redirect_uris: [`${server.baseUrl}/oauth/authorized/demo/`] }])
    const gateway = await startGateway({
      server,
      store: { type: 'redis', url: redis.url },
      providers: { demo: oidcClient(op.issuer, 'c', 's', 'openid email') },
      routes: [
        { path: '/app/', upstream: upstream.url, provider: 'demo', deny: [{ emails: [EMAIL] }] },
        { path: '/down/', upstream: await refusedUrl(), auth: 'none' },
      ],
      tracing: { otlp: receiver.url },
    })
    try {
      const browser = new Browser()
      const refused = await browser.navigate(`${gateway.url}/oauth/login/demo/?next=/app/x`, { login: 'alice' })
      expect(refused.status).toBe(403)
      // The answer names her: that message is what a span's status would have carried.
      expect(await refused.text()).toContain(EMAIL)
      expect((await rawRequest(port(gateway), '/down/x', [])).status).toBe(502)
      await gateway.app.tracing!.forceFlush()

      const received = Buffer.concat(receiver.bodies).toString()
      expect(received).toContain('"/app/x"')
      expect(received.includes(EMAIL), 'the e-mail reached the collector').toBe(false)
      expect(received).not.toMatch(/alice@|exception\.message|exception\.stacktrace|ECONNREFUSED 127/)
      const errors = statuses(receiver.bodies).filter((status) => status.code === 2)
      // The 403's request span, the 502's request span and its upstream call: ERROR, and nothing more.
      expect(errors.length).toBeGreaterThanOrEqual(3)
      expect(errors.map((status) => status.message ?? '')).toEqual(errors.map(() => ''))
    } finally {
      await gateway.close()
      await op.close()
    }
  })
})

describe('a client\'s baggage never reaches the upstream', () => {
  it.each([['on', true], ['off', false]])('with tracing %s', async (_name, on) => {
    const gateway = await startGateway({
      store: { type: 'memory' },
      routes: [{ path: '/pub/', upstream: upstream.url, auth: 'none' }],
      ...(on ? { tracing: { otlp: receiver.url } } : {}),
    })
    try {
      const path = `/pub/baggage-${on ? 'on' : 'off'}`
      const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'
      // W3C's, and Jaeger's and OpenTracing's, which their propagators read into the same Baggage.
      const response = await rawRequest(port(gateway), path, [`traceparent: ${traceparent}`, 'baggage: userId=alice,isAdmin=true', 'Baggage: tenant=evil',
        'uberctx-user-id: admin', 'jaeger-baggage: user-id=admin, tenant=acme', 'ot-baggage-tenant: acme', 'UBERCTX_ROLE: admin',
        'Correlation-Context: userId=admin,isAdmin=true', 'correlation_context: tenant=acme', 'sw8-correlation: YWRtaW4=:dHJ1ZQ==',
        'x-honeycomb-trace: 1;trace_id=abc,parent_id=def,context=eyJ1c2VyIjoiYWRtaW4ifQ=='])
      expect(response.status).toBe(200)
      const seen = upstream.seen.filter((request) => request.url === path)
      expect(seen).toHaveLength(1)
      expect(seen[0]!.headers).not.toHaveProperty('baggage')
      expect(JSON.stringify(seen[0]!.headers)).not.toMatch(/isAdmin|tenant=|admin|acme/)
      for (const name of ['uberctx-user-id', 'jaeger-baggage', 'ot-baggage-tenant', 'uberctx_role', 'correlation-context', 'correlation_context', 'sw8-correlation', 'x-honeycomb-trace']) expect(seen[0]!.headers).not.toHaveProperty(name)
    } finally {
      await gateway.close()
    }
  })
})

describe('a client\'s trace context in another format, with tracing on', () => {
  it('never reaches the upstream beside the gateway\'s own (B3, Jaeger, Datadog, Sentry, Google Cloud, .NET, X-Ray, OpenTracing, gRPC, Elastic, New Relic)', async () => {
    const gateway = await startGateway({ store: { type: 'memory' }, routes: [{ path: '/pub/', upstream: upstream.url, auth: 'none' }], tracing: { otlp: receiver.url, sampleRatio: 0 } })
    try {
      const path = '/pub/other-formats'
      const foreign = {
        b3: '80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-d',
        'x-b3-traceid': '80f198ee56343ba864fe8b2a57d3eff7',
        'x-b3-spanid': 'e457b5a2e4d86bd1',
        'x-b3-parentspanid': '05e3ac9a4f6e3b90',
        'x-b3-sampled': '1',
        'x-b3-flags': '1',
        'uber-trace-id': '80f198ee56343ba864fe8b2a57d3eff7:e457b5a2e4d86bd1:0:3',
        'x-datadog-trace-id': '1234567890',
        'x-datadog-parent-id': '987654321',
        'x-datadog-sampling-priority': '2',
        'x-datadog-origin': 'synthetics',
        'x-datadog-tags': '_dd.p.dm=-4',
        'sentry-trace': '80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1',
        'x-cloud-trace-context': '80f198ee56343ba864fe8b2a57d3eff7/1;o=1',
        'request-id': '|4bf92f3577b34da6a3ce929d0e0e4736.00f067aa0ba902b7.',
        'x-amzn-trace-id': 'Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1',
        'ot-tracer-traceid': '80f198ee56343ba8',
        'ot-tracer-spanid': 'e457b5a2e4d86bd1',
        'ot-tracer-sampled': 'true',
        'x-ot-span-context': '80f198ee56343ba8;e457b5a2e4d86bd1;0',
        'grpc-trace-bin': 'AAAKi/GJ5B8dT5WGHZ9XXnQ=',
        'elastic-apm-traceparent': '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
        newrelic: 'eyJ2IjpbMCwxXX0=',
        sw8: '1-MTIz-NDU2-0-c2VydmljZQ==-aW5zdGFuY2U=-L2FwcA==-dGFyZ2V0',
        'x-instana-t': '80f198ee56343ba8',
        'x-instana-s': 'e457b5a2e4d86bd1',
        'x-instana-l': '1',
        'x-dynatrace': 'FW4;129;12345;0;0;0;0;1',
      }
      expect((await rawRequest(port(gateway), path, Object.entries(foreign).map(([name, value]) => `${name}: ${value}`))).status).toBe(200)
      const seen = upstream.seen.filter((request) => request.url === path)
      expect(seen).toHaveLength(1)
      // The gateway's own, unsampled at ratio 0; none of the client's.
      expect(seen[0]!.headers.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/)
      expect(Object.keys(foreign).filter((name) => seen[0]!.headers[name] !== undefined)).toEqual([])
    } finally {
      await gateway.close()
    }
  })
})
