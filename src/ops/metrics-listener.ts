// /metrics on its own address (`metrics.listen`), away from the public port: a bare node:http
// server that answers GET /metrics and 404 to anything else. With server.workers > 1 the primary
// process serves it, summing every worker's registry (prom-client's AggregatorRegistry over the
// cluster IPC channel); a worker then only answers the primary.
import cluster from 'node:cluster'
import { createServer, type Server } from 'node:http'
import type { FastifyInstance } from 'fastify'
import type { Logger } from './logger.js'
import { AggregatorRegistry } from 'prom-client'
import type { MetricsConfig } from '../config/types.js'
import type { Metrics } from './metrics.js'

type Address = NonNullable<MetricsConfig['listen']>

declare module 'fastify' {
  interface FastifyInstance {
    /** The separate /metrics listener, when `metrics.listen` is set (and this is not a worker). */
    metricsListener?: MetricsListener
  }
}

/** Prometheus text exposition, with its content type. */
export interface Scrape { render (): Promise<string>, contentType: string }

const NOT_FOUND = JSON.stringify({ error: 'not_found', message: 'Nothing is served at this address.' })

export class MetricsListener {
  /** Settles once: listening, or the reason it could not (an Error naming metrics.listen). */
  readonly listening: Promise<void>
  private settle!: { resolve: () => void, reject: (error: Error) => void }
  private readonly server: Server
  private started = false

  constructor (private readonly address: Address, scrape: Scrape, log: Logger) {
    this.listening = new Promise((resolve, reject) => { this.settle = { resolve, reject } })
    // Awaited by main.ts and tests; this keeps a failure nobody waits for from being unhandled.
    this.listening.catch(() => {})
    this.server = createServer((request, response) => {
      const path = (request.url ?? '').split('?', 1)[0]
      if (path !== '/metrics' || (request.method !== 'GET' && request.method !== 'HEAD')) {
        response.writeHead(404, { 'content-type': 'application/json; charset=utf-8' }).end(NOT_FOUND)
        return
      }
      scrape.render().then((body) => {
        response.writeHead(200, { 'content-type': scrape.contentType }).end(request.method === 'HEAD' ? undefined : body)
      }, (error: unknown) => {
        log.error({ err: error }, 'metrics could not be collected')
        response.writeHead(500, { 'content-type': 'application/json; charset=utf-8' })
          .end(JSON.stringify({ error: 'internal_error', message: 'An unexpected error occurred.' }))
      })
    })
  }

  /** Listens on `metrics.listen`; the promise is {@link listening}. */
  start (): Promise<void> {
    if (this.started) return this.listening
    this.started = true
    const { host, port } = this.address
    this.server.once('error', (error: NodeJS.ErrnoException) => {
      this.settle.reject(new Error(`metrics.listen: cannot listen on ${host.includes(':') ? `[${host}]` : host}:${port} (${error.code ?? error.message})`, { cause: error }))
    })
    this.server.listen({ host, port }, () => this.settle.resolve())
    return this.listening
  }

  async close (): Promise<void> {
    if (!this.server.listening) return
    this.server.closeAllConnections()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }
}

/**
 * Moves /metrics of `app` to `address`: listens when the app listens (onListen) and closes with it
 * (onClose). In a cluster worker it instead lets the primary collect this worker's registry.
 */
export function serveMetricsApart (app: FastifyInstance, address: Address, metrics: Metrics): void {
  if (cluster.isWorker) {
    // eslint-disable-next-line no-new -- constructing one installs the worker's answer to the primary's collection requests
    new AggregatorRegistry()
    AggregatorRegistry.setRegistries([metrics.registry])
    return
  }
  const listener = new MetricsListener(address, { render: () => metrics.registry.metrics(), contentType: metrics.registry.contentType }, app.log)
  app.decorate('metricsListener', listener)
  // Fastify logs and ignores an onListen error; main.ts awaits `listening` to fail the start instead.
  app.addHook('onListen', async () => { await listener.start().catch(() => {}) })
  app.addHook('onClose', async () => listener.close())
}

/** The primary's listener with server.workers > 1: every worker's metrics, summed. */
export function clusterMetricsListener (address: Address, log: Logger): MetricsListener {
  const aggregator = new AggregatorRegistry()
  return new MetricsListener(address, { render: () => aggregator.clusterMetrics(), contentType: aggregator.contentType }, log)
}
