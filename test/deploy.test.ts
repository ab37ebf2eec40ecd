// The Kubernetes manifests (deploy/kubernetes): rendered with `kubectl kustomize` as CI and operators
// do, every object validated offline against the Kubernetes schemas (kubernetes-models), and held
// against the gateway itself: its config validates with the environment the pods get, the probes
// reach its port and endpoints, the grace period covers the preStop sleep plus shutdownTimeout.
// (scripts/docker-k8s-check.sh runs the image with that same environment and config.)
import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, relative, resolve } from 'node:path'
import { createRequire } from 'node:module'
import { parseAllDocuments, stringify } from 'yaml'
import { beforeAll, describe, expect, it } from 'vitest'
import { GATEWAY_NODE_ENV, GATEWAY_NODE_FLAGS, startCommandOf } from '../bench/targets.js'
import { ConfigError, parseConfig } from '../src/config/config.js'
import type { GatewayConfig } from '../src/config/types.js'

/** A rendered Kubernetes object, as much of it as these checks read. */
interface K8sObject {
  apiVersion: string
  kind: string
  metadata: { name: string, labels?: Record<string, string> }
  // any: rendered YAML, read field by field by the checks below (the schema check has seen it all).
  spec?: Record<string, any>
  data?: Record<string, string>
}

const BASE = 'deploy/kubernetes/base'
const OVERLAY = 'deploy/kubernetes/overlays/with-redis'

/** kubectl on PATH (or /usr/bin, /usr/local/bin); KUBECTL=path picks one, KUBECTL= (empty) acts as absent. */
function kubectl (): string | undefined {
  if (process.env.KUBECTL !== undefined) return process.env.KUBECTL || undefined
  for (const dir of (process.env.PATH ?? '').split(':').concat('/usr/bin', '/usr/local/bin')) {
    if (dir && existsSync(join(dir, 'kubectl'))) return join(dir, 'kubectl')
  }
  return undefined
}

const KUBECTL = kubectl()
if (!KUBECTL) {
  console.warn('!!! ============================================================================ !!!\n' +
    '!!! NO kubectl ON PATH: the Kubernetes manifests were NOT rendered or validated.      !!!\n' +
    '!!! Install kubectl (it bundles kustomize) to run test/deploy.test.ts.               !!!\n' +
    '!!! ============================================================================ !!!')
}

function render (dir: string): K8sObject[] {
  const out = execFileSync(KUBECTL!, ['kustomize', dir], { encoding: 'utf8' })
  return parseAllDocuments(out).map((doc) => doc.toJS() as K8sObject)
}

/** The kubernetes-models class for an object's apiVersion and kind (core `v1` is the folder `v1`). */
async function validatorFor (object: K8sObject): Promise<new (data: unknown) => { validate (): void }> {
  const path = `kubernetes-models/${object.apiVersion}/${object.kind}`
  const module = await import(/* @vite-ignore */ path) as Record<string, new (data: unknown) => { validate (): void }>
  const model = module[object.kind]
  if (!model) throw new Error(`kubernetes-models has no schema for ${object.apiVersion} ${object.kind}`)
  return model
}

async function schemaProblem (object: K8sObject): Promise<string | undefined> {
  const Model = await validatorFor(object)
  try {
    new Model(object).validate()
    return undefined
  } catch (error) {
    return `${object.kind}/${object.metadata.name}: ${(error as Error).message}`
  }
}

/**
 * Every field name the Kubernetes schemas know. Their validators accept unknown fields (the API
 * server's strict field validation is what refuses them), so a misspelt key such as `readinesProbe`
 * would pass silently: {@link unknownFields} flags any key that no schema names.
 */
let knownFields: Set<string> | undefined
function schemaFields (): Set<string> {
  if (knownFields) return knownFields
  const require = createRequire(import.meta.url)
  knownFields = new Set()
  for (const pkg of ['kubernetes-models', '@kubernetes-models/apimachinery']) {
    const dir = join(dirname(require.resolve(`${pkg}/package.json`)), '_schemas')
    for (const file of readdirSync(dir).filter((name) => name.endsWith('.js'))) {
      for (const match of readFileSync(join(dir, file), 'utf8').matchAll(/data\.([A-Za-z_$][\w$]*)/g)) knownFields.add(match[1]!)
    }
  }
  return knownFields
}

/** Maps whose keys are the operator's (labels, config data, resource names), not schema fields. */
const FREE_FORM = new Set(['labels', 'annotations', 'data', 'stringData', 'binaryData', 'matchLabels', 'nodeSelector', 'limits', 'requests'])

function unknownFields (value: unknown, path: string[] = [], kind = ''): string[] {
  if (Array.isArray(value)) return value.flatMap((item, i) => unknownFields(item, [...path, String(i)], kind))
  if (value === null || typeof value !== 'object') return []
  const known = schemaFields()
  return Object.entries(value).flatMap(([key, child]) => {
    const here = [...path, key]
    const freeForm = FREE_FORM.has(key) || (kind === 'Service' && here.join('.') === 'spec.selector')
    return [...(known.has(key) ? [] : [here.join('.')]), ...(freeForm ? [] : unknownFields(child, here, kind))]
  })
}

const find = (objects: K8sObject[], kind: string, name: string) => {
  const found = objects.find((o) => o.kind === kind && (o.metadata.name === name || o.metadata.name.startsWith(`${name}-`)))
  if (!found) throw new Error(`no ${kind} named ${name} in the rendered manifests`)
  return found
}

/** The gateway container of a rendered overlay, and what it reads: the env (secrets decoded) and gateway.yaml. */
function gatewayPod (objects: K8sObject[]) {
  const deployment = find(objects, 'Deployment', 'oauth-gateway')
  const pod = deployment.spec!.template.spec
  const container = pod.containers.find((c: { name: string }) => c.name === 'gateway')
  const secret = find(objects, 'Secret', 'gateway-secrets')
  const configMap = find(objects, 'ConfigMap', 'gateway-config')
  const env: Record<string, string> = {}
  for (const entry of container.env as Array<{ name: string, value?: string, valueFrom?: { secretKeyRef?: { name: string, key: string, optional?: boolean } } }>) {
    if (entry.value !== undefined) env[entry.name] = entry.value
    const ref = entry.valueFrom?.secretKeyRef
    // An optional key the Secret does not hold (GATEWAY_PREVIOUS_SECRET outside a rotation) is no variable.
    if (ref?.optional === true && secret.data?.[ref.key] === undefined) continue
    if (ref) {
      expect(ref.name, `${entry.name} comes from the generated Secret`).toBe(secret.metadata.name)
      env[entry.name] = Buffer.from(secret.data![ref.key]!, 'base64').toString('utf8')
    }
  }
  return { deployment, pod, container, secret, configMap, env, gatewayYaml: configMap.data!['gateway.yaml']! }
}

/** A step of a documented change rendered as an overlay of the base: its gateway.yaml (`edit` of the base's) and the Secret's keys it adds. */
function overlayStep (edit: (yaml: string) => string, secrets: Record<string, string>): K8sObject[] {
  const dir = mkdtempSync(join(tmpdir(), 'gw-step-'))
  writeFileSync(join(dir, 'gateway.yaml'), edit(readFileSync(join(BASE, 'gateway.yaml'), 'utf8')))
  writeFileSync(join(dir, 'kustomization.yaml'), stringify({
    resources: [relative(dir, resolve(BASE))],
    configMapGenerator: [{ name: 'gateway-config', behavior: 'replace', files: ['gateway.yaml'] }],
    secretGenerator: [{ name: 'gateway-secrets', behavior: 'merge', literals: Object.entries(secrets).map(([key, value]) => `${key}=${value}`) }],
  }))
  return render(dir)
}

/** Random secrets, as an operator replaces the placeholders with (openssl rand -base64 32). */
const REAL_SECRETS = {
  GATEWAY_SESSION_SECRET: 'q8Zr0sVt4mXw2yB7nC1eD5fG9hJ3kL6pQ0aS2dF4gH8=',
  OIDC_CLIENT_SECRET: 'w3Er5Ty7Ui9Op1As3Df5Gh7Jk9Lz2Xc4Vb6Nm8Qw0E=',
  REDIS_URL: 'redis://:5f0c8d6e2b9a47f1c3e8d0b6a2f4c9e7@redis:6379/0',
}

describe.skipIf(!KUBECTL)('Kubernetes manifests (kubectl kustomize + kubernetes-models)', () => {
  let base: K8sObject[]
  let overlay: K8sObject[]
  beforeAll(() => {
    base = render(BASE)
    overlay = render(OVERLAY)
  })

  it('the base renders a Deployment, Service, PodDisruptionBudget, ConfigMap and Secret', () => {
    expect(base.map((o) => o.kind).sort()).toEqual(['ConfigMap', 'Deployment', 'NetworkPolicy', 'PodDisruptionBudget', 'Secret', 'Service'])
  })

  it('every object of the base and of the with-redis overlay is valid against the Kubernetes schemas', async () => {
    const problems = []
    for (const object of [...base, ...overlay]) problems.push(await schemaProblem(object))
    expect(problems.filter(Boolean)).toEqual([])
  })

  it('no object carries a field the Kubernetes schemas do not know (a misspelt key fails)', () => {
    expect([...base, ...overlay].flatMap((o) => unknownFields(o, [], o.kind).map((path) => `${o.kind}/${o.metadata.name}: ${path}`))).toEqual([])
  })

  it('the validation is not vacuous: a wrong type and a misspelt field are both reported', async () => {
    const deployment = structuredClone(find(base, 'Deployment', 'oauth-gateway'))
    deployment.spec!.replicas = 'two'
    expect(await schemaProblem(deployment)).toMatch(/replicas must be integer/)
    const container = deployment.spec!.template.spec.containers[0]
    container.readinesProbe = container.readinessProbe
    expect(unknownFields(deployment, [], 'Deployment')).toEqual(['spec.template.spec.containers.0.readinesProbe'])
  })

  it('the gateway reads gateway.yaml from the mounted ConfigMap and every variable in it from the pod environment', () => {
    const { container, pod, configMap, env, gatewayYaml } = gatewayPod(overlay)
    const mount = container.volumeMounts.find((m: { mountPath: string }) => m.mountPath === dirname(env.GATEWAY_CONFIG!))
    expect(mount, 'a volume mounted at the directory of GATEWAY_CONFIG').toBeDefined()
    const volume = pod.volumes.find((v: { name: string }) => v.name === mount.name)
    expect(volume.configMap.name).toBe(configMap.metadata.name)
    const needed = [...gatewayYaml.matchAll(/\$\{(\w+)\}/g)].map((m) => m[1]!)
    expect(needed.length).toBeGreaterThan(0)
    for (const name of needed) expect(Object.keys(env), `${name} is set in the pod`).toContain(name)
  })

  it('gateway.yaml is valid with the pod environment once the placeholder secrets are replaced', () => {
    const { env, gatewayYaml } = gatewayPod(overlay)
    const config = parseConfig(gatewayYaml, { ...env, ...REAL_SECRETS })
    expect(config.store).toMatchObject({ type: 'redis', url: REAL_SECRETS.REDIS_URL })
    expect(config.session.secret).toBe(REAL_SECRETS.GATEWAY_SESSION_SECRET)
  })

  // A newcomer's finding: operations.md's Kubernetes steps for rotating the session secret named an
  // env entry base/deployment.yaml did not have, so step 1's pods refused to start.
  it('a session-secret rotation as operations.md writes it: the pods get GATEWAY_PREVIOUS_SECRET from the Secret, and gateway.yaml opens with both', () => {
    const docs = readFileSync('docs/operations.md', 'utf8')
    const lines = /under `session:`, only while a rotation is under way:\n\n```yaml\n([^`]+)```/.exec(docs)?.[1]
    expect(lines, 'operations.md shows the lines for gateway.yaml').toBeDefined()
    const { env, gatewayYaml } = gatewayPod(overlayStep(
      (yaml) => yaml.replace('session:\n', `session:\n${lines!.trimEnd().split('\n').map((line) => `  ${line}`).join('\n')}\n`),
      { GATEWAY_PREVIOUS_SECRET: REAL_SECRETS.OIDC_CLIENT_SECRET.split('').reverse().join('') }))
    const config = parseConfig(gatewayYaml, { ...env, ...REAL_SECRETS })
    expect(config.session.previousSecrets).toEqual([env.GATEWAY_PREVIOUS_SECRET])
    expect(gatewayPod(base).env).not.toHaveProperty('GATEWAY_PREVIOUS_SECRET')
  })

  // A re-reading's finding: forward-auth.md's change of the proxy secret named variables no pod had.
  it('a change of forwardAuth.proxySecret as forward-auth.md writes its step 1: the pods get both variables from the Secret', () => {
    const docs = readFileSync('docs/forward-auth.md', 'utf8')
    const block = /1\. On every instance of the gateway:[\s\S]*?```yaml\n([\s\S]*?)\s*```/.exec(docs)?.[1]
    expect(block, 'forward-auth.md shows step 1\'s lines').toBeDefined()
    const lines = block!.split('\n').map((line) => line.replace(/^ {3}/, '')).join('\n')
    const [current, previous] = ['tV8xQ2mK5pL9wR3nB7cD1fG4hJ6sA0zE2yU8iO5kM3=', 'Lp4Hs9Qd2Wm7Xc1Vb6Nz3Rk8Tf5Gy0Ju2Ai7Ko4Se9=']
    const { env, gatewayYaml } = gatewayPod(overlayStep((yaml) => `${yaml}\n${lines}`, { GATEWAY_FORWARD_AUTH_SECRET: current, GATEWAY_PREVIOUS_FORWARD_AUTH_SECRET: previous }))
    const config = parseConfig(gatewayYaml, { ...env, ...REAL_SECRETS })
    expect([config.forwardAuth.proxySecret, config.forwardAuth.previousProxySecrets]).toEqual([current, [previous]])
  })

  it('the shipped placeholder secrets are refused, so a deployment that forgot them does not start', () => {
    const { env, gatewayYaml } = gatewayPod(base)
    expect(env.GATEWAY_SESSION_SECRET).toBe('REPLACE-ME')
    expect(() => parseConfig(gatewayYaml, env)).toThrow(ConfigError)
    expect(() => parseConfig(gatewayYaml, env)).toThrow(/session\.secret/)
  })

  describe('the gateway Deployment', () => {
    let pod: ReturnType<typeof gatewayPod>
    let config: GatewayConfig
    beforeAll(() => {
      pod = gatewayPod(overlay)
      config = parseConfig(pod.gatewayYaml, { ...pod.env, ...REAL_SECRETS })
    })
    const port = (name: string) => pod.container.ports.find((p: { name: string }) => p.name === name)?.containerPort

    it('readiness asks /readyz and liveness /healthz, on the port the gateway listens on', () => {
      const { readinessProbe, livenessProbe, startupProbe } = pod.container
      expect(readinessProbe.httpGet.path).toBe('/readyz')
      expect(livenessProbe.httpGet.path).toBe('/healthz')
      expect(startupProbe.httpGet.path).toBe('/healthz')
      for (const probe of [readinessProbe, livenessProbe, startupProbe]) expect(port(probe.httpGet.port)).toBe(config.server.port)
      // /readyz waits up to 1 s for the store before answering 503: a shorter probe timeout would fail first.
      expect(readinessProbe.timeoutSeconds).toBeGreaterThan(1)
      expect(port('metrics')).toBe(config.metrics.listen?.port)
    })

    it('the grace period covers the preStop delay plus server.shutdownTimeout', () => {
      const preStop = pod.container.lifecycle.preStop.sleep.seconds as number
      expect(preStop).toBeGreaterThanOrEqual(3)
      expect(pod.pod.terminationGracePeriodSeconds).toBeGreaterThan(preStop + config.server.shutdownTimeoutMs / 1000)
    })

    it('runs as the image\'s non-root user with a read-only root filesystem, no privilege escalation and no capabilities', () => {
      expect(pod.pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1000 })
      expect(readFileSync('Dockerfile', 'utf8')).toMatch(/^USER node$/m) // uid 1000 in the node images
      expect(pod.container.securityContext).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, privileged: false, capabilities: { drop: ['ALL'] } })
      expect(pod.pod.automountServiceAccountToken).toBe(false)
    })

    it('asks for CPU and memory and has a memory limit', () => {
      expect(pod.container.resources.requests).toMatchObject({ cpu: expect.any(String), memory: expect.any(String) })
      expect(pod.container.resources.limits.memory).toEqual(expect.any(String))
    })

    it('runs the image of this version, several replicas, never fewer during a rollout', () => {
      const version = (JSON.parse(readFileSync('package.json', 'utf8')) as { version: string }).version
      expect(pod.container.image).toBe(`oauth-gateway:${version}`)
      expect(pod.deployment.spec!.replicas).toBeGreaterThan(1)
      expect(pod.deployment.spec!.strategy.rollingUpdate.maxUnavailable).toBe(0)
    })
  })

  it('the image, `npm start` and the benchmark run the gateway with the same node flags and environment', () => {
    const flags = GATEWAY_NODE_FLAGS.join(' ')
    const env = Object.entries(GATEWAY_NODE_ENV).map(([name, value]) => `${name}=${value}`)
    const start = (JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> }).scripts.start
    expect(start).toBe(`${env.join(' ')} exec node ${flags} dist/src/main.js`)
    const dockerfile = readFileSync('Dockerfile', 'utf8')
    const cmd = dockerfile.split('\n').filter((line) => line.startsWith('CMD ')).at(-1)
    expect(cmd).toBe(`CMD ${JSON.stringify(['node', ...GATEWAY_NODE_FLAGS, 'dist/src/main.js']).replaceAll(',', ', ')}`)
    // The final stage's ENV (after the last FROM) sets each variable.
    const finalStage = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '))
    for (const setting of env) expect(finalStage).toMatch(new RegExp(`^(ENV |\\s+)${setting}( \\\\)?$`, 'm'))
  })

  it('`npm run bench -- --against` reads a build\'s node flags and environment from its start script as `npm start` runs them', async () => {
    expect(await startCommandOf('package.json')).toEqual({ nodeArgs: GATEWAY_NODE_FLAGS, env: GATEWAY_NODE_ENV })
    const dir = mkdtempSync(join(tmpdir(), 'gw-start-'))
    const script = (start: string) => { writeFileSync(join(dir, 'package.json'), JSON.stringify({ scripts: { start } })); return join(dir, 'package.json') }
    expect(await startCommandOf(script('node dist/src/main.js'))).toEqual({ nodeArgs: [], env: {} })
    expect(await startCommandOf(script('A=1 B_C=x=y exec node --x=1 --y dist/src/main.js --config g.yaml'))).toEqual({ nodeArgs: ['--x=1', '--y'], env: { A: '1', B_C: 'x=y' } })
    await expect(startCommandOf(script('tsx src/main.ts'))).rejects.toThrow(/does not run node/)
  })

  it('the Service and the PodDisruptionBudget select the gateway pods, and the budget allows a drain', () => {
    const { deployment, container } = gatewayPod(base)
    const labels = deployment.spec!.template.metadata.labels as Record<string, string>
    const service = find(base, 'Service', 'oauth-gateway')
    expect(labels).toMatchObject(service.spec!.selector)
    expect(container.ports.map((p: { name: string }) => p.name)).toContain(service.spec!.ports[0].targetPort)
    const pdb = find(base, 'PodDisruptionBudget', 'oauth-gateway')
    expect(labels).toMatchObject(pdb.spec!.selector.matchLabels)
    expect(pdb.spec!.minAvailable).toBeLessThan(deployment.spec!.replicas)
  })

  it('the with-redis overlay points REDIS_URL at its Redis Service, which only the gateway pods may reach', () => {
    const { env } = gatewayPod(overlay)
    const redisUrl = new URL(env.REDIS_URL!)
    const service = find(overlay, 'Service', redisUrl.hostname)
    expect(service.spec!.ports.map((p: { port: number }) => p.port)).toContain(Number(redisUrl.port))
    const redis = find(overlay, 'Deployment', 'redis')
    expect(redis.spec!.template.metadata.labels).toMatchObject(service.spec!.selector)
    const container = redis.spec!.template.spec.containers[0]
    expect(container.securityContext).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } })
    const policy = find(overlay, 'NetworkPolicy', 'redis')
    expect(redis.spec!.template.metadata.labels).toMatchObject(policy.spec!.podSelector.matchLabels)
    expect(policy.spec!.ingress[0].from[0].podSelector.matchLabels).toEqual({ 'app.kubernetes.io/name': 'oauth-gateway' })
    // The base alone expects the operator's Redis; only the overlay's Secret names this one.
    expect(gatewayPod(base).env.REDIS_URL).toContain('REPLACE-ME')
  })

  it('the with-redis overlay\'s Redis asks for the password the gateway sends, and refuses writes when full rather than being killed', () => {
    const { env, secret, gatewayYaml } = gatewayPod(overlay)
    const redis = find(overlay, 'Deployment', 'redis').spec!.template.spec.containers[0]
    const args = redis.args as string[]
    const option = (name: string) => args[args.indexOf(name) + 1]
    expect(option('--requirepass')).toBe('$(REDIS_PASSWORD)')
    expect(redis.env).toEqual([{ name: 'REDIS_PASSWORD', valueFrom: { secretKeyRef: { name: secret.metadata.name, key: 'REDIS_PASSWORD' } } }])
    const password = Buffer.from(secret.data!.REDIS_PASSWORD!, 'base64').toString('utf8')
    expect(new URL(env.REDIS_URL!).password).toBe(password)
    expect(option('--maxmemory-policy')).toBe('noeviction')
    expect(Number.parseInt(option('--maxmemory')!, 10) * 1024 * 1024).toBeLessThan(256 * 1024 * 1024)
    expect(redis.resources.limits.memory).toBe('256Mi')
    // Both are placeholders: a deployment that forgot them does not start.
    expect(password).toBe('REPLACE-ME')
    expect(() => parseConfig(gatewayYaml, { ...env, GATEWAY_SESSION_SECRET: REAL_SECRETS.GATEWAY_SESSION_SECRET, OIDC_CLIENT_SECRET: REAL_SECRETS.OIDC_CLIENT_SECRET })).toThrow(/store\.url/)
  })

  it('only the ingress controller\'s namespace reaches the gateway\'s port, and only the monitoring namespace its metrics', () => {
    const { deployment, container } = gatewayPod(base)
    const policy = find(base, 'NetworkPolicy', 'oauth-gateway')
    expect(deployment.spec!.template.metadata.labels).toMatchObject(policy.spec!.podSelector.matchLabels)
    expect(policy.spec!.policyTypes).toEqual(['Ingress'])
    const rules = policy.spec!.ingress as Array<{ from: Array<{ namespaceSelector?: { matchLabels: Record<string, string> }, podSelector?: unknown }>, ports: Array<{ port: string }> }>
    expect(rules.map((rule) => [rule.from.map((peer) => peer.namespaceSelector?.matchLabels), rule.ports.map((port) => port.port)])).toEqual([
      [[{ 'kubernetes.io/metadata.name': 'ingress-nginx' }], ['http']],
      [[{ 'kubernetes.io/metadata.name': 'monitoring' }], ['metrics']],
    ])
    // The named ports are the container's: the gateway's and its metrics listener's.
    expect(container.ports.map((port: { name: string }) => port.name).sort()).toEqual(['http', 'metrics'])
  })
})
