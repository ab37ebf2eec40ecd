// Health endpoints: /healthz (the process serves), /readyz (this instance can serve: by default,
// some part of the session store answers), and /metrics (Prometheus text format) unless
// `metrics.listen` moves it to its own address. Why /readyz asks so little: docs/operations.md.
import type { FastifyInstance } from 'fastify'
import type { StoreConfig } from '../config/types.js'
import { GatewayError } from '../errors.js'
import type { Metrics } from '../ops/metrics.js'
import type { Readiness, StoreHealth } from '../store/store.js'

/** The readiness probe's path. */
export const READINESS_PATH = '/readyz'

/** A probe never waits longer than this for the store. */
const READY_TIMEOUT_MS = 1000

/** The store's health, or `down` when it does not say within the probe's time. */
async function storeHealth (store: Readiness): Promise<StoreHealth> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<StoreHealth>((resolve) => {
    timer = setTimeout(() => resolve({ state: 'down', unreachable: [] }), READY_TIMEOUT_MS)
  })
  try {
    return await Promise.race([store.health().catch((): StoreHealth => ({ state: 'down', unreachable: [] })), timeout])
  } finally {
    clearTimeout(timer)
  }
}

export interface ProbeOptions {
  store: Readiness
  metrics: Metrics
  servesMetrics: boolean
  /** `store.readiness`: whether a store that does not answer at all makes /readyz 503. */
  readiness: StoreConfig['readiness']
}

export async function probes (app: FastifyInstance, { store, metrics, servesMetrics, readiness }: ProbeOptions): Promise<void> {
  app.get('/healthz', async () => ({ status: 'ok' }))

  // 503 only when no part of the store answers (and store.readiness is required): a partly
  // reachable cluster keeps every instance in the load balancer, since they all share it.
  app.get(READINESS_PATH, async () => {
    const health = await storeHealth(store)
    if (health.state === 'down' && readiness === 'required') {
      throw new GatewayError('session_store_unavailable', 'The session store does not answer; the log\'s "session store unreachable" line names why.')
    }
    return { status: 'ready', store: health.state, ...(health.unreachable.length > 0 ? { unreachable: health.unreachable } : {}) }
  })

  if (!servesMetrics) return
  app.get('/metrics', async (_request, reply) => {
    return reply.type(metrics.registry.contentType).send(await metrics.registry.metrics())
  })
}
