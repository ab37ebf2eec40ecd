// Whether this process traces, and where spans go: `tracing:` in gateway.yaml, else the standard
// OpenTelemetry variables. Nothing here imports OpenTelemetry: with tracing off, the gateway never
// loads it (src/ops/tracing.ts is imported only when {@link tracingSettings} says so).
// @see https://opentelemetry.io/docs/specs/otel/protocol/exporter/ (the OTEL_EXPORTER_OTLP_* variables)
// @see https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/
import { describe } from '../config/problems.js'
import type { TracingConfig } from '../config/types.js'

/** What the tracer is started with. */
export interface TracingSettings {
  /** The full URL spans are POSTed to (`.../v1/traces`). */
  tracesUrl: string
  serviceName: string
  /** 0 to 1: the share of root traces recorded. */
  sampleRatio: number
  /** How long one export may take, its retries included, before it is given up (ms). */
  exportTimeoutMs: number
}

/** The specification's default for OTEL_EXPORTER_OTLP_TIMEOUT. */
const EXPORT_TIMEOUT_MS = 10_000
/** An export timeout past this would hold a shutdown longer than any orchestrator waits. */
const EXPORT_TIMEOUT_MAX_MS = 120_000

/**
 * Runs `fn` inside a span named `name` when a traced request is under way; what the store's and
 * other layers' spans need, without their importing OpenTelemetry.
 */
export interface Spans {
  around<T> (name: string, attributes: Readonly<Record<string, string | number>>, fn: () => Promise<T>): Promise<T>
}

/** A malformed OTEL_* variable: the gateway refuses to start (and `--check` fails) naming it. */
export class TracingEnvError extends Error {
  override readonly name = 'TracingEnvError'
}

/** The variables read, with the value that counts for each (blank counts as unset). */
function read (env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name]?.trim()
  return value === undefined || value === '' ? undefined : value
}

/** `text` as an endpoint URL, or a {@link TracingEnvError} naming `variable`; a password is never echoed (as in gateway.yaml's messages). */
function endpoint (variable: string, text: string): URL {
  const url = URL.parse(text)
  if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:')) throw new TracingEnvError(`${variable}: must be an http or https URL, got ${describe(text)}`)
  if (url.username !== '' || url.password !== '') {
    throw new TracingEnvError(`${variable}: must not carry a user name or password (they would be logged), got ${describe(text)}; give the collector's token in OTEL_EXPORTER_OTLP_HEADERS`)
  }
  if (url.search !== '' || url.hash !== '') throw new TracingEnvError(`${variable}: must have no query or fragment, got ${describe(text)}`)
  return url
}

/**
 * OTEL_EXPORTER_OTLP_TRACES_TIMEOUT, else OTEL_EXPORTER_OTLP_TIMEOUT: milliseconds, a whole number
 * from 1 to 120000 (default 10000).
 * @throws TracingEnvError when the one that counts is not such a number
 */
function exportTimeout (env: NodeJS.ProcessEnv): number {
  const variable = read(env, 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT') !== undefined ? 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT' : 'OTEL_EXPORTER_OTLP_TIMEOUT'
  const text = read(env, variable)
  if (text === undefined) return EXPORT_TIMEOUT_MS
  const ms = /^\d{1,6}$/.test(text) ? Number(text) : NaN
  if (!(ms >= 1 && ms <= EXPORT_TIMEOUT_MAX_MS)) throw new TracingEnvError(`${variable}: must be a number of milliseconds from 1 to ${EXPORT_TIMEOUT_MAX_MS}, got ${describe(text)}`)
  return ms
}

/**
 * Where spans go, or undefined when tracing is off: `tracing.otlp`, else
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the whole URL), else OTEL_EXPORTER_OTLP_ENDPOINT (a base, to
 * which `/v1/traces` is added); OTEL_SDK_DISABLED=true turns it off whatever is set, and
 * OTEL_SERVICE_NAME wins over `tracing.serviceName`; an export's timeout is {@link exportTimeout}'s.
 * @throws TracingEnvError when a variable that counts is not a usable URL or timeout
 */
export function tracingSettings (config: TracingConfig, env: NodeJS.ProcessEnv): TracingSettings | undefined {
  if (read(env, 'OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return undefined
  const serviceName = read(env, 'OTEL_SERVICE_NAME') ?? config.serviceName
  const settings = (tracesUrl: string): TracingSettings => ({ tracesUrl, serviceName, sampleRatio: config.sampleRatio, exportTimeoutMs: exportTimeout(env) })
  if (config.otlp !== undefined) return settings(`${config.otlp}/v1/traces`)
  const traces = read(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT')
  if (traces !== undefined) return settings(endpoint('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', traces).href)
  const base = read(env, 'OTEL_EXPORTER_OTLP_ENDPOINT')
  if (base !== undefined) return settings(`${endpoint('OTEL_EXPORTER_OTLP_ENDPOINT', base).href.replace(/\/+$/, '')}/v1/traces`)
  return undefined
}
