// `npm run bench -- --signin`: a sign-in storm. `concurrency` browser-like clients (node fetch with
// a cookie jar: test/helpers/browser.ts, which fills in the provider's forms) each sign in again
// and again, every time as a new user with an empty cookie jar, through the whole flow against the
// real authorization server: GET the protected URL -> 302 to the gateway's login -> 302 to the
// provider -> its login form and consent -> the gateway's callback (which exchanges the code,
// checks the ID token, fetches userinfo and writes the session) -> 302 -> the first proxied request.
// The provider runs in a process of its own (bench/as-process.ts), so the gateway's CPU, the
// provider's and the load's are read apart from /proc. The same storm then runs against Apache +
// mod_auth_openidc beside the same provider and Redis when it is installed.
import { mkdtemp, readFile, readdir } from 'node:fs/promises'
import { availableParallelism, tmpdir } from 'node:os'
import { basename, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Browser } from '../test/helpers/browser.js'
import { freePort } from '../test/helpers/net.js'
import { startRedis } from '../test/helpers/redis.js'
import { apacheBinary, apacheRedirectUri, startApache } from './apache.js'
import { summarizeProfile } from './profile.js'
import { Stops, mean, measured, quantile, round, startProviderProcess, type ProviderProcess } from './stack.js'
import type { MemoryPeak } from './memory-sampler.js'
import { cpuOfTree, startGateway, startUpstream, type StartCommand, type Target } from './targets.js'

export interface SigninOptions {
  /** Sign-ins measured per target (after a warm-up of `concurrency` sign-ins). */
  signins: number
  /** Clients signing in at once. */
  concurrency: number
  /** Run the gateway under node --cpu-prof and summarise where its CPU went. */
  profile: boolean
  logLevel: string
  /** Leave Apache out even when it is installed. */
  noApache?: boolean
  /** Also storm `workers: auto` and three one-worker instances on one Redis (all cores). */
  scaling?: boolean
}

/** One way of starting the 1-worker gateway, for an A/B of memory and CPU in one run. */
export interface SigninVariant {
  name: string
  nodeArgs?: string[]
  env?: Record<string, string>
  /** Another build's entry point (default dist/src/main.js). */
  main?: string
  /** That build's own `npm start` flags and environment (default: this build's). */
  startCommand?: StartCommand
}

/** The hops of one sign-in that the target (not the provider) answers, in ms from request to response headers. */
type Hop = 'protected' | 'login' | 'callback' | 'proxied'

interface SigninSample {
  hops: Partial<Record<Hop, number>>
  account: string
  totalMs: number
}

export interface SigninResult {
  target: string
  signins: number
  failures: number
  seconds: number
  perSecond: number
  /** The target's CPU (all its processes) per sign-in, ms. */
  cpuMsPerSignin: number
  /** The provider's CPU per sign-in, ms (who saturates first). */
  providerCpuMsPerSignin: number
  peakRssMb: number
  hops: Record<Hop, { p50: number, p99: number }>
  /** The callback hop minus the provider's own time for that sign-in's back-channel calls (token, userinfo). */
  callbackOwn: { p50: number, p99: number, mean: number }
  /** The gateway's own time per sign-in: its hops, without the provider's back-channel time. */
  ownMsPerSignin: { p50: number, p99: number }
  totalMs: { p50: number, p99: number }
  /** What the gateway's largest process held at its highest resident size (from bench/memory-sampler.ts). */
  memoryAtPeak?: MemoryPeak
}

class TimedBrowser extends Browser {
  readonly timed: Array<{ url: string, ms: number }> = []

  override async fetch (url: string, init: RequestInit = {}): Promise<Response> {
    const started = performance.now()
    const response = await super.fetch(url, init)
    this.timed.push({ url, ms: performance.now() - started })
    return response
  }
}

/** One whole sign-in as a new user; the target's hops are told apart by origin and path. */
async function signIn (target: Target, account: string, callbackPath: string): Promise<SigninSample> {
  const browser = new TimedBrowser()
  const started = performance.now()
  const landed = await browser.navigate(`${target.url}/app/signin`, { login: account })
  const body = await landed.text()
  if (landed.status !== 200) throw new Error(`sign-in ended with ${landed.status}: ${body.slice(0, 200)}`)
  const totalMs = performance.now() - started
  const origin = new URL(target.url).origin
  const hops: Partial<Record<Hop, number>> = {}
  const own = browser.timed.filter((t) => t.url.startsWith(origin))
  for (const [i, t] of own.entries()) {
    const path = new URL(t.url).pathname
    const hop: Hop = path.startsWith('/oauth/login/') ? 'login' : path.startsWith(callbackPath) ? 'callback' : i === 0 ? 'protected' : 'proxied'
    hops[hop] = (hops[hop] ?? 0) + t.ms
  }
  return { hops, account, totalMs }
}

let accountSeq = 0

/**
 * `count` sign-ins by `concurrency` clients at once; failures are counted, not thrown. With several
 * instances (one Redis), each client signs in at instance (client number mod instances), as a load
 * balancer spreading browsers would.
 */
async function storm (targets: Target[], count: number, concurrency: number, callbackPath: string, tag: string): Promise<{ samples: SigninSample[], failures: string[] }> {
  const samples: SigninSample[] = []
  const failures: string[] = []
  let next = 0
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, async (_, client) => {
    const target = targets[client % targets.length]!
    while (next < count) {
      next++
      const account = `${tag}${++accountSeq}`
      try {
        samples.push(await signIn(target, account, callbackPath))
      } catch (error) {
        failures.push(error instanceof Error ? error.message : String(error))
      }
    }
  }))
  return { samples, failures }
}

const pair = (values: number[]) => ({ p50: round(quantile(values, 0.5), 2), p99: round(quantile(values, 0.99), 2) })

async function measure (name: string, targets: Target[], provider: ProviderProcess, options: SigninOptions, callbackPath: string, tag: string): Promise<SigninResult> {
  // Warm-up: JIT, connection pools, the provider's keys in the gateway's cache.
  await storm(targets, options.concurrency, options.concurrency, callbackPath, `${tag}warm`)
  await provider.reset()
  const providerCpuBefore = await cpuOfTree(provider.pid)
  const started = performance.now()
  const { result, cpuMs, peakRssMb } = await measured(targets.map((t) => t.pid), async () => await storm(targets, options.signins, options.concurrency, callbackPath, tag))
  const seconds = (performance.now() - started) / 1000
  const providerCpuMs = await cpuOfTree(provider.pid) - providerCpuBefore
  const { samples, failures } = result
  if (failures.length > 0) process.stdout.write(`  ${name}: ${failures.length} sign-in(s) failed, the first: ${failures[0]}\n`)
  const stats = await provider.stats()
  const hop = (name: Hop) => pair(samples.map((s) => s.hops[name] ?? 0))
  const callbackOwn = samples.map((s) => (s.hops.callback ?? 0) - (stats.backchannelMs[s.account] ?? 0))
  const own = samples.map((s, i) => (s.hops.protected ?? 0) + (s.hops.login ?? 0) + callbackOwn[i]! + (s.hops.proxied ?? 0))
  const done = Math.max(1, samples.length)
  return {
    target: name,
    signins: samples.length,
    failures: failures.length,
    seconds: round(seconds, 1),
    perSecond: round(samples.length / seconds, 1),
    cpuMsPerSignin: round(cpuMs / done, 2),
    providerCpuMsPerSignin: round(providerCpuMs / done, 2),
    peakRssMb,
    hops: { protected: hop('protected'), login: hop('login'), callback: hop('callback'), proxied: hop('proxied') },
    callbackOwn: { ...pair(callbackOwn), mean: round(mean(callbackOwn), 2) },
    ownMsPerSignin: pair(own),
    totalMs: pair(samples.map((s) => s.totalMs)),
  }
}

export function signinTable (results: SigninResult[]): string {
  const rows = results.map((r) => `| ${r.target} | ${r.signins} (${r.failures} failed) | ${r.perSecond} | **${r.cpuMsPerSignin}** | ${r.providerCpuMsPerSignin} | ${r.peakRssMb} | ` +
    `${r.hops.protected.p50} / ${r.hops.protected.p99} | ${r.hops.login.p50} / ${r.hops.login.p99} | ${r.hops.callback.p50} / ${r.hops.callback.p99} | ` +
    `${r.callbackOwn.p50} / ${r.callbackOwn.p99} | ${r.hops.proxied.p50} / ${r.hops.proxied.p99} | ${r.ownMsPerSignin.p50} / ${r.ownMsPerSignin.p99} | ${r.totalMs.p50} / ${r.totalMs.p99} | ${memoryColumns(r.memoryAtPeak)} |`)
  return `| target | sign-ins | sign-ins/s | CPU ms/sign-in | provider CPU ms/sign-in | peak RSS MB | protected URL ms p50 / p99 | login ms | callback ms | callback without provider ms | first proxied ms | target's own ms per sign-in | whole sign-in ms | at peak: heap used / total MB | external (of it array buffers) MB | native and code MB |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
${rows.join('\n')}`
}

/** Where each gateway process the bench starts writes its memory at peak (bench/memory-sampler.ts). */
const SAMPLER = fileURLToPath(new URL('./memory-sampler.js', import.meta.url))

type GatewayStarter = (name: string, port: number, workers: number | 'auto', variant?: Omit<SigninVariant, 'name'>) => Promise<Target & { memoryFile: string }>

/** Starts gateways with the storm's config and the memory sampler loaded into each of their processes. */
function gatewayStarter (stops: Stops, common: Omit<Parameters<typeof startGateway>[0], 'name' | 'clientId' | 'port' | 'workers'>, memoryDir: string): GatewayStarter {
  let seq = 0
  return async (name, port, workers, variant = {}) => {
    const memoryFile = join(memoryDir, `gateway-${++seq}`)
    const target = stops.add(await startGateway({
      ...common,
      name,
      clientId: 'bench',
      port,
      workers,
      config: { rateLimit: { login: '1000000/min' } },
      nodeArgs: ['--import', SAMPLER, ...(variant.nodeArgs ?? [])],
      env: { ...variant.env, GATEWAY_BENCH_MEMORY: memoryFile },
      main: variant.main,
      startCommand: variant.startCommand,
    }))
    return { ...target, memoryFile }
  }
}

/** The sample of the gateway process (of all a target's processes) with the highest resident size. */
async function memoryAtPeak (memoryFile: string): Promise<MemoryPeak | undefined> {
  const dir = dirname(memoryFile)
  const names = (await readdir(dir)).filter((name) => name.startsWith(`${basename(memoryFile)}.`))
  const peaks = await Promise.all(names.map(async (name) => JSON.parse(await readFile(join(dir, name), 'utf8')) as MemoryPeak))
  return peaks.sort((a, b) => b.rss - a.rss)[0]
}

async function measureGateway (target: Target & { memoryFile: string }, provider: ProviderProcess, options: SigninOptions, tag: string, name = target.name): Promise<SigninResult> {
  const result = await measure(name, [target], provider, options, '/oauth/authorized/', tag)
  await target.stop()
  return { ...result, memoryAtPeak: await memoryAtPeak(target.memoryFile) }
}

interface StormStack {
  stops: Stops
  provider: ProviderProcess
  gateway: GatewayStarter
  common: { upstream: string, redisUrl: string, issuer: string, clientSecret: string, logLevel: string }
  ports: number[]
  apachePort: number
}

/** Redis, the upstream and the provider (with a client for three gateways and one for Apache). */
async function startStack (options: SigninOptions): Promise<StormStack> {
  const stops = new Stops()
  try {
    const redis = stops.add(await startRedis(process.env.TEST_REDIS === undefined ? 'spawn' : undefined))
    const upstream = stops.add(await startUpstream())
    const ports = [await freePort(), await freePort(), await freePort()]
    const apachePort = await freePort()
    const clientSecret = 'bench-client-secret'
    const provider = stops.add(await startProviderProcess([
      { client_id: 'bench', client_secret: clientSecret, redirect_uris: ports.map((port) => `http://127.0.0.1:${port}/oauth/authorized/demo/`) },
      { client_id: 'bench-apache', client_secret: clientSecret, redirect_uris: [apacheRedirectUri(apachePort)] },
    ]))
    const common = { upstream: upstream.url, redisUrl: redis.url, issuer: provider.issuer, clientSecret, logLevel: options.logLevel }
    const gateway = gatewayStarter(stops, common, await mkdtemp(join(tmpdir(), 'gw-bench-memory-')))
    return { stops, provider, gateway, common, ports, apachePort }
  } catch (error) {
    await stops.run()
    throw error
  }
}

/** Runs the storm against the gateway (1 worker) and, when installed, Apache + mod_auth_openidc. */
export async function signinBench (options: SigninOptions): Promise<{ results: SigninResult[], profile?: string }> {
  const results: SigninResult[] = []
  const profileDir = options.profile ? await mkdtemp(join(tmpdir(), 'gw-bench-signin-profile-')) : undefined
  const { stops, provider, gateway, common, ports, apachePort } = await startStack(options)
  try {
    // The sign-in budget per client address stays on (its Redis round trip is part of a sign-in),
    // set high: every bench client comes from 127.0.0.1, where a real storm comes from many addresses.
    process.stdout.write(`signin: ${options.signins} sign-ins by ${options.concurrency} clients at once, each a new user, gateway LOG_LEVEL ${options.logLevel}\n`)
    const one = await gateway('gateway, 1 worker', ports[0]!, 1, { nodeArgs: profileDir ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : [] })
    results.push(await measureGateway(one, provider, options, 'g'))
    if (options.scaling && !options.profile) {
      const all = await gateway('gateway, workers: auto', ports[0]!, 'auto')
      results.push(await measureGateway(all, provider, options, 'w', `gateway, workers: auto (${availableParallelism()})`))
      const three = await Promise.all(ports.map(async (port, i) => await gateway(`gateway ${i + 1} of 3`, port, 1)))
      results.push(await measure('3 gateways of 1 worker, one Redis', three, provider, options, '/oauth/authorized/', 'i'))
      for (const instance of three) await instance.stop()
    }
    const httpd = options.noApache || options.profile ? undefined : apacheBinary()
    if (httpd) {
      const apache = stops.add(await startApache(httpd, { ...common, clientId: 'bench-apache', port: apachePort }))
      results.push(await measure(apache.name, [apache], provider, options, '/app/redirect_uri', 'a'))
    } else if (!options.noApache && !options.profile) {
      process.stdout.write('signin: Apache + mod_auth_openidc not installed, so not compared (apt-get install -y apache2 libapache2-mod-auth-openidc)\n')
    }
  } finally {
    await stops.run()
  }
  let profile: string | undefined
  if (profileDir) {
    const file = join(profileDir, (await readdir(profileDir)).find((name) => name.endsWith('.cpuprofile'))!)
    profile = `${await summarizeProfile(file)}\nprofile: ${file} (open it in Chrome DevTools > Performance)\n`
  }
  return { results, profile }
}

/**
 * The 1-worker gateway started in each of `variants` ways, a fresh process per storm, in `rounds`
 * rounds whose order alternates (A B, B A, ...), so every variant sees the same machine conditions.
 */
export async function signinAb (options: SigninOptions & { variants: SigninVariant[], rounds: number }): Promise<SigninResult[]> {
  const results: SigninResult[] = []
  const { stops, provider, gateway, ports } = await startStack(options)
  try {
    process.stdout.write(`signin A/B: ${options.rounds} rounds of ${options.signins} sign-ins by ${options.concurrency} clients, variants: ${options.variants.map((v) => v.name).join(', ')}\n`)
    for (let round = 0; round < options.rounds; round++) {
      const order = round % 2 === 0 ? options.variants : [...options.variants].reverse()
      for (const variant of order) {
        const target = await gateway(variant.name, ports[0]!, 1, variant)
        const result = await measureGateway(target, provider, options, `ab${round}${results.length}-`, `${variant.name} (round ${round + 1})`)
        process.stdout.write(`  ${result.target}: ${result.cpuMsPerSignin} ms CPU/sign-in, peak RSS ${result.peakRssMb} MB, ${memoryColumns(result.memoryAtPeak)}\n`)
        results.push(result)
      }
    }
  } finally {
    await stops.run()
  }
  return results
}

const mb = (bytes: number) => round(bytes / 1e6, 1)

/** Heap used / heap total / external / the rest (native memory, code, stacks), in MB at the peak. */
export function memoryColumns (peak: MemoryPeak | undefined): string {
  if (!peak) return '- | - | -'
  return `${mb(peak.heapUsed)} / ${mb(peak.heapTotal)} | ${mb(peak.external)} (${mb(peak.arrayBuffers)}) | ${mb(peak.rss - peak.heapTotal - peak.external)}`
}
