// What becomes of the machine clients' tokens a route (or forward-auth host) checks: each outcome
// counted in gateway_bearer_tokens_total, and each refusal logged with the route and the reason,
// never the token or its claims. A client that keeps sending a bad token (an expired one in a CI
// secret, a retry loop) would otherwise fill the log at info: the first refusal of a burst per
// route and reason is an info line, the rest are debug lines, and after a minute the next refusal
// is an info line again, saying how many went to debug since the last one (`suppressed`).
import type { TokenProblem } from '../oauth/access-tokens.js'
import type { Clock } from '../ops/clock.js'
import type { Logger } from '../ops/logger.js'
import type { Metrics } from '../ops/metrics.js'
import type { BearerReport } from './bearer.js'

/** At most one info line per route and reason in this window. */
export const BEARER_REFUSAL_LOG_INTERVAL_MS = 60_000

export const BEARER_REFUSED_MSG = 'bearer token refused'

/** The reports of every route and host, made once per name (a host's guard may be built per request). */
export class BearerReports {
  private readonly reports = new Map<string, BearerReport>()

  constructor (private readonly metrics: Metrics, private readonly log: Logger, private readonly clock: Clock) {}

  /**
   * The report of one route: `route` is the metrics label and the log lines' `route` field (a
   * route's path, or `forward-auth:<host>`). Its `accepted` series shows in /metrics, at 0, from now on.
   */
  for (route: string): BearerReport {
    let report = this.reports.get(route)
    if (report === undefined) {
      report = this.compile(route)
      this.reports.set(route, report)
    }
    return report
  }

  private compile (route: string): BearerReport {
    const tally = this.metrics.forBearer(route)
    /** Per reason: when its last info line was written, and the refusals logged at debug since. */
    const lines = new Map<TokenProblem, { at: number, suppressed: number }>()
    return (result) => {
      tally.count(result)
      if (result === 'accepted') return
      const now = this.clock.now()
      const last = lines.get(result)
      if (last !== undefined && now - last.at < BEARER_REFUSAL_LOG_INTERVAL_MS) {
        last.suppressed++
        this.log.debug({ route, reason: result }, BEARER_REFUSED_MSG)
        return
      }
      lines.set(result, { at: now, suppressed: 0 })
      this.log.info({ route, reason: result, suppressed: last?.suppressed ?? 0 }, BEARER_REFUSED_MSG)
    }
  }
}
