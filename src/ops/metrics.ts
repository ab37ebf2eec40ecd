// Prometheus metrics (prom-client), one registry per gateway instance: sign-ins, proxied requests,
// upstream latency, answers the upstream cut off, machine clients' tokens, the agents' authorization
// server, token refreshes, store errors (the failed commands, and the requests answered 503 for
// them), sessions that still need a previous secret, and the default process metrics.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'

const STATUS_CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx'] as const
const UPSTREAM_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

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

  /** Per-route tallies behind the two per-request metrics below (see RouteMetrics). */
  private readonly routes: RouteMetrics[] = []

  readonly proxiedRequests = new Counter({
    name: 'gateway_proxied_requests_total',
    help: 'Requests answered on a route, by route and status class',
    labelNames: ['route', 'status_class'] as const,
    registers: [this.registry],
    // Read from the routes' tallies at scrape time.
    collect: () => {
      this.proxiedRequests.reset()
      for (const route of this.routes) {
        route.byStatusClass.forEach((count, i) => { if (count > 0) this.proxiedRequests.inc({ route: route.name, status_class: STATUS_CLASSES[i]! }, count) })
      }
    },
  })

  /**
   * Forward-auth requests that carried one of forwardAuth.previousProxySecrets: while it grows, a
   * proxy in front still sends an old secret; once it stays put on every instance, drop them.
   */
  readonly previousProxySecret = new Counter({
    name: 'gateway_forward_auth_previous_proxy_secret_total',
    help: 'Forward-auth requests answered because they carried one of forwardAuth.previousProxySecrets, not forwardAuth.proxySecret: drop the previous ones when it stops growing on every instance',
    registers: [this.registry],
  })

  /** Requests the rules refused, by route (`forward-auth` for its endpoint) and the kind of rule (see access/rules.ts Judgement.refusedBy). */
  readonly ruleRefusals = new Counter({
    name: 'gateway_rule_refusals_total',
    help: 'Requests refused 403 by the rules, by route and by what refused: the refusing deny rule\'s conditions (networks, groups+paths, ...) or no_allow_rule',
    labelNames: ['route', 'refused_by'] as const,
    registers: [this.registry],
  })

  readonly upstreamDuration = new TalliedHistogram(
    'gateway_upstream_duration_seconds', 'Time from sending a request upstream to the end of its response, by route', this.registry, () => this.routes)

  readonly upstreamAborted = new Counter({
    name: 'gateway_upstream_aborted_total',
    help: 'Answers the upstream broke off after the gateway had begun to send them (the client saw the connection end), by route',
    labelNames: ['route'] as const,
    registers: [this.registry],
    // Read from the routes' tallies at scrape time; every route shows, at 0 until it happens.
    collect: () => {
      this.upstreamAborted.reset()
      for (const route of this.routes) this.upstreamAborted.inc({ route: route.name }, route.upstreamAborted)
    },
  })

  /** Per-route tallies of machine clients' tokens, by route name (see BearerTally). */
  private readonly bearerTallies = new Map<string, BearerTally>()

  readonly bearerTokens = new Counter({
    name: 'gateway_bearer_tokens_total',
    help: 'Machine clients\' access tokens checked on a route (or forward-auth host) with bearer:, by route and result (accepted, or why the token was refused)',
    labelNames: ['route', 'result'] as const,
    registers: [this.registry],
    // Read from the tallies at scrape time; every such route shows its `accepted` series, at 0 until one is.
    collect: () => {
      this.bearerTokens.reset()
      for (const tally of this.bearerTallies.values()) {
        this.bearerTokens.inc({ route: tally.route, result: 'accepted' }, tally.accepted)
        for (const [result, count] of tally.refused) this.bearerTokens.inc({ route: tally.route, result }, count)
      }
    },
  })

  /** The agents' authorization server (src/agents/): no client, token or person ever a label. */
  readonly agents = new Counter({
    name: 'gateway_agents_total',
    help: 'The agents\' authorization server (routes with agents: true), by event (registration, authorization, device, consent, token, grant, route) and result (registered, code_issued, allowed, denied, the grant type a token was issued for, revoked, accepted, or why it was refused: an OAuth error code or a token problem)',
    labelNames: ['event', 'result'] as const,
    registers: [this.registry],
  })

  /** Each event and result's child of `agents`, looked up once: an agent's every request counts its route result. */
  private readonly agentCounters = new Map<string, { inc: () => void }>()

  countAgents (event: string, result: string): void {
    const key = `${event}\u0000${result}`
    let counter = this.agentCounters.get(key)
    if (counter === undefined) this.agentCounters.set(key, counter = this.agents.labels({ event, result }))
    counter.inc()
  }

  readonly refreshes = new Counter({
    name: 'gateway_token_refreshes_total', help: 'Access token refreshes, by provider and result (refreshed, refused, failed)', labelNames: ['provider', 'result'] as const, registers: [this.registry],
  })

  /**
   * Store commands, not requests: a request may run several commands, or none that fail (a valid
   * access token keeps passing while a refresh cannot be written). Requests: storeUnavailableRequests.
   */
  readonly storeErrors = new Counter({
    name: 'gateway_store_errors_total', help: 'Session store commands that failed (unreachable, timed out, refused); requests answered 503 for the store are gateway_store_unavailable_requests_total', registers: [this.registry],
  })

  /** What the store's failures cost the clients: requests answered 503 session_store_unavailable. */
  readonly storeUnavailableRequests = new Counter({
    name: 'gateway_store_unavailable_requests_total', help: 'Requests answered 503 session_store_unavailable (the readiness probe\'s answers are not counted)', registers: [this.registry],
  })

  /** Part of storeErrors: the commands Redis answered with an error. Every reason starts at 0, so an alert can watch it. */
  readonly storeRefusals = new Counter({
    name: 'gateway_store_refusals_total', help: 'Session store commands Redis refused (reachable, answered with an error), by reason (OOM, READONLY, NOPERM, other)', labelNames: ['reason'] as const, registers: [this.registry],
  })

  /** Where gateway_sessions_previous_secret is read from at scrape time (see {@link countPreviousSecretSessions}). */
  private previousSecretSessions: () => number = () => 0

  readonly sessionsPreviousSecret = new Gauge({
    name: 'gateway_sessions_previous_secret',
    help: 'Sessions this instance read (or refreshed) within the last session.ttl that still need a previous secret (session.previousSecrets): dropping the previous secrets now signs them out',
    registers: [this.registry],
    collect: () => { this.sessionsPreviousSecret.set(this.previousSecretSessions()) },
  })

  constructor () {
    collectDefaultMetrics({ register: this.registry })
  }

  /** Reads gateway_sessions_previous_secret from `count` at each scrape (the sessions' own tally). */
  countPreviousSecretSessions (count: () => number): void {
    this.previousSecretSessions = count
  }

  /**
   * The token tally of one route (or forward-auth host, `forward-auth:<host>`), counted in /metrics
   * from now on; the same tally each time for one name.
   */
  forBearer (route: string): BearerTally {
    let tally = this.bearerTallies.get(route)
    if (tally === undefined) {
      tally = new BearerTally(route)
      this.bearerTallies.set(route, tally)
    }
    return tally
  }

  /** The tallies of one route, counted in /metrics from now on. */
  forRoute (name: string): RouteMetrics {
    const route = new RouteMetrics(name)
    this.routes.push(route)
    return route
  }
}

/** A route's request count per status class and its upstream latency histogram, as plain numbers. */
export class RouteMetrics {
  readonly byStatusClass = [0, 0, 0, 0, 0]
  /** Count per bucket of UPSTREAM_BUCKETS (not cumulative), then the count above the last bound. */
  readonly upstreamBuckets = new Array<number>(UPSTREAM_BUCKETS.length + 1).fill(0)
  upstreamSum = 0
  upstreamCount = 0
  /** Answers the upstream broke off after their headers went out (see {@link recordCutOff}). */
  upstreamAborted = 0

  constructor (readonly name: string) {}

  /**
   * Once per finished response (RequestEnd), on the hot path: arithmetic only. prom-client's own
   * inc()/observe() build and hash the label set on every call, a cost per request under
   * load (see docs/performance.md); the registry reads these tallies when /metrics is scraped.
   * `upstreamStart`: when the request went upstream (performance.now()), if it did; `now`: the time
   * the answer finished on the same clock (a test passes its own).
   */
  record (statusCode: number, upstreamStart: number | undefined, now = performance.now()): void {
    const statusClass = Math.floor(statusCode / 100) - 1
    if (statusClass >= 0 && statusClass < 5) this.byStatusClass[statusClass]!++
    if (upstreamStart === undefined) return
    const seconds = (now - upstreamStart) / 1000
    let bucket = 0
    while (bucket < UPSTREAM_BUCKETS.length && seconds > UPSTREAM_BUCKETS[bucket]!) bucket++
    this.upstreamBuckets[bucket]!++
    this.upstreamSum += seconds
    this.upstreamCount++
  }

  /**
   * An answer the upstream broke off after its headers went out (RequestEnd, on the error path):
   * counted under the status it began with, as {@link record} counts a finished one, and in
   * gateway_upstream_aborted_total.
   */
  recordCutOff (statusCode: number, upstreamStart: number | undefined, now = performance.now()): void {
    this.record(statusCode, upstreamStart, now)
    this.upstreamAborted++
  }
}

/**
 * How many tokens one route accepted and refused, by reason, as plain numbers: counted on the hot
 * path without prom-client's per-call label hashing (see {@link RouteMetrics.record}). `result` is
 * one of a closed set of words (oauth/access-tokens.ts TokenProblem), never a token or a subject.
 */
export class BearerTally {
  accepted = 0
  readonly refused = new Map<string, number>()

  constructor (readonly route: string) {}

  count (result: string): void {
    if (result === 'accepted') this.accepted++
    else this.refused.set(result, (this.refused.get(result) ?? 0) + 1)
  }
}

/**
 * A prom-client Histogram whose values come from the routes' tallies when the registry reads it.
 * The registry reads getForPromString() (Histogram.get(), for JSON, goes through it too), so the
 * exposition format stays prom-client's own.
 */
class TalliedHistogram extends Histogram<'route'> {
  constructor (private readonly metricName: string, private readonly helpText: string, registry: Registry, private readonly routes: () => RouteMetrics[]) {
    super({ name: metricName, help: helpText, labelNames: ['route'], buckets: UPSTREAM_BUCKETS, registers: [registry] })
  }

  async getForPromString () {
    const values: Array<{ metricName: string, labels: Record<string, string | number>, sharedLabels: Record<string, string>, value: number }> = []
    const add = (suffix: string, labels: Record<string, string | number>, value: number) => values.push({ metricName: `${this.metricName}${suffix}`, labels, sharedLabels: {}, value })
    for (const route of this.routes()) {
      let cumulative = 0
      UPSTREAM_BUCKETS.forEach((bound, i) => {
        cumulative += route.upstreamBuckets[i]!
        add('_bucket', { route: route.name, le: bound }, cumulative)
      })
      add('_bucket', { route: route.name, le: '+Inf' }, route.upstreamCount)
      add('_sum', { route: route.name }, route.upstreamSum)
      add('_count', { route: route.name }, route.upstreamCount)
    }
    return { name: this.metricName, help: this.helpText, type: 'histogram', aggregator: 'sum', values }
  }
}
