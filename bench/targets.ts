// The processes a benchmark run measures, each on a loopback port from the OS: a fixed-body
// upstream (nginx when installed, else a minimal node:http server), the bare @fastify/http-proxy
// baseline with no auth, and the gateway itself (the real CLI) with a Redis store.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { mkdtemp, readFile, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { stringify } from 'yaml'
import { freePort, waitFor } from '../test/helpers/net.js'

export interface Target {
  name: string
  /** Request headers for this target when it needs its own session (Apache), else the gateway's. */
  headers?: Record<string, string>
  url: string
  pid: number
  stop (): Promise<void>
}

const BODY = '{"status":"ok","payload":"0123456789abcdef0123456789abcdef"}\n'

export function which (binary: string): string | undefined {
  try {
    return execFileSync('sh', ['-c', `command -v ${binary}`], { encoding: 'utf8' }).trim() || undefined
  } catch {
    return undefined
  }
}

/**
 * `child` once it answers `path` below 500. A process that exits first ends the wait at once, with
 * its exit code and the end of its stderr (when piped): the cause, not a 20 s timeout.
 */
export async function started (name: string, child: ChildProcess, url: string, path = '/'): Promise<Target> {
  // 'close', not 'exit': by then the last of its stderr has been read.
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()))
  let stderr = ''
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => { stderr = (stderr + chunk).slice(-2000) })
  const died = exited.then(() => { throw new Error(`${name} exited (${child.signalCode ?? child.exitCode}) before it answered at ${url}${stderr === '' ? '' : `:\n${stderr}`}`) })
  died.catch(() => {})
  await Promise.race([waitFor(async () => (await fetch(`${url}${path}`)).status < 500, 20_000, `${name} at ${url}`), died])
  return {
    name,
    url,
    pid: child.pid!,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
      await exited
    },
  }
}

/** nginx when installed (say which), else a node:http server; both answer every path with BODY. */
export async function startUpstream (): Promise<Target & { kind: string }> {
  const port = await freePort()
  const nginx = which('nginx')
  if (nginx) {
    const dir = await mkdtemp(join(tmpdir(), 'gw-bench-nginx-'))
    await writeFile(join(dir, 'nginx.conf'), `daemon off; worker_processes 1; pid ${dir}/nginx.pid; error_log ${dir}/error.log;
events { worker_connections 1024; }
http { access_log off; keepalive_requests 100000;
  server { listen 127.0.0.1:${port}; location / { default_type application/json; return 200 '${BODY.trim()}'; } } }`)
    const child = spawn(nginx, ['-c', join(dir, 'nginx.conf'), '-p', dir], { stdio: 'ignore' })
    return { ...(await started('upstream', child, `http://127.0.0.1:${port}`)), kind: 'nginx' }
  }
  const source = `require('node:http').createServer((q, s) => { s.setHeader('content-type', 'application/json'); s.end(${JSON.stringify(BODY)}) })
    .listen(${port}, '127.0.0.1')`
  const child = spawn(process.execPath, ['-e', source], { stdio: 'ignore' })
  return { ...(await started('upstream', child, `http://127.0.0.1:${port}`)), kind: 'node:http' }
}

/** Fastify 5 + @fastify/http-proxy, no auth, no logging: the floor the gateway is compared with. */
export async function startBareProxy (upstream: string, nodeArgs: string[] = []): Promise<Target> {
  const port = await freePort()
  const source = `const app = require('fastify')({ logger: false })
    app.register(require('@fastify/http-proxy'), { upstream: ${JSON.stringify(upstream)}, prefix: '/app', rewritePrefix: '/app' })
    app.listen({ host: '127.0.0.1', port: ${port} })
    process.once('SIGTERM', () => process.exit(0))`
  const child = spawn(process.execPath, [...nodeArgs, '-e', source], { stdio: 'ignore' })
  return await started('bare proxy', child, `http://127.0.0.1:${port}`, '/app/')
}

export interface GatewayOptions {
  name: string
  upstream: string
  redisUrl: string
  issuer: string
  clientId: string
  clientSecret: string
  workers: number | 'auto'
  /** Extra node options for the gateway process (e.g. --cpu-prof). */
  nodeArgs?: string[]
  /** Extra environment for the gateway process (e.g. MALLOC_ARENA_MAX). */
  env?: Record<string, string>
  /** The gateway's entry point (default dist/src/main.js; another build for an A/B of two versions). */
  main?: string
  /** LOG_LEVEL of the gateway (info: one line per request, as in production). */
  logLevel?: string
  /** The route sends a signed identity assertion to the upstream (`assertion: true`). */
  assertion?: boolean
  /** The route also accepts machine clients' tokens (`bearer:`). */
  bearer?: { audience: string }
  /** More providers besides `demo` (same issuer and client): name -> client id. */
  moreProviders?: Record<string, string>
  /** Top-level config sections to add or replace (e.g. rateLimit). */
  config?: Record<string, unknown>
  /** Keys to add to the route (rules, `headers:`). */
  route?: Record<string, unknown>
  /** How the build's own `npm start` runs it (another build's, for --against); default: this build's. */
  startCommand?: StartCommand
}

/** The node flags and environment a build's `npm start` gives the gateway (its package.json). */
export interface StartCommand {
  nodeArgs: readonly string[]
  env: Readonly<Record<string, string>>
}

/**
 * What a package.json's `start` script gives node, as `VAR=value ... exec node <flags> <main>` spells
 * it: the environment assignments before `node`, the flags between it and the entry point.
 */
export async function startCommandOf (packageJson: string): Promise<StartCommand> {
  const script = (JSON.parse(await readFile(packageJson, 'utf8')) as { scripts?: { start?: string } }).scripts?.start ?? ''
  const words = script.split(/\s+/).filter(Boolean)
  const at = words.indexOf('node')
  if (at === -1) throw new Error(`${packageJson}: its start script does not run node: ${script}`)
  const env = Object.fromEntries(words.slice(0, at).filter((word) => /^[A-Z_]+=/.test(word)).map((word) => [word.slice(0, word.indexOf('=')), word.slice(word.indexOf('=') + 1)]))
  const main = words.findIndex((word, i) => i > at && !word.startsWith('-'))
  return { nodeArgs: words.slice(at + 1, main === -1 ? undefined : main), env }
}

/** session.secret of every gateway the bench starts (the refresh storm seals records with it). */
export const BENCH_SESSION_SECRET = 'bench-session-secret-0123456789-abcdefghij'

/** The node flags `npm start` and the image run the gateway with (package.json, Dockerfile). */
export const GATEWAY_NODE_FLAGS = ['--max-semi-space-size=8', '--heap-growing-percent=20']

/** The environment `npm start` and the image run the gateway with: glibc's malloc arenas capped. */
export const GATEWAY_NODE_ENV: Readonly<Record<string, string>> = { MALLOC_ARENA_MAX: '2' }

/** The real CLI on a config of its own (Redis store, one protected route, logging to nowhere). */
export async function startGateway (options: GatewayOptions & { port: number }): Promise<Target> {
  const dir = await mkdtemp(join(tmpdir(), 'gw-bench-'))
  const file = join(dir, 'gateway.yaml')
  const url = `http://127.0.0.1:${options.port}`
  await writeFile(file, stringify({
    server: { host: '127.0.0.1', port: options.port, baseUrl: url, workers: options.workers },
    session: { secret: BENCH_SESSION_SECRET },
    store: { type: 'redis', url: options.redisUrl },
    providers: Object.fromEntries(Object.entries({ demo: options.clientId, ...options.moreProviders }).map(([name, clientId]) =>
      [name, { clientId, clientSecret: options.clientSecret, issuer: options.issuer, scope: 'openid profile email' }])),
    routes: [{ path: '/app/', upstream: options.upstream, provider: 'demo', ...(options.assertion ? { assertion: true } : {}), ...(options.bearer ? { bearer: options.bearer } : {}), ...options.route }],
    ...options.config,
  }))
  const shipped = options.startCommand ?? { nodeArgs: GATEWAY_NODE_FLAGS, env: GATEWAY_NODE_ENV }
  const child = spawn(process.execPath, [...shipped.nodeArgs, ...(options.nodeArgs ?? []), options.main ?? 'dist/src/main.js', '--config', file], {
    // stderr: what a gateway that fails to start says (its log lines go to stdout, not read).
    stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...shipped.env, LOG_LEVEL: options.logLevel ?? 'info', ...options.env },
  })
  return await started(options.name, child, url, '/readyz')
}

/** A process and its child processes (cluster workers). */
async function tree (pid: number): Promise<number[]> {
  const pids = [pid]
  try {
    const children = await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8')
    pids.push(...children.trim().split(/\s+/).filter(Boolean).map(Number))
  } catch {}
  return pids
}

/** CPU time (user + system, ms) used so far by a process and its child processes. */
export async function cpuOfTree (pid: number): Promise<number> {
  const ticks = await Promise.all((await tree(pid)).map(async (p) => {
    try {
      // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
      const fields = (await readFile(`/proc/${p}/stat`, 'utf8')).split(') ').at(-1)!.split(' ')
      return Number(fields[11]) + Number(fields[12])
    } catch {
      return 0
    }
  }))
  return ticks.reduce((a, b) => a + b, 0) * (1000 / CLOCK_TICKS)
}

const CLOCK_TICKS = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100

/** Resident memory (bytes) of a process and each of its child processes (cluster workers). */
export async function rssOfTree (pid: number): Promise<number[]> {
  const pids = await tree(pid)
  const sizes = await Promise.all(pids.map(async (p) => {
    try {
      const status = await readFile(`/proc/${p}/status`, 'utf8')
      return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024
    } catch {
      return 0
    }
  }))
  return sizes.filter((size) => size > 0)
}
