// What the gateway pod of a rendered kustomization gets, for scripts/docker-k8s-check.sh to give the
// same to `docker run`: gateway.yaml from its ConfigMap, its environment (Secret values decoded), and
// the settings of its Deployment and of the Redis Deployment the overlay adds.
// Usage: node scripts/k8s-pod-env.mjs <rendered manifest> OUTDIR  -> OUTDIR/config/gateway.yaml, OUTDIR/env, OUTDIR/spec.json
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parse, parseAllDocuments } from 'yaml'

const [renderedFile, out] = process.argv.slice(2)
if (!renderedFile || !out) {
  process.stderr.write('usage: node scripts/k8s-pod-env.mjs RENDERED.yaml OUTDIR\n')
  process.exit(2)
}
const objects = parseAllDocuments(readFileSync(renderedFile, 'utf8')).map((doc) => doc.toJS())
const find = (kind, name) => {
  const found = objects.find((o) => o.kind === kind && (o.metadata.name === name || o.metadata.name.startsWith(`${name}-`)))
  if (!found) throw new Error(`no ${kind} named ${name} in ${renderedFile}`)
  return found
}

const deployment = find('Deployment', 'oauth-gateway')
const pod = deployment.spec.template.spec
const container = pod.containers.find((c) => c.name === 'gateway')
const secret = find('Secret', 'gateway-secrets')
const env = {}
for (const entry of container.env) {
  const ref = entry.valueFrom?.secretKeyRef
  if (ref && ref.name !== secret.metadata.name) throw new Error(`${entry.name} comes from an unknown Secret ${ref.name}`)
  // An optional key the Secret does not hold (GATEWAY_PREVIOUS_SECRET outside a rotation) is no variable, as in the pod.
  if (ref?.optional === true && secret.data?.[ref.key] === undefined) continue
  if (ref && secret.data?.[ref.key] === undefined) throw new Error(`${entry.name}: the Secret ${ref.name} has no key ${ref.key}`)
  env[entry.name] = ref ? Buffer.from(secret.data[ref.key], 'base64').toString('utf8') : entry.value
}
const configPath = env.GATEWAY_CONFIG ?? '/etc/gateway/gateway.yaml'
const configDir = configPath.slice(0, configPath.lastIndexOf('/'))
const mount = container.volumeMounts.find((m) => m.mountPath === configDir)
const configMapName = pod.volumes.find((v) => v.name === mount?.name)?.configMap?.name
const configMap = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === configMapName)
if (!configMap) throw new Error(`no ConfigMap mounted at ${configDir}`)
const gatewayYaml = configMap.data[configPath.slice(configDir.length + 1)]

// Hosts the config sends the gateway to on its own (provider discovery): the check maps them to the
// container's loopback, so nothing leaves the machine.
const config = parse(gatewayYaml)
const providerHosts = new Set()
for (const provider of Object.values(config.providers ?? {})) {
  for (const key of ['issuer', 'authorizeUrl', 'tokenUrl', 'userinfoUrl']) {
    if (typeof provider[key] === 'string' && !provider[key].includes('${')) providerHosts.add(new URL(provider[key]).hostname)
  }
}

const portOf = (name) => typeof name === 'number' ? name : container.ports.find((p) => p.name === name).containerPort
const redis = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'redis')
const redisContainer = redis?.spec.template.spec.containers[0]
const spec = {
  image: container.image,
  configDir,
  port: portOf(container.readinessProbe.httpGet.port),
  readinessPath: container.readinessProbe.httpGet.path,
  livenessPath: container.livenessProbe.httpGet.path,
  livenessPort: portOf(container.livenessProbe.httpGet.port),
  user: `${pod.securityContext.runAsUser}:${pod.securityContext.runAsGroup}`,
  readOnlyRootFilesystem: container.securityContext.readOnlyRootFilesystem === true,
  dropAll: container.securityContext.capabilities?.drop?.includes('ALL') === true,
  noNewPrivileges: container.securityContext.allowPrivilegeEscalation === false,
  writable: container.volumeMounts.filter((m) => pod.volumes.find((v) => v.name === m.name)?.emptyDir).map((m) => m.mountPath),
  memoryLimit: container.resources?.limits?.memory,
  terminationGracePeriodSeconds: pod.terminationGracePeriodSeconds,
  preStopSeconds: container.lifecycle?.preStop?.sleep?.seconds ?? 0,
  providerHosts: [...providerHosts],
  redis: redis && {
    serviceName: new URL(env.REDIS_URL).hostname,
    args: redisContainer.args ?? [],
    env: redisContainer.env ?? [],
    user: `${redis.spec.template.spec.securityContext.runAsUser}:${redis.spec.template.spec.securityContext.runAsGroup}`,
    writable: redisContainer.volumeMounts.map((m) => m.mountPath),
  },
}

mkdirSync(join(out, 'config'), { recursive: true })
writeFileSync(join(out, 'config', configPath.slice(configDir.length + 1)), gatewayYaml, { mode: 0o644 })
writeFileSync(join(out, 'env'), Object.entries(env).map(([k, v]) => `${k}=${v}\n`).join(''), { mode: 0o600 })
writeFileSync(join(out, 'spec.json'), JSON.stringify(spec, null, 2))
