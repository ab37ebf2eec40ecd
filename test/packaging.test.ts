// What can be checked without a Docker engine: docker-compose.yml parses, and its ports, variable
// names and config paths agree with gateway.yaml, the Dockerfile and the demo runner. (With an
// engine, CI also builds and runs both: scripts/docker-image-check.sh, scripts/compose-check.sh.)
import { readFile } from 'node:fs/promises'
import { parse } from 'yaml'
import { beforeAll, describe, expect, it } from 'vitest'
import { parseConfig } from '../src/config/config.js'

interface Service {
  image?: string
  command?: string[]
  build?: { context: string, target?: string, network?: string, args?: Record<string, string> }
  environment?: Record<string, string>
  ports?: string[]
  volumes?: string[]
  network_mode?: string
  depends_on?: string[]
}

let compose: { services: Record<string, Service> }
let dockerfile: string
let gatewayYaml: string

/** Resolves compose's ${VAR:-default} with an empty environment, as `docker compose up` would here. */
const defaults = (value: string) => value.replace(/\$\{(\w+)(?::-([^}]*))?\}/g, (_m, _name: string, fallback?: string) => fallback ?? '')

beforeAll(async () => {
  compose = parse(await readFile('docker-compose.yml', 'utf8')) as typeof compose
  dockerfile = await readFile('Dockerfile', 'utf8')
  gatewayYaml = await readFile('gateway.yaml', 'utf8')
})

describe('packaging', () => {
  it('compose has redis (persistent), the gateway image and the demo image', () => {
    expect(Object.keys(compose.services).sort()).toEqual(['demo', 'gateway', 'redis'])
    expect(compose.services.redis!.command).toEqual(expect.arrayContaining(['--appendonly', 'yes']))
    expect(compose.services.redis!.volumes).toEqual(['redis-data:/data'])
    expect(compose.services.demo!.build!.target).toBe('demo')
    expect(dockerfile).toMatch(/^FROM build AS demo$/m)
    expect(compose.services.gateway!.build!.target).toBeUndefined()
  })

  it('the gateway listens where the demo service publishes it, with the Dockerfile config path and health check', () => {
    const gateway = compose.services.gateway!
    expect(gateway.network_mode).toBe('service:demo')
    const port = defaults(gateway.environment!.GATEWAY_PORT!)
    expect(compose.services.demo!.ports!.map(defaults)).toContain(`127.0.0.1:${port}:${port}`)
    expect(dockerfile).toContain('GATEWAY_PORT=8080')
    expect(dockerfile).toContain('EXPOSE 8080')
    const configPath = /GATEWAY_CONFIG=(\S+)/.exec(dockerfile)![1]
    expect(gateway.volumes).toContain(`./gateway.yaml:${configPath}:ro`)
    expect(dockerfile).toContain(`COPY gateway.yaml ${configPath}`)
    expect(dockerfile).toMatch(/HEALTHCHECK[\s\S]*\/healthz/)
  })

  it('every variable compose gives the gateway is one gateway.yaml or the gateway itself reads', async () => {
    // GATEWAY_IN_CONTAINER=false: the gateway shares the demo container's network, so its localhost is meant.
    const container = await readFile('src/config/container.ts', 'utf8')
    expect(container).toContain('env.GATEWAY_IN_CONTAINER')
    expect(compose.services.gateway!.environment!.GATEWAY_IN_CONTAINER).toBe('false')
    const read = new Set([...gatewayYaml.matchAll(/\$\{(\w+)/g)].map((m) => m[1]).concat('GATEWAY_IN_CONTAINER'))
    for (const name of Object.keys(compose.services.gateway!.environment!)) expect(read, name).toContain(name)
  })

  it('gateway.yaml is valid with the environment compose gives it, wired to the demo service', () => {
    const env = Object.fromEntries(Object.entries(compose.services.gateway!.environment!).map(([k, v]) => [k, defaults(String(v))]))
    const config = parseConfig(gatewayYaml, { ...env, GATEWAY_HOST: '0.0.0.0' })
    expect(config.store).toMatchObject({ type: 'redis', url: 'redis://redis:6379/0' })
    expect(config.session.secret).toBeDefined()
    expect(config.server.baseUrl).toBe(`http://localhost:${config.server.port}`)
    expect(config.providers.demo!.issuer).toBe('http://localhost:9000')
    expect(config.routes[0]!.upstream).toBe('http://127.0.0.1:9100')
  })

  it('the demo service and the gateway agree on ports, the client secret and the public URLs', () => {
    const demo = compose.services.demo!.environment!
    const gateway = compose.services.gateway!.environment!
    expect(defaults(demo.DEMO_PUBLIC_ISSUER!)).toBe(defaults(gateway.DEMO_ISSUER!))
    expect(defaults(demo.DEMO_GATEWAY_URL!)).toBe(defaults(gateway.GATEWAY_BASE_URL!))
    expect(demo.DEMO_CLIENT_SECRET).toBe(gateway.DEMO_CLIENT_SECRET)
    const issuerPort = defaults(demo.DEMO_ISSUER_PORT!)
    expect(compose.services.demo!.ports!.map(defaults)).toContain(`127.0.0.1:${issuerPort}:${issuerPort}`)
    expect(dockerfile).toMatch(/EXPOSE 9000 9100/)
  })

  it('engines admits the maintained LTS lines (22 from 22.22, 24, 26) and not Node 20, past its end of life', async () => {
    const engines = (JSON.parse(await readFile('package.json', 'utf8')) as { engines: { node: string } }).engines.node
    const match = /^>=(\d+)\.(\d+)$/.exec(engines)
    expect(match, `engines.node is a plain lower bound, got ${engines}`).not.toBeNull()
    const admits = (version: string) => {
      const [major, minor] = version.split('.').map(Number) as [number, number]
      return major > Number(match![1]) || (major === Number(match![1]) && minor >= Number(match![2]))
    }
    for (const version of ['22.22.0', '24.11.0', '26.0.0']) expect(admits(version), version).toBe(true)
    for (const version of ['20.19.0', '22.12.0']) expect(admits(version), version).toBe(false)
  })

  it('the image defaults to the slim image of the LTS line CI tests on, which engines admits', async () => {
    const base = /^ARG NODE_IMAGE=node:(\d+)-bookworm-slim$/m.exec(dockerfile)
    expect(base, 'the Dockerfile\'s default NODE_IMAGE').not.toBeNull()
    const ci = await readFile('.ci/run', 'utf8')
    expect(ci).toContain(`CI_NODE_LINE=\${CI_NODE_LINE:-${base![1]}}`)
    expect(Number(base![1])).toBeGreaterThanOrEqual(24)
    for (const service of Object.values(compose.services)) {
      if (service.build?.args?.NODE_IMAGE) expect(defaults(service.build.args.NODE_IMAGE)).toBe(`node:${base![1]}-bookworm-slim`)
    }
  })

  it('only loopback ports are published', () => {
    for (const service of Object.values(compose.services)) {
      for (const port of service.ports ?? []) expect(port).toMatch(/^127\.0\.0\.1:/)
    }
  })
})
