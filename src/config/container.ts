// Loopback addresses in a container. Inside a container, `localhost` is the container itself: an
// issuer, upstream or Redis on `localhost`, written for a run on the host, is then refused or
// reaches the wrong thing. It is a warning, not an error: in a Kubernetes pod, localhost is also
// each sidecar, and that may be meant. The probe is injectable, and GATEWAY_IN_CONTAINER (true or
// false) overrides what it finds (false: silence the warnings where localhost is meant).
import { existsSync } from 'node:fs'
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

/** The host of a URL (`redis://h:6379`, `http://[::1]:80`) or of `host:port` (a cluster or sentinel node). */
function hostOf (address: string): string | undefined {
  try {
    return new URL(address.includes('://') ? address : `tcp://${address}`).hostname
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

/** One warning per address on a loopback host, when this process runs in a container. */
export function containerWarnings (config: GatewayConfig, container: boolean): string[] {
  if (!container) return []
  return addresses(config).flatMap(([key, address]) => {
    const host = hostOf(address)
    if (host === undefined || !isLoopbackHost(host)) return []
    return [`${key}: ${host} is this container itself, not the machine it runs on; ` +
      'use the service\'s name on the container network (or host.docker.internal), or set GATEWAY_IN_CONTAINER=false if it is meant (a sidecar)']
  })
}
