// Loopback addresses in a container. Inside a container, `localhost` is the container itself: an
// issuer, upstream or Redis on `localhost`, written for a run on the host, is then refused or
// reaches the wrong thing. It is a warning, not an error: in a Kubernetes pod, localhost is also
// each sidecar, and that may be meant. So it is given only where the address would really break:
// where nothing in this container accepts a connection on it (a demo or a sidecar in the same
// container does). The probes are injectable, and GATEWAY_IN_CONTAINER (true or false) overrides
// what the container probe finds (false: silence the warnings where localhost is meant).
import { existsSync } from 'node:fs'
import { connect } from 'node:net'
import { isLoopbackHost } from './loopback.js'
import type { GatewayConfig } from './types.js'

/** What the container probe looks at. */
export interface ContainerProbe {
  exists: (path: string) => boolean
  env: Record<string, string | undefined>
}

const processProbe: ContainerProbe = { exists: existsSync, env: process.env }

/** Docker's and Podman's marker files, or a Kubernetes pod's service variable. */
export function inContainer (probe: ContainerProbe = processProbe): boolean {
  const told = probe.env.GATEWAY_IN_CONTAINER?.trim().toLowerCase()
  if (told === 'true' || told === 'false') return told === 'true'
  return probe.exists('/.dockerenv') || probe.exists('/run/.containerenv') || (probe.env.KUBERNETES_SERVICE_HOST ?? '') !== ''
}

/** Whether something accepts a TCP connection at `host`:`port` (loopback: it answers at once, or within `LISTEN_PROBE_MS`). */
export type ListeningProbe = (host: string, port: number) => Promise<boolean>

/** How long a loopback connection may take before the address counts as not answering. */
const LISTEN_PROBE_MS = 1000
const DEFAULT_PORTS: Record<string, number> = { 'http:': 80, 'https:': 443, 'redis:': 6379, 'rediss:': 6379 }

const tcpListening: ListeningProbe = async (host, port) => await new Promise((resolve) => {
  const socket = connect({ host, port, timeout: LISTEN_PROBE_MS })
  const done = (answer: boolean) => { socket.destroy(); resolve(answer) }
  socket.once('connect', () => done(true))
  socket.once('error', () => done(false))
  socket.once('timeout', () => done(false))
})

/** The host and port of a URL (`redis://h:6379`, `http://[::1]:80`) or of `host:port` (a cluster or sentinel node). */
function hostOf (address: string): { host: string, port: number } | undefined {
  try {
    const url = new URL(address.includes('://') ? address : `tcp://${address}`)
    return { host: url.hostname, port: url.port === '' ? DEFAULT_PORTS[url.protocol] ?? 0 : Number(url.port) }
  } catch {
    return undefined
  }
}

/** Every address the gateway connects to, with the key that sets it. */
function addresses (config: GatewayConfig): Array<[key: string, address: string]> {
  const out: Array<[string, string | undefined]> = []
  for (const provider of Object.values(config.providers)) {
    const at = `providers.${provider.name}`
    out.push([`${at}.issuer`, provider.issuer], [`${at}.authorizeUrl`, provider.authorizeUrl], [`${at}.tokenUrl`, provider.tokenUrl], [`${at}.userinfoUrl`, provider.userinfoUrl])
  }
  config.routes.forEach((route, i) => out.push([`routes[${i}].upstream`, route.upstream]))
  const { store } = config
  if (store.type === 'redis') {
    out.push(['store.url', store.url])
    store.cluster?.forEach((node, i) => out.push([`store.cluster[${i}]`, node]))
    store.sentinel?.nodes.forEach((node, i) => out.push([`store.sentinel.nodes[${i}]`, node]))
  }
  out.push(['tracing.otlp', config.tracing.otlp])
  return out.filter((entry): entry is [string, string] => entry[1] !== undefined)
}

/**
 * One warning per address on a loopback host where nothing in this container listens, when this
 * process runs in a container.
 */
export async function containerWarnings (config: GatewayConfig, container: boolean, listening: ListeningProbe = tcpListening): Promise<string[]> {
  if (!container) return []
  const warnings = await Promise.all(addresses(config).map(async ([key, address]) => {
    const at = hostOf(address)
    if (at === undefined || !isLoopbackHost(at.host)) return []
    // A name under .localhost is looked up like any other name: connect to the loopback address it means.
    const probeHost = at.host.startsWith('[') ? at.host.slice(1, -1) : at.host.endsWith('.localhost') ? '127.0.0.1' : at.host
    if (at.port !== 0 && await listening(probeHost, at.port)) return []
    return [`${key}: ${at.host} is this container itself, not the machine it runs on, and nothing listens there in this container; ` +
      'use the service\'s name on the container network (or host.docker.internal), or set GATEWAY_IN_CONTAINER=false if it is meant (a sidecar)']
  }))
  return warnings.flat()
}
