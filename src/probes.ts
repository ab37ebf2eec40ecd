// Health endpoints: /healthz (the process serves), /readyz (the session store answers), and
// /metrics (Prometheus text format).
import type { FastifyInstance } from 'fastify'
import { GatewayError } from './errors.js'
import type { Metrics } from './metrics.js'
import type { SessionStore } from './store/store.js'

/** A probe never waits longer than this for the store. */
const READY_TIMEOUT_MS = 1000

export async function probes (app: FastifyInstance, { store, metrics }: { store: SessionStore, metrics: Metrics }): Promise<void> {
  app.get('/healthz', async () => ({ status: 'ok' }))

  app.get('/readyz', async () => {
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(new GatewayError('session_store_unavailable', 'The session store did not answer in time.')), READY_TIMEOUT_MS)
    })
    try {
      await Promise.race([store.ping(), timeout])
    } finally {
      clearTimeout(timer)
    }
    return { status: 'ready' }
  })

  app.get('/metrics', async (_request, reply) => {
    return reply.type(metrics.registry.contentType).send(await metrics.registry.metrics())
  })
}
