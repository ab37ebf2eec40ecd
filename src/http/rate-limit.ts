// The sign-in endpoints' request budget per client address (@fastify/rate-limit): one counter
// shared by /oauth/login/* and /oauth/authorized/*, kept in Redis when the sessions are (so every
// instance counts together), else in this process. Over the budget: 429 `rate_limited` with
// Retry-After (RFC 6585 §4). A store outage lets requests through rather than failing them.
import rateLimit, { normalizeIP } from '@fastify/rate-limit'
import type { FastifyInstance, onRequestAsyncHookHandler } from 'fastify'
import { withoutPort } from '../config/networks.js'
import type { RateBudget } from '../config/types.js'
import { GatewayError } from '../errors.js'
import type { SharedConnection } from '../store/store.js'

/**
 * Registers the limiter and returns the `onRequest` hook that charges the sign-in budget, or
 * undefined when the budget is off. The key is `request.ip` (so `server.trustProxy` decides which
 * address counts); IPv6 addresses count per /64, the library's default, as one host holds a /64.
 * @see https://www.rfc-editor.org/rfc/rfc6585#section-4
 */
export async function signinRateLimit (app: FastifyInstance, budget: RateBudget | undefined, store: SharedConnection): Promise<onRequestAsyncHookHandler | undefined> {
  if (!budget) return undefined
  await app.register(rateLimit, {
    global: false,
    max: budget.max,
    timeWindow: budget.windowMs,
    // The counter is not worth a failed sign-in: when Redis is down the request goes on.
    skipOnError: true,
    redis: store.redis,
    nameSpace: 'rate-limit:signin:',
    // One client, whichever connection its proxy names it on (withoutPort); IPv6 per /64, the library's default.
    keyGenerator: (request) => normalizeIP(withoutPort(request.ip), 64),
    errorResponseBuilder: (_request, context) => {
      const seconds = Math.max(1, Math.ceil(context.ttl / 1000))
      return new GatewayError('rate_limited', `Too many sign-in requests from your address. Try again in ${seconds} second${seconds === 1 ? '' : 's'}.`, {
        details: { headers: { 'retry-after': String(seconds) } },
      })
    },
  })
  // No per-call options: the library would then derive a per-route key (one budget per route).
  return app.rateLimit()
}
