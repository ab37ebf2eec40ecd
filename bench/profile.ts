// Reads a V8 .cpuprofile (from `node --cpu-prof`) and sums self time per function and per package,
// so `npm run bench -- --profile` can say where the gateway's CPU goes under load.
import { readFile } from 'node:fs/promises'

interface ProfileNode {
  id: number
  callFrame: { functionName: string, url: string, lineNumber: number }
  hitCount?: number
}

/** Where a script URL belongs: an npm package, node's own code, or the gateway's. */
function owner (url: string): string {
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)
  if (pkg) return pkg[1]!
  if (url.startsWith('node:') || url === '') return url === '' ? '(native / GC)' : 'node core'
  return /\/dist\/src\//.test(url) ? 'gateway' : url
}

/**
 * The stage of a proxied request a script belongs to (docs/performance.md, "Where a proxied request's
 * CPU goes"): self time only, so the socket work a stage causes shows under node core and native.
 */
export function stage (url: string): string {
  const own = /\/dist\/src\/([^/]+)\/([^/]+)\.js$/.exec(url)
  if (own) {
    const [, folder, file] = own
    if (folder === 'http' && file === 'edge') return 'edge (canonical target)'
    if (folder === 'config') return 'edge (canonical target)'
    if (folder === 'access' || folder === 'session' || folder === 'oauth' || (folder === 'routes' && file === 'proxy')) return 'gate (session, rules, verdict)'
    if (folder === 'ops' || (folder === 'http' && file === 'request-end')) return 'log line and metrics'
    if (folder === 'proxy' || folder === 'routes') return 'proxy (headers, pool, answer)'
    return `gateway, other (${folder})`
  }
  switch (owner(url)) {
    case 'ioredis': return 'gate (session, rules, verdict)'
    case '@fastify/reply-from': case '@fastify/http-proxy': case 'undici': return 'proxy (headers, pool, answer)'
    case 'pino': case 'sonic-boom': case 'prom-client': return 'log line and metrics'
    case 'fastify': case 'find-my-way': case 'avvio': case 'toad-cache': case '@fastify/error': return 'Fastify (routing, hooks, reply)'
    case 'node core': return 'node core (sockets, HTTP, streams)'
    case '(native / GC)': return 'native (syscalls, GC, parser)'
    default: return url.startsWith('wasm://') ? 'native (syscalls, GC, parser)' : 'other'
  }
}

export async function summarizeProfile (file: string, top = 25, usPerRequest?: number): Promise<string> {
  const profile = JSON.parse(await readFile(file, 'utf8')) as { nodes: ProfileNode[], samples: number[] }
  // Idle samples are time the process waited (e.g. while another target was loaded): left out.
  const idle = profile.nodes.filter((node) => node.callFrame.functionName === '(idle)').reduce((n, node) => n + (node.hitCount ?? 0), 0)
  const total = profile.samples.length - idle
  const byFunction = new Map<string, number>()
  const byOwner = new Map<string, number>()
  const byStage = new Map<string, number>()
  for (const node of profile.nodes) {
    const hits = node.hitCount ?? 0
    if (hits === 0 || node.callFrame.functionName === '(idle)') continue
    const { functionName, url, lineNumber } = node.callFrame
    const where = url ? `${url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*\/dist\//, 'dist/')}:${lineNumber + 1}` : ''
    const key = `${functionName || '(anonymous)'} ${where}`.trim()
    byFunction.set(key, (byFunction.get(key) ?? 0) + hits)
    byOwner.set(owner(url), (byOwner.get(owner(url)) ?? 0) + hits)
    byStage.set(stage(url), (byStage.get(stage(url)) ?? 0) + hits)
  }
  const rows = (map: Map<string, number>, n: number) => [...map].sort((a, b) => b[1] - a[1]).slice(0, n)
    .map(([name, hits]) => `| ${(100 * hits / total).toFixed(1)}% | ${name} |`).join('\n')
  const stages = [...byStage].sort((a, b) => b[1] - a[1])
    .map(([name, hits]) => `| ${(100 * hits / total).toFixed(1)}% | ${usPerRequest === undefined ? '' : `${(usPerRequest * hits / total).toFixed(1)} `}| ${name} |`).join('\n')
  return `Self time by stage of the request${usPerRequest === undefined ? '' : ` (µs of the ${usPerRequest} µs CPU per request measured under the profiler)`}:\n\n| share | µs per request | stage |\n|---|---|---|\n${stages}\n\n` +
    `Self time by owner (${total} busy samples):\n\n| share | owner |\n|---|---|\n${rows(byOwner, 15)}\n\n` +
    `Top ${top} functions by self time:\n\n| share | function |\n|---|---|\n${rows(byFunction, top)}\n`
}
