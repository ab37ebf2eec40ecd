// OpenTelemetry traces, imported only when tracing is on (src/gateway.ts): the tracer provider (a
// bounded batch queue to an OTLP/HTTP collector, parent-based ratio sampling), W3C trace context,
// and the maintained instrumentations: @fastify/otel for the request span, undici's diagnostics
// channels for the provider calls and the upstream call (which also carry `traceparent` on). No
// secret reaches an attribute: the request's and outgoing calls' query strings are cut off here,
// and no header is recorded. No error message reaches the collector either (a status code, and an
// error type at most), and only trace context propagates: never a client's `baggage`.
// @see https://www.w3.org/TR/trace-context/
import { FastifyOtelInstrumentation } from '@fastify/otel'
import { context, propagation, SpanKind, SpanStatusCode, trace, type Tracer } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { ExportResultCode, W3CTraceContextPropagator, type ExportResult } from '@opentelemetry/core'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { UndiciInstrumentation, type UndiciRequest } from '@opentelemetry/instrumentation-undici'
import { resourceFromAttributes } from '@opentelemetry/resources'
import { BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler, TracerProvider, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace'
import { ATTR_ERROR_TYPE, ATTR_SERVICE_NAME, ATTR_URL_FULL, ATTR_URL_PATH, ATTR_URL_QUERY, ATTR_USER_AGENT_ORIGINAL } from '@opentelemetry/semantic-conventions'
import type { Logger } from './logger.js'
import type { Spans, TracingSettings } from './tracing-settings.js'

/** Spans waiting for the collector; past this many, new ones are dropped (a collector that is down costs memory up to here, never a request). */
const MAX_QUEUE = 2048
/** How long closing waits for the last spans to reach the collector. */
const FLUSH_AT_CLOSE_MS = 3000
/** A hostile path or name is cut to this many characters in any attribute. */
const MAX_ATTRIBUTE_CHARS = 512

/** What the gateway wires in when tracing is on. */
export interface Tracing {
  /** @fastify/otel's plugin: register it on the root instance before any hook, so every request gets its span. */
  readonly plugin: ReturnType<FastifyOtelInstrumentation['plugin']>
  /** Spans at the session store's interface. */
  readonly spans: Spans
  /** Sends what is queued now (tests). */
  forceFlush (): Promise<void>
  /** Stops recording and sends what is queued, waiting at most `FLUSH_AT_CLOSE_MS` (or `boundMs`). */
  shutdown (boundMs?: number): Promise<void>
}

/**
 * `span` as the collector gets it: its status code without a message, and no events. @fastify/otel's
 * error hook and undici's instrumentation put an error's message in the status (and undici an
 * exception event with the message and stack), and a message may quote anything: a 403 names the
 * person by e-mail, a connect error the address. The gateway records no events of its own. Done
 * here, at the one way out, whoever made the span.
 */
function withoutMessages (span: ReadableSpan): ReadableSpan {
  if (span.status.message === undefined && span.events.length === 0) return span
  return {
    name: span.name,
    kind: span.kind,
    spanContext: () => span.spanContext(),
    parentSpanContext: span.parentSpanContext,
    startTime: span.startTime,
    endTime: span.endTime,
    status: { code: span.status.code },
    attributes: span.attributes,
    links: span.links,
    events: [],
    duration: span.duration,
    ended: span.ended,
    resource: span.resource,
    instrumentationScope: span.instrumentationScope,
    droppedAttributesCount: span.droppedAttributesCount,
    droppedEventsCount: span.droppedEventsCount + span.events.length,
    droppedLinksCount: span.droppedLinksCount,
  }
}

/**
 * The exporter, saying once when the collector stops taking spans (and once when it takes them
 * again) instead of once per batch; what was not taken is dropped, never retried at a request's cost.
 */
class ReportingExporter implements SpanExporter {
  private failing = false

  constructor (private readonly inner: SpanExporter, private readonly log: Logger, private readonly url: string) {}

  export (spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.inner.export(spans.map(withoutMessages), (result) => {
      if (result.code !== ExportResultCode.SUCCESS && !this.failing) {
        this.failing = true
        this.log.warn({ collector: this.url, reason: result.error?.message }, 'tracing: the collector does not take spans; they are dropped until it does (logged once)')
      } else if (result.code === ExportResultCode.SUCCESS && this.failing) {
        this.failing = false
        this.log.info({ collector: this.url }, 'tracing: the collector takes spans again')
      }
      done(result)
    })
  }

  async shutdown (): Promise<void> {
    await this.inner.shutdown()
  }

  async forceFlush (): Promise<void> {
    await this.inner.forceFlush?.()
  }
}

/** `path?query` without its query. */
function pathOnly (target: string): string {
  const query = target.indexOf('?')
  return query === -1 ? target : target.slice(0, query)
}

/**
 * An outgoing call's URL without its query: a provider's userinfo or revocation call, or the
 * upstream request's own query, may carry a token or anything else a user typed. No header either:
 * the upstream request's User-Agent is the client's, text a stranger chose. (Undefined drops an attribute.)
 */
function redactedUrl (request: UndiciRequest): Record<string, string | undefined> {
  const path = pathOnly(request.path)
  return { [ATTR_URL_FULL]: `${request.origin}${path}`, [ATTR_URL_PATH]: path, [ATTR_URL_QUERY]: undefined, [ATTR_USER_AGENT_ORIGINAL]: undefined }
}

/**
 * Context and propagation are process-wide in OpenTelemetry's API: set once (a second gateway in a
 * test process shares them). Trace context only, no W3C Baggage propagator: a client's `baggage` is
 * neither read into the request's context nor written onto outgoing calls (and the header itself is
 * dropped from the upstream request, src/proxy/headers.ts).
 */
function installGlobals (): void {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  propagation.setGlobalPropagator(new W3CTraceContextPropagator())
}

/**
 * Store spans: only inside a traced request (a background ping or subscription is not worth a
 * trace of its own). ioredis has no instrumentation that works for ESM imports without a loader
 * hook, so these are made here, at the store's interface, named after its operation; a key is
 * never an attribute (it derives from a session id, which is a secret).
 */
function storeSpans (tracer: Tracer): Spans {
  return {
    async around (name, attributes, fn) {
      if (trace.getActiveSpan() === undefined) return await fn()
      return await tracer.startActiveSpan(name, { kind: SpanKind.CLIENT, attributes }, async (span) => {
        try {
          return await fn()
        } catch (error) {
          // The error's type only: a message may name a key.
          span.setAttribute(ATTR_ERROR_TYPE, error instanceof Error ? error.name : 'error')
          span.setStatus({ code: SpanStatusCode.ERROR })
          throw error
        } finally {
          span.end()
        }
      })
    },
  }
}

/** Starts tracing as `settings` say; {@link Tracing.shutdown} undoes it. */
export function startTracing (settings: TracingSettings, log: Logger): Tracing {
  installGlobals()
  const exporter = new OTLPTraceExporter({ url: settings.tracesUrl, timeoutMillis: settings.exportTimeoutMs })
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: settings.serviceName }),
    // A caller's sampled traceparent is followed; a trace begun here is kept at the configured ratio.
    sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(settings.sampleRatio) }),
    spanLimits: { attributeValueLengthLimit: MAX_ATTRIBUTE_CHARS },
    spanProcessors: [new BatchSpanProcessor({ exporter: new ReportingExporter(exporter, log, settings.tracesUrl), maxQueueSize: MAX_QUEUE, exportTimeoutMillis: settings.exportTimeoutMs })],
  })
  // Enabled as it is made (it listens on undici's diagnostics channels); its spans go to `provider`.
  const undici = new UndiciInstrumentation({ startSpanHook: redactedUrl })
  undici.setTracerProvider(provider)
  const fastify = new FastifyOtelInstrumentation({
    enabled: false,
    // One span per request, not one per hook: the gateway's hooks are many and small.
    instrumentHooks: false,
    instrumentHandler: false,
    // An exception's stack and message add nothing the log line lacks, and a message may quote input.
    recordExceptions: false,
    requestHook (span, request) {
      // @fastify/otel records the target with its query (`code`, `state`, whatever a client sent).
      span.setAttribute(ATTR_URL_PATH, pathOnly(request.url))
      span.updateName(request.routeOptions.url === undefined ? request.method : `${request.method} ${request.routeOptions.url}`)
    },
  })
  fastify.setTracerProvider(provider)
  fastify.enable()
  return {
    plugin: fastify.plugin(),
    spans: storeSpans(provider.getTracer('oauth-gateway')),
    forceFlush: async () => await provider.forceFlush(),
    async shutdown (boundMs = FLUSH_AT_CLOSE_MS) {
      undici.disable()
      fastify.disable()
      let timer: NodeJS.Timeout | undefined
      const bound = new Promise<void>((resolve) => { timer = setTimeout(resolve, boundMs).unref() })
      await Promise.race([provider.shutdown().catch(() => {}), bound])
      clearTimeout(timer)
    },
  }
}
