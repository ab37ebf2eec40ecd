// A real OTLP/HTTP receiver on a loopback port: takes POST /v1/traces as the JSON the exporter
// sends, keeps every body as it arrived (to search for secrets in) and the spans decoded from it.
import { createServer, type Server } from 'node:http'
import { close, listen } from './net.js'

/** One span as the receiver decoded it: ids in hex, attributes as plain values. */
export interface ReceivedSpan {
  traceId: string
  spanId: string
  parentSpanId: string | undefined
  name: string
  kind: number
  attributes: Record<string, unknown>
  service: unknown
}

export interface OtlpReceiver {
  /** The base URL (`tracing.otlp`). */
  url: string
  /** Every request body, as received. */
  bodies: Buffer[]
  spans: ReceivedSpan[]
  /** Paths and content types of the requests received. */
  requests: Array<{ path: string, contentType: string | undefined }>
  close (): Promise<void>
}

interface OtlpValue { stringValue?: string, intValue?: string | number, boolValue?: boolean, doubleValue?: number, arrayValue?: { values: OtlpValue[] } }
interface OtlpAttribute { key: string, value: OtlpValue }
interface OtlpBody {
  resourceSpans?: Array<{
    resource?: { attributes?: OtlpAttribute[] }
    scopeSpans?: Array<{ spans?: Array<{ traceId: string, spanId: string, parentSpanId?: string, name: string, kind: number, attributes?: OtlpAttribute[] }> }>
  }>
}

function plain (value: OtlpValue): unknown {
  if (value.arrayValue) return value.arrayValue.values.map(plain)
  return value.stringValue ?? value.intValue ?? value.boolValue ?? value.doubleValue
}

function attributesOf (list: OtlpAttribute[] | undefined): Record<string, unknown> {
  return Object.fromEntries((list ?? []).map(({ key, value }) => [key, plain(value)]))
}

function decode (body: OtlpBody): ReceivedSpan[] {
  return (body.resourceSpans ?? []).flatMap((resource) => {
    const service = attributesOf(resource.resource?.attributes)['service.name']
    return (resource.scopeSpans ?? []).flatMap((scope) => (scope.spans ?? []).map((span) => ({
      traceId: span.traceId,
      spanId: span.spanId,
      parentSpanId: span.parentSpanId === '' ? undefined : span.parentSpanId,
      name: span.name,
      kind: span.kind,
      attributes: attributesOf(span.attributes),
      service,
    })))
  })
}

/** `hang`: takes requests and never answers (a collector that is stuck). */
export async function startOtlpReceiver (options: { hang?: boolean } = {}): Promise<OtlpReceiver> {
  const bodies: Buffer[] = []
  const spans: ReceivedSpan[] = []
  const requests: OtlpReceiver['requests'] = []
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      requests.push({ path: req.url ?? '', contentType: req.headers['content-type'] })
      if (options.hang) return
      const body = Buffer.concat(chunks)
      bodies.push(body)
      if (req.method === 'POST' && req.url === '/v1/traces') spans.push(...decode(JSON.parse(body.toString()) as OtlpBody))
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end('{}')
    })
  })
  const url = await listen(server)
  return { url, bodies, spans, requests, close: async () => await close(server) }
}
