// Prometheus metrics (prom-client), one registry per gateway instance: sign-ins, proxied requests,
// upstream latency, token refreshes, store errors, and the default process metrics.
import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client'

const STATUS_CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx'] as const

export class Metrics {
  readonly registry = new Registry()

  readonly signinsStarted = new Counter({
    name: 'gateway_signins_started_total', help: 'Sign-ins started at /oauth/login/, by provider', labelNames: ['provider'] as const, registers: [this.registry],
  })

  readonly signinsSucceeded = new Counter({
    name: 'gateway_signins_succeeded_total', help: 'Sign-ins that ended with a session, by provider', labelNames: ['provider'] as const, registers: [this.registry],
  })

  readonly signinsFailed = new Counter({
    name: 'gateway_signins_failed_total', help: 'Sign-ins that failed at the callback, by provider and error code', labelNames: ['provider', 'reason'] as const, registers: [this.registry],
  })

  readonly proxiedRequests = new Counter({
    name: 'gateway_proxied_requests_total', help: 'Requests answered on a route, by route and status class', labelNames: ['route', 'status_class'] as const, registers: [this.registry],
  })

  readonly upstreamDuration = new Histogram({
    name: 'gateway_upstream_duration_seconds',
    help: 'Time from sending a request upstream to the end of its response, by route',
    labelNames: ['route'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  })

  readonly refreshes = new Counter({
    name: 'gateway_token_refreshes_total', help: 'Access token refreshes, by provider and result (refreshed, refused, failed)', labelNames: ['provider', 'result'] as const, registers: [this.registry],
  })

  readonly storeErrors = new Counter({
    name: 'gateway_store_errors_total', help: 'Session store commands that failed (unreachable, timed out)', registers: [this.registry],
  })

  constructor () {
    collectDefaultMetrics({ register: this.registry })
  }
}

/** One route's share of the metrics, recorded once per finished response (see RequestEnd). */
export class RouteMetrics {
  // Label-bound children, made once: labelling per request would build the label set each time.
  private readonly byStatusClass
  private readonly upstreamDuration

  constructor (metrics: Metrics, route: string) {
    this.byStatusClass = STATUS_CLASSES.map((statusClass) => metrics.proxiedRequests.labels(route, statusClass))
    this.upstreamDuration = metrics.upstreamDuration.labels(route)
  }

  /** `upstreamStart`: when the request went upstream (performance.now()), if it did. */
  record (statusCode: number, upstreamStart: number | undefined): void {
    this.byStatusClass[Math.floor(statusCode / 100) - 1]?.inc()
    if (upstreamStart !== undefined) this.upstreamDuration.observe((performance.now() - upstreamStart) / 1000)
  }
}
