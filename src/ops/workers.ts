// server.workers > 1: the primary process forks that many workers (node:cluster) that share the
// port, restarts one that dies, and on SIGTERM/SIGINT stops them all gracefully and exits 0.
import cluster, { type Worker } from 'node:cluster'
import pino from 'pino'
import type { GatewayConfig } from '../config/types.js'
import { loggerOptions } from './logger.js'
import { onStopSignal } from './stop-signals.js'
import { randomBytes } from 'node:crypto'

/** The environment variable through which the primary gives every worker the same generated secret. */
export const WORKER_SECRET_ENV = 'GATEWAY_WORKER_SESSION_SECRET'

export function runPrimary (config: GatewayConfig): void {
  const log = pino(loggerOptions())
  const env: Record<string, string> = {}
  if (!config.session.secret) {
    env[WORKER_SECRET_ENV] = randomBytes(32).toString('base64url')
    log.warn('session.secret is not set: the workers share a random one, so sessions will not survive a restart')
  }
  let stopping = false
  const fork = (): Worker => {
    const worker = cluster.fork(env)
    log.info({ workerPid: worker.process.pid }, 'worker started')
    // Serving from now on: the primary hands it connections.
    worker.once('listening', () => log.info({ workerPid: worker.process.pid }, 'worker listening'))
    return worker
  }
  for (let i = 0; i < config.server.workers; i++) fork()
  log.info({ workers: config.server.workers, port: config.server.port }, 'started workers')

  // `pid` is the primary's own (pino adds it to every line): the worker's is `workerPid`. An exit
  // has either a code (the worker exited) or a signal (it was killed); the other is null.
  cluster.on('exit', (worker, exitCode, signal) => {
    if (stopping) return
    log.error({ workerPid: worker.process.pid, exitCode, signal }, 'worker exited; starting another in 1 s')
    setTimeout(fork, 1000).unref()
  })

  const stop = (signal: string) => {
    stopping = true
    log.info({ signal }, 'stopping workers')
    const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined)
    let failed = false
    let running = workers.length
    if (running === 0) process.exit(0)
    const timer = setTimeout(() => {
      log.warn('workers did not stop within server.shutdownTimeout; exiting anyway')
      process.exit(1)
    }, config.server.shutdownTimeoutMs + 2000)
    timer.unref()
    for (const worker of workers) {
      // A worker still starting has no handler yet, so SIGTERM ends it at once: it served nothing,
      // which is a clean stop too.
      worker.once('exit', (code, signal) => {
        failed ||= code !== 0 && signal !== 'SIGTERM'
        if (--running === 0) {
          log.info('shut down')
          process.exit(failed ? 1 : 0)
        }
      })
      worker.process.kill('SIGTERM')
    }
  }
  onStopSignal(log, stop)
}
