// The `metrics` and `tracing` sections.
import { isIP } from 'node:net'
import type { MetricsConfig, ServerConfig, TracingConfig } from '../types.js'
import { Issues, checkUrl, describe } from '../problems.js'
import type { Sections } from './values.js'

const WILDCARD_HOSTS = ['0.0.0.0', '::']

/** `metrics.listen`: "host:port" (IPv6 in brackets), on another address than the public port. */
export function validateMetrics (issues: Issues, raw: Sections['metrics'], server: ServerConfig): MetricsConfig {
  const text = raw.listen?.trim()
  if (text === undefined || text === '') return { listen: undefined }
  const match = /^(\[[0-9A-Fa-f:.]+\]|[^\s:[\]/]+):(\d{1,5})$/.exec(text)
  const host = match?.[1]?.replace(/^\[(.*)\]$/, '$1') ?? ''
  const port = Number(match?.[2])
  if (!match || port < 1 || port > 65535 || (match[1]!.startsWith('[') && isIP(host) !== 6)) {
    issues.add(['metrics', 'listen'], `must be "host:port" such as 127.0.0.1:9090 or [::1]:9090, got ${describe(text)}`)
    return { listen: undefined }
  }
  if (port === server.port && (host === server.host || WILDCARD_HOSTS.includes(host) || WILDCARD_HOSTS.includes(server.host))) {
    issues.add(['metrics', 'listen'], `is the gateway's own address (server.host and server.port); give /metrics another port, such as ${host.includes(':') ? `[${host}]` : host}:9090`)
  }
  return { listen: { host, port } }
}

/**
 * `tracing.otlp`: an http(s) URL without credentials (they would reach logs; the exporter reads
 * OTEL_EXPORTER_OTLP_HEADERS for a token), query or fragment.
 */
export function validateTracing (issues: Issues, raw: Sections['tracing']): TracingConfig {
  const settings = { otlp: undefined, serviceName: raw.serviceName.trim(), sampleRatio: raw.sampleRatio }
  const text = raw.otlp?.trim()
  if (text === undefined || text === '') return settings
  const at = ['tracing', 'otlp']
  if (checkUrl(issues, at, text, ['http', 'https']) === undefined) return settings
  const url = new URL(text)
  if (url.username !== '' || url.password !== '') {
    issues.add(at, `must not carry a user name or password (they would be logged), got ${describe(text)}`, 'give the collector\'s token in OTEL_EXPORTER_OTLP_HEADERS, such as Authorization=Bearer%20<token>')
    return settings
  }
  if (url.search !== '' || url.hash !== '') {
    issues.add(at, `must have no query or fragment, got ${describe(text)}`)
    return settings
  }
  return { ...settings, otlp: text.replace(/\/+$/, '') }
}
