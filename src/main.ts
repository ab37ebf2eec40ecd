#!/usr/bin/env node
// CLI entry: `--config PATH` / GATEWAY_CONFIG, `--check` (or `check`) to validate and exit 0/1,
// otherwise build the gateway, listen, and close gracefully on SIGTERM/SIGINT; with
// server.workers > 1 this process is the primary of that many workers (src/ops/workers.ts).
import cluster from 'node:cluster'
import { parseArgs } from 'node:util'
import { pathToFileURL } from 'node:url'
import pino from 'pino'
import { ConfigError, configWarnings, containerWarnings, inContainer, loadConfig, processWarnings } from './config/config.js'
import { didYouMean } from './config/did-you-mean.js'
import { pickedPortWarnings } from './config/server-warnings.js'
import type { GatewayConfig } from './config/types.js'
import { writeLogsNow } from './ops/log-destination.js'
import { loggerOptions } from './ops/logger.js'
import { onStopSignal } from './ops/stop-signals.js'
import { TracingEnvError, tracingSettings } from './ops/tracing-settings.js'
import { WORKER_SECRET_ENV, runPrimary } from './ops/workers.js'
// The gateway itself (Fastify, ioredis, undici...) and the cluster's metrics listener (prom-client)
// are imported only by the process that serves them: `--check` and a cluster primary start in a
// fraction of the time and memory (see docs/performance.md).

const USAGE = `usage: gateway [check] [--config PATH] [--check]
  --config PATH  config file (default: $GATEWAY_CONFIG or ./gateway.yaml)
  --check        validate the config and exit 0 (valid) or 1 (problems listed)`

/** `1 route`, `2 routes`. */
function count (n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`
}

const OPTIONS = { config: { type: 'string' }, check: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } } as const

/**
 * Why `argv` is not a command line of the gateway's, in words a newcomer can act on: an unknown
 * option with the one it is close to, or an argument that is not `check` (a config file given
 * without --config was ignored, and ./gateway.yaml checked or served instead: a newcomer's finding;
 * `npm start --check --config <file>` without the `--` leaves just that).
 */
function argvProblem (argv: string[], error: unknown): string {
  const nameOf = (arg: string) => arg.replace(/^-+/, '').split('=', 1)[0]!
  const known = new Set([...Object.keys(OPTIONS), OPTIONS.help.short])
  const unknown = (error as { code?: string }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' ? argv.find((arg) => arg.startsWith('-') && !known.has(nameOf(arg))) : undefined
  if (unknown !== undefined) {
    const name = nameOf(unknown)
    const hint = didYouMean(name, Object.keys(OPTIONS))
    // The option's name only: a value given with it may be a secret (an attacker's finding: `--client-secret=...` was echoed).
    return `unknown option ${unknown.split('=', 1)[0]!}${hint === undefined ? '' : `; ${hint.replace('`', '`--')}`}`
  }
  return (error as Error).message
}

/** The first argument that is neither an option nor the `check` command, if any. */
function strayArgument (positionals: readonly string[]): string | undefined {
  return positionals.find((arg, index) => !(index === 0 && arg === 'check'))
}

export async function main (argv: string[]): Promise<number> {
  let args
  try {
    args = parseArgs({ args: argv, allowPositionals: true, options: OPTIONS })
  } catch (error) {
    process.stderr.write(`${argvProblem(argv, error)}\n${USAGE}\n`)
    return 2
  }
  const stray = strayArgument(args.positionals)
  if (stray !== undefined) {
    process.stderr.write(`unexpected argument ${JSON.stringify(stray)}: a config file is given with --config ${stray} (with npm, after a --: npm start -- --config ${stray} --check)\n${USAGE}\n`)
    return 2
  }
  if (args.values.help) {
    process.stdout.write(`${USAGE}\n`)
    return 0
  }
  const check = args.values.check === true || args.positionals[0] === 'check'
  const file = args.values.config ?? process.env.GATEWAY_CONFIG ?? 'gateway.yaml'

  let config
  try {
    config = await loadConfig(file)
    // A malformed OTEL_* endpoint fails here, naming the variable, as a gateway.yaml problem does.
    tracingSettings(config.tracing, process.env)
  } catch (error) {
    if (!(error instanceof ConfigError) && !(error instanceof TracingEnvError)) throw error
    process.stderr.write(`${error.message}\n`)
    return 1
  }
  if (check) {
    for (const warning of [...processWarnings(config), ...configWarnings(config), ...await containerWarnings(config, inContainer())]) process.stderr.write(`warning: ${warning}\n`)
    // The forward-auth hosts kept in gateway.yaml, when there are any: a file of those alone is no empty file.
    const hosts = config.forwardAuth.hosts.size === 0 ? '' : `, ${count(config.forwardAuth.hosts.size, 'forward-auth host')}`
    process.stdout.write(`${file}: OK (${count(Object.keys(config.providers).length, 'provider')}, ${count(config.routes.length, 'route')}${hosts})\n`)
    return 0
  }

  if (config.server.workers > 1 && cluster.isPrimary) {
    // Workers share the public port, so a scrape there reaches one of them: the primary serves
    // metrics.listen instead, with every worker's metrics summed.
    if (config.metrics.listen) {
      const { clusterMetricsListener } = await import('./ops/metrics-listener.js')
      await clusterMetricsListener(config.metrics.listen, pino(loggerOptions())).start()
    }
    runPrimary(config)
    return -1
  }
  await serve(config)
  return -1
}

/** Why the gateway could not listen, with what to change (a newcomer's reading: EADDRINUSE alone said neither). */
function listenFailure (error: unknown, server: GatewayConfig['server']): unknown {
  const code = (error as { code?: unknown }).code
  const where = `${server.host.includes(':') ? `[${server.host}]` : server.host}:${server.port}`
  if (code === 'EADDRINUSE') return new Error(`server.port: ${where} is in use (EADDRINUSE): stop what listens there, or set server.port (GATEWAY_PORT in the shipped gateway.yaml) to another port, 0 for any free one`, { cause: error })
  if (code === 'EACCES') return new Error(`server.port: ${where} needs privileges this process lacks (EACCES): use a port above 1023, or let a proxy in front take the low one`, { cause: error })
  return error
}

/** Listens with the gateway, and closes it gracefully on SIGTERM and SIGINT. */
async function serve (loaded: GatewayConfig): Promise<void> {
  // A worker without session.secret takes the random one its primary made for all its workers.
  const sharedSecret = process.env[WORKER_SECRET_ENV]
  const config = !loaded.session.secret && sharedSecret ? { ...loaded, session: { ...loaded.session, secret: sharedSecret } } : loaded

  const { buildGateway } = await import('./gateway.js')
  const app = await buildGateway(config)
  // buildGateway logs configWarnings; where this process runs is main's to know.
  for (const warning of await containerWarnings(config, inContainer())) app.log.warn(warning)
  try {
    await app.listen({ host: config.server.host, port: config.server.port })
  } catch (error) {
    throw listenFailure(error, config.server)
  }
  const address = app.server.address()
  for (const warning of pickedPortWarnings(config.server, typeof address === 'object' && address !== null ? address.port : config.server.port)) app.log.warn(warning)
  try {
    await app.metricsListener?.listening
  } catch (error) {
    await app.close()
    throw error
  }
  // Graceful: stop accepting, let in-flight requests finish (bounded), close the store, exit 0.
  const stop = async (signal: string) => {
    app.log.info({ signal, timeoutMs: config.server.shutdownTimeoutMs }, 'shutting down: no new connections, finishing in-flight requests')
    const timer = setTimeout(() => {
      app.log.warn('in-flight requests did not finish within server.shutdownTimeout; exiting anyway')
      process.exit(1)
    }, config.server.shutdownTimeoutMs)
    timer.unref()
    // Connections with no request in flight do not hold it (src/http/drain.ts).
    await app.close()
    app.log.info('shut down')
    process.exit(0)
  }
  onStopSignal(app.log, (signal) => { stop(signal).catch(() => process.exit(1)) })
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main(process.argv.slice(2)).then((code) => {
    if (code >= 0) process.exit(code)
  }, (error: unknown) => {
    // The log's pending lines first: the failure is the last thing on the screen (a newcomer's reading).
    writeLogsNow()
    process.stderr.write(`gateway: failed to start: ${error instanceof Error ? error.message : String(error)}\n`)
    process.exit(1)
  })
}
