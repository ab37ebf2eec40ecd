// A real nginx or Caddy in front of the gateway, for `npm run demo -- --forward-auth` and the
// forward-auth tests: the config is an operator's file from docs/forward-auth/ with only its
// addresses and served name replaced, wrapped in the few process-level settings a local run needs
// (no daemon, files in a temporary folder, no admin API, no certificates).
// Listens on a loopback port from the OS, held from the moment the OS gives it until the proxy answers
// on it (see `holdFrontPort`).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { request } from 'node:http'
import { createServer, type AddressInfo, type Server } from 'node:net'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

export type FrontKind = 'nginx' | 'caddy'

/** The operator's files the tests run (docs/forward-auth.md shows them verbatim). */
export const FRONT_TEMPLATES: Record<FrontKind, string> = {
  nginx: 'docs/forward-auth/nginx.conf',
  caddy: 'docs/forward-auth/Caddyfile',
}

/** The repository, where FRONT_TEMPLATES are: this file runs as demo/front-proxy.ts (tests) and as dist/demo/front-proxy.js (the demo). */
const ROOT = fileURLToPath(new URL(import.meta.url.includes('/dist/demo/') ? '../../' : '../', import.meta.url))

/** The addresses the templates use, and what a test puts in their place. */
export interface FrontAddresses {
  /** The port the proxy listens on (127.0.0.1). */
  port: number
  /** The gateway's host:port (in place of 127.0.0.1:8080). */
  gateway: string
  /** The application's host:port (in place of 127.0.0.1:9100). */
  upstream: string
  /**
   * The name the site is served as, in place of app.example.com; 127.0.0.1 by default. nginx's
   * server_name, and the X-Forwarded-Host it sends with `:port` (so that the gateway's return URL
   * is one the test can follow); Caddy's site address, with `:port`.
   */
  host?: string
}

export interface FrontProxy {
  url: string
  /** The loopback port it listens on. */
  port: number
  /** The config file as run. */
  config: string
  stop (): Promise<void>
}

/** The binary of `kind`, or undefined when it is not installed. */
export function frontBinary (kind: FrontKind): string | undefined {
  const candidates = kind === 'nginx' ? ['/usr/sbin/nginx', '/usr/local/sbin/nginx', '/usr/local/nginx/sbin/nginx'] : ['/usr/bin/caddy', '/usr/local/bin/caddy']
  const found = candidates.find((path) => existsSync(path))
  if (found) return found
  const which = spawnSync('sh', ['-c', `command -v ${kind}`], { encoding: 'utf8' })
  return which.status === 0 && which.stdout.trim() !== '' ? which.stdout.trim() : undefined
}

/** The template with only its addresses and served name replaced; throws when one is missing (the docs changed). */
export async function renderTemplate (kind: FrontKind, addresses: FrontAddresses): Promise<string> {
  const template = await readFile(join(ROOT, FRONT_TEMPLATES[kind]), 'utf8')
  const host = addresses.host ?? '127.0.0.1'
  const site: Array<[string, string]> = kind === 'nginx'
    ? [
        ['listen 80;', `listen 127.0.0.1:${addresses.port};`],
        ['listen 80 default_server;', `listen 127.0.0.1:${addresses.port} default_server;`],
        ['server_name app.example.com;', `server_name ${host};`],
        ['X-Forwarded-Host app.example.com;', `X-Forwarded-Host ${host}:${addresses.port};`],
      ]
    : [['app.example.com {', `http://${host}:${addresses.port} {`]]
  const replacements: Array<[string, string]> = [
    ['127.0.0.1:8080', addresses.gateway],
    ['127.0.0.1:9100', addresses.upstream],
    ...site,
  ]
  let text = template
  for (const [from, to] of replacements) {
    if (!text.includes(from)) throw new Error(`${FRONT_TEMPLATES[kind]} no longer contains "${from}"`)
    text = text.replaceAll(from, to)
  }
  return text
}

/** Whether the proxy answers HTTP for `host` (nginx closes the connection of a name it does not serve). */
async function answers (port: number, host: string): Promise<boolean> {
  return await new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/', headers: { host, accept: 'application/json' } }, (res) => {
      res.resume()
      res.on('end', () => resolve(true))
    })
    req.on('error', reject)
    req.end()
  })
}

function nginxMain (dir: string): string {
  return `daemon off;
master_process off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  include ${dir}/site.conf;
}
`
}

function caddyMain (dir: string): string {
  return `{
  admin off
  auto_https off
  storage file_system ${dir}/data
}
import ${dir}/site.Caddyfile
`
}

/** A port {@link holdFrontPort} holds for a proxy {@link startFrontProxy} starts. */
export interface HeldPort {
  port: number
  release (): Promise<void>
}

/**
 * A loopback port from the OS (or `port`, the demo's fixed one), bound with SO_REUSEPORT and kept bound until the proxy (which binds
 * it with SO_REUSEPORT too: Caddy always does, nginx with `reuseport`) answers on it. A port freed
 * before the proxy starts can be taken in between as the local port of one of the suite's outgoing
 * connections, and the proxy then exits with "address already in use". A connection the kernel
 * hands to this socket meanwhile is closed, and the readiness probe asks again.
 */
export async function holdFrontPort (port = 0): Promise<HeldPort> {
  const server: Server = createServer((socket) => socket.destroy())
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen({ port, host: '127.0.0.1', reusePort: SHARES_PORTS }, resolve)
  })
  server.unref()
  const held = (server.address() as AddressInfo).port
  return { port: held, release: async () => { if (server.listening) await new Promise<void>((resolve) => server.close(() => resolve())) } }
}

/**
 * Whether this Node binds with SO_REUSEPORT (22.12 and later, every supported line). On the machine's
 * Node 20 (unsupported) the held port is let go right before the proxy starts: a window of the
 * proxy's start-up instead of none.
 */
const SHARES_PORTS = Number(process.versions.node.split('.')[0]) >= 22

/**
 * The file as run on the held port: nginx with `reuseport` on the one listen line that opens it (nginx
 * takes it once per address); Caddy (which always sets SO_REUSEPORT) bound to 127.0.0.1, as the held
 * socket is: it would bind every interface, and the kernel would keep handing connections to the more
 * specific held socket.
 */
function onHeldPort (kind: FrontKind, config: string, addresses: FrontAddresses): string {
  if (kind === 'nginx' && !SHARES_PORTS) return config
  const [line, shared] = kind === 'nginx'
    ? [`listen 127.0.0.1:${addresses.port} default_server;`, `listen 127.0.0.1:${addresses.port} default_server reuseport;`]
    : [`http://${addresses.host ?? '127.0.0.1'}:${addresses.port} {`, `http://${addresses.host ?? '127.0.0.1'}:${addresses.port} {\n  bind 127.0.0.1`]
  if (!config.includes(line)) throw new Error(`the ${kind} file has no "${line}"`)
  return config.replace(line, shared)
}

/**
 * Starts `kind` with its docs template on a loopback port from the OS (`where.port`, when the caller
 * must know it first, as a gateway's allowed redirect host); resolves once it answers HTTP.
 * @param edit a change to the rendered file, for a test that shows a line of it matters (it must
 *   change something)
 */
export async function startFrontProxy (kind: FrontKind, where: Omit<FrontAddresses, 'port'> & { port?: HeldPort }, edit?: (config: string) => string): Promise<FrontProxy> {
  const binary = frontBinary(kind)
  if (!binary) throw new Error(`${kind} is not installed (.ci/run installs it)`)
  const held = where.port ?? await holdFrontPort()
  const addresses: FrontAddresses = { ...where, port: held.port }
  const rendered = await renderTemplate(kind, addresses)
  const config = edit ? edit(rendered) : rendered
  if (config === rendered && edit) throw new Error(`the edit changed nothing in ${FRONT_TEMPLATES[kind]}`)
  return await runFront(kind, binary, config, addresses, held)
}

/** Resolves once the proxy answers HTTP for its served name; throws after `timeoutMs`. */
async function answering (addresses: FrontAddresses, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (await answers(addresses.port, `${addresses.host ?? '127.0.0.1'}:${addresses.port}`).catch(() => false)) return
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
}

/** Runs `kind` with the site `config` on the held port; resolves once it answers HTTP. */
export async function runFront (kind: FrontKind, binary: string, config: string, addresses: FrontAddresses, held: HeldPort): Promise<FrontProxy> {
  const dir = await mkdtemp(join(tmpdir(), `gw-${kind}-`))
  let child: ChildProcess
  if (!SHARES_PORTS) await held.release()
  if (kind === 'nginx') {
    await writeFile(join(dir, 'site.conf'), onHeldPort(kind, config, addresses))
    await writeFile(join(dir, 'nginx.conf'), nginxMain(dir))
    child = spawn(binary, ['-p', dir, '-e', join(dir, 'error.log'), '-c', join(dir, 'nginx.conf')], { stdio: ['ignore', 'pipe', 'pipe'] })
  } else {
    await writeFile(join(dir, 'site.Caddyfile'), onHeldPort(kind, config, addresses))
    await writeFile(join(dir, 'Caddyfile'), caddyMain(dir))
    child = spawn(binary, ['run', '--config', join(dir, 'Caddyfile'), '--adapter', 'caddyfile'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, HOME: dir, XDG_DATA_HOME: join(dir, 'data'), XDG_CONFIG_HOME: join(dir, 'config') },
    })
  }
  let output = ''
  child.stdout?.on('data', (chunk: Buffer) => { output += chunk.toString() })
  child.stderr?.on('data', (chunk: Buffer) => { output += chunk.toString() })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const url = `http://127.0.0.1:${addresses.port}`
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM')
      await exited
    }
    await rm(dir, { recursive: true, force: true })
  }
  try {
    await Promise.race([
      answering(addresses, 15_000, `${kind} on ${url}`),
      exited.then(() => { throw new Error(`${kind} exited`) }),
    ])
  } catch (error) {
    const log = kind === 'nginx' ? await readFile(join(dir, 'error.log'), 'utf8').catch(() => '') : ''
    await held.release()
    await stop()
    throw new Error(`${kind} did not start: ${String(error)}\n${output}\n${log}`)
  }
  await held.release()
  return { url, port: addresses.port, config, stop }
}
