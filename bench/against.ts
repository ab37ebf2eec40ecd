// `npm run bench -- --against <git ref>`: this working tree's build against another build of the
// gateway (by default the last release, bench/releases.json), in one run on one machine, so that a
// change on the request path is judged against what shipped and not only against variants of itself.
// The ref is built once in a git worktree of its own under the system's temporary directory (reused
// while its commit is the same); each build runs as its own package.json's `npm start` runs it.
// Both builds are loaded round after round with a signed-in session cookie and with a machine
// client's JWT (one route that takes both), by fresh processes of each build in turn: at once (half
// the connections each; the quick form, CI's guard) or one after the other in alternating order
// (the full form, so that each build's req/s is its own). Each figure is the median of the
// per-round ratios. The full form adds the bare proxy (gateway/bare for each build) and a sign-in
// storm of each build.
// With --max-growth P it fails (exit 1) when this build's CPU per request, on either path, is more
// than P% above the ref's: CI runs `npm run bench -- --against --quick --max-growth 10`.
import { execFile } from 'node:child_process'
import { access, readFile, rm, symlink } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { promisify } from 'node:util'
import { startAuthorizationServer } from '../demo/authorization-server.js'
import { Browser } from '../test/helpers/browser.js'
import { freePort } from '../test/helpers/net.js'
import { startRedis } from '../test/helpers/redis.js'
import { load, median, round, tableRows, type LoadSettings, type Run } from './load.js'
import { signinAb, type SigninResult } from './signin.js'
import { Stops } from './stack.js'
import { startBareProxy, startCommandOf, startGateway, startUpstream, type StartCommand, type Target } from './targets.js'

const run = promisify(execFile)

/** A build of the gateway: its entry point and how its `npm start` runs it. */
export interface Build {
  /** What the tables call it. */
  label: string
  main: string
  startCommand: StartCommand
  /** Keys added to its route (--ab-rules: the rules, claim headers and bearer of RULED_ROUTE). */
  route?: Record<string, unknown>
}

export interface AgainstOptions {
  /** A git ref; `release` (the default): the last release's commit in bench/releases.json. */
  ref: string
  settings: LoadSettings
  /** Pairs of fresh processes, one of each build. */
  blocks: number
  /** Rounds per pair (each loads both builds on each path). */
  rounds: number
  seconds: number
  /** The full form: with the bare proxy and a sign-in storm of each build. */
  full: boolean
  /** Both builds loaded at once in each round (half the connections each) instead of one after the other. */
  together: boolean
  signins: number
  concurrency: number
  logLevel: string
  /** Instead of another ref: this build with these keys on its route, against this build as it is. */
  routeVariant?: { label: string, route: Record<string, unknown> } | undefined
}

/** The figures of one comparison: this build's and the ref's medians, and the median of the per-round ratios. */
export interface Compared {
  what: string
  ours: Run[]
  theirs: Run[]
  ratio: { cpu: number, rps: number, p99: number }
}

const BEARER_AUDIENCE = 'api://bench'

/** The commit of the last release, as docs/release.md says to record it. */
export async function lastRelease (): Promise<{ version: string, commit: string }> {
  const { releases } = JSON.parse(await readFile('bench/releases.json', 'utf8')) as { releases: Array<{ version: string, commit: string }> }
  const last = releases.at(-1)
  if (last === undefined) throw new Error('bench/releases.json names no release')
  return last
}

async function git (...args: string[]): Promise<string> {
  return (await run('git', args, { encoding: 'utf8' })).stdout.trim()
}

/** Whether the two lockfiles install the same packages (whether a package is dev-only aside). */
async function samePackages (ours: string, theirs: string): Promise<boolean> {
  const packages = async (file: string) => {
    const lock = JSON.parse(await readFile(file, 'utf8')) as { packages: Record<string, { version?: string, resolved?: string }> }
    return JSON.stringify(Object.entries(lock.packages).filter(([path]) => path !== '').map(([path, entry]) => [path, entry.version, entry.resolved]))
  }
  return await packages(ours) === await packages(theirs)
}

/**
 * `ref` built in a worktree of its own (reused while it holds that commit's build and its
 * node_modules resolve): with this tree's node_modules when both lockfiles install the same
 * packages, else with its own `npm ci`. A worktree whose node_modules link points at a tree since
 * removed (another clone's) is built again.
 */
export async function buildRef (ref: string): Promise<Build> {
  const name = ref === 'release' ? (await lastRelease()).commit : ref
  const commit = await git('rev-parse', '--verify', `${name}^{commit}`)
  const dir = join(tmpdir(), 'gateway-bench-against', commit)
  const main = join(dir, 'dist/src/main.js')
  const label = `${ref === 'release' ? `${(await lastRelease()).version} ` : ''}${commit.slice(0, 7)}`
  const exists = async (path: string) => await access(path).then(() => true, () => false)
  const built = await exists(main) && await exists(join(dir, 'node_modules', 'fastify', 'package.json'))
  if (!built) {
    await rm(dir, { recursive: true, force: true })
    await git('worktree', 'prune')
    await git('worktree', 'add', '--detach', dir, commit)
    process.stdout.write(`against: building ${label} in ${dir}\n`)
    if (await samePackages('package-lock.json', join(dir, 'package-lock.json'))) {
      await symlink(resolve('node_modules'), join(dir, 'node_modules'))
      await run('npm', ['run', 'build'], { cwd: dir })
    } else {
      await run('npm', ['ci', '--no-audit', '--no-fund'], { cwd: dir }) // its prepare script builds it
    }
  }
  return { label, main, startCommand: await startCommandOf(join(dir, 'package.json')) }
}

/** This working tree's build (`npm run bench` has just built it). */
export async function thisBuild (): Promise<Build> {
  return { label: 'this build', main: 'dist/src/main.js', startCommand: await startCommandOf('package.json') }
}

interface Stack {
  stops: Stops
  bare: Target
  /** A fresh process of each build, both serving a route that takes a session cookie or a bearer JWT. */
  pair (block: number): Promise<{ targets: [Target, Target], sessionHeaders: [Record<string, string>, Record<string, string>], stop: () => Promise<void> }>
  tokenHeaders: Record<string, string>
}

/** Redis, the upstream, the bare proxy and the provider; each block's pair of gateways is started by `pair`. */
async function startStack (builds: [Build, Build], logLevel: string, blocks: number): Promise<Stack> {
  const stops = new Stops()
  try {
    const redis = stops.add(await startRedis(process.env.TEST_REDIS === undefined ? 'spawn' : undefined))
    const upstream = stops.add(await startUpstream())
    const bare = stops.add(await startBareProxy(upstream.url))
    const ports: number[] = []
    for (let i = 0; i < 2 * blocks; i++) ports.push(await freePort())
    const clientSecret = 'bench-client-secret'
    const as = stops.add(await startAuthorizationServer({
      clients: [{ client_id: 'bench', client_secret: clientSecret, redirect_uris: ports.map((p) => `http://127.0.0.1:${p}/oauth/authorized/demo/`) }],
      machineClients: [{ client_id: 'bench-ci', client_secret: clientSecret }],
      resources: { [BEARER_AUDIENCE]: { scope: 'bench.read' } },
    }))
    const common = { upstream: upstream.url, redisUrl: redis.url, issuer: as.issuer, clientId: 'bench', clientSecret, logLevel, workers: 1 as const, bearer: { audience: BEARER_AUDIENCE } }
    const gateway = async (build: Build, port: number) => await startGateway({ ...common, name: build.label, port, main: build.main, startCommand: build.startCommand, route: build.route })
    // Each build signs its own user in: a session record one build wrote is not assumed readable by the other.
    const signIn = async (target: Target) => {
      const browser = new Browser()
      const landed = await browser.navigate(`${target.url}/app/`, { login: 'bench' })
      if (landed.status !== 200) throw new Error(`sign-in at ${target.name} failed: ${landed.status}`)
      return { accept: 'application/json', cookie: `gw_session=${browser.cookies.get('gw_session')!.value}` }
    }
    const pair: Stack['pair'] = async (block) => {
      const targets: [Target, Target] = [await gateway(builds[0], ports[2 * block]!), await gateway(builds[1], ports[2 * block + 1]!)]
      const stop = async () => { await Promise.all(targets.map(async (target) => { await target.stop() })) }
      try {
        return { targets, sessionHeaders: [await signIn(targets[0]), await signIn(targets[1])], stop }
      } catch (error) {
        await stop()
        throw error
      }
    }
    const form = new URLSearchParams({ grant_type: 'client_credentials', client_id: 'bench-ci', client_secret: clientSecret, resource: BEARER_AUDIENCE, scope: 'bench.read' })
    const token = await (await fetch(`${as.issuer}/token`, { method: 'POST', body: form })).json() as { access_token?: string }
    if (token.access_token === undefined) throw new Error('the provider refused the bench\'s client-credentials grant')
    return { stops, bare, pair, tokenHeaders: { accept: 'application/json', authorization: `Bearer ${token.access_token}` } }
  } catch (error) {
    await stops.run()
    throw error
  }
}

/** The two paths each pair is loaded on. */
const PATHS = ['proxied, session cookie', 'proxied, bearer JWT'] as const

/**
 * `blocks` times: a fresh process of each build (a process's JIT can be luckier or unluckier than
 * another's of the same code for its whole life), warmed up, then both loaded in alternating order
 * `rounds` times on each path (with the bare proxy first in each round of the full form); every
 * round gives each path one ratio.
 */
async function alternate (options: AgainstOptions, stack: Stack): Promise<{ runs: Run[], compared: Compared[] }> {
  const measure = async (target: Target, name: string, headers: Record<string, string>, rep: number, settings = options.settings) => {
    const result: Run = { target: name, rep, ...(await load(settings, target, options.seconds, headers)) }
    process.stdout.write(`  ${name} #${rep}: ${result.rps} req/s, p99 ${result.p99} ms, ${result.cpuUsPerRequest} µs CPU/request, ${result.errors} errors, ${result.non2xx} non-2xx\n`)
    if (result.errors + result.non2xx > 0) throw new Error(`${name} answered ${result.non2xx} non-2xx and ${result.errors} errors: the figures would not be of the proxied path`)
    return result
  }
  if (options.full) await load(options.settings, stack.bare, 3, stack.tokenHeaders)
  const runs: Run[] = []
  const rounds = PATHS.map(() => [] as Array<[Run, Run]>)
  let rep = 0
  for (let block = 0; block < options.blocks; block++) {
    const { targets, sessionHeaders, stop } = await stack.pair(block)
    try {
      // A route variant is loaded with sessions only: its deny rule on an e-mail refuses every token without one.
      const paths = options.routeVariant ? [sessionHeaders] : [sessionHeaders, [stack.tokenHeaders, stack.tokenHeaders]] as const
      // Warm-up (the JIT, the pools), both at once where the rounds load them so.
      for (const headers of paths) {
        if (options.together) await Promise.all(targets.map(async (target, i) => await load(options.settings, target, 2, headers[i]!)))
        else for (const [i, target] of targets.entries()) await load(options.settings, target, 2, headers[i]!)
      }
      for (let r = 0; r < options.rounds; r++) {
        rep++
        if (options.full) runs.push(await measure(stack.bare, 'bare proxy', stack.tokenHeaders, rep))
        for (const [p, headers] of paths.entries()) {
          const order = (block + r) % 2 === 0 ? [0, 1] : [1, 0]
          const measured: Run[] = []
          const name = (i: number) => `${targets[i]!.name}, ${PATHS[p]!.slice('proxied, '.length)}`
          if (options.together) {
            // Both at once, each by half the connections: whatever the machine does in those seconds, both see it.
            const half = { ...options.settings, connections: Math.ceil(options.settings.connections / 2) }
            await Promise.all(order.map(async (i) => { measured[i] = await measure(targets[i]!, name(i), headers[i]!, rep, half) }))
          } else for (const i of order) measured[i] = await measure(targets[i]!, name(i), headers[i]!, rep)
          runs.push(...order.map((i) => measured[i]!))
          rounds[p]!.push([measured[0]!, measured[1]!])
        }
      }
    } finally {
      await stop()
    }
  }
  const per = (p: number, f: (r: Run) => number) => round(median(rounds[p]!.map(([ours, theirs]) => f(ours) / f(theirs))), 3)
  const compared = PATHS.flatMap((what, p): Compared[] => rounds[p]!.length === 0
    ? []
    : [{
        what,
        ours: rounds[p]!.map(([ours]) => ours),
        theirs: rounds[p]!.map(([, theirs]) => theirs),
        ratio: { cpu: per(p, (r) => r.cpuUsPerRequest), rps: per(p, (r) => r.rps), p99: per(p, (r) => r.p99) },
      }])
  return { runs, compared }
}

/** The comparison, its report and, with `maxGrowthPct`, why it failed (undefined: it passed). */
export async function againstBench (options: AgainstOptions & { maxGrowthPct?: number | undefined }): Promise<{ report: string, summary: object, failure: string | undefined }> {
  const ours = await thisBuild()
  const builds: [Build, Build] = options.routeVariant ? [{ ...ours, ...options.routeVariant }, ours] : [ours, await buildRef(options.ref)]
  process.stdout.write(`against: ${builds[0].label} and ${builds[1].label}, ${options.blocks} pairs of fresh processes, ${options.rounds} alternating rounds of ${options.seconds}s per target each\n`)
  const stack = await startStack(builds, options.logLevel, options.blocks)
  let measured: Awaited<ReturnType<typeof alternate>>
  try {
    measured = await alternate(options, stack)
  } finally {
    await stack.stops.run()
  }
  // A route's rules are not on the sign-in's path: a route variant has no storm.
  const storm = options.full && !options.routeVariant
    ? await signinAb({ signins: options.signins, concurrency: options.concurrency, profile: false, logLevel: options.logLevel, rounds: 2, variants: builds.map((build) => ({ name: build.label, main: build.main, startCommand: build.startCommand })) })
    : []
  const report = againstReport(builds, options, measured, storm)
  const failure = options.maxGrowthPct === undefined ? undefined : growth(measured.compared, builds, options.maxGrowthPct)
  return { report: failure === undefined ? report : `${report}\n**FAILED**: ${failure}\n`, summary: { builds: builds.map((b) => b.label), compared: measured.compared.map((c) => ({ what: c.what, ...c.ratio })), storm }, failure }
}

/** Why the build fails the guard: CPU per request more than `pct`% above the ref's on either path. */
function growth (compared: Compared[], builds: [Build, Build], pct: number): string | undefined {
  const over = compared.filter((c) => c.ratio.cpu > 1 + pct / 100)
  if (over.length === 0) return undefined
  return over.map((c) => `${c.what}: CPU per request ${c.ratio.cpu}x ${builds[1].label}'s (at most ${round(1 + pct / 100, 2)}x)`).join('; ')
}

function againstReport (builds: [Build, Build], options: AgainstOptions, { runs, compared }: Awaited<ReturnType<typeof alternate>>, storm: SigninResult[]): string {
  const mid = (list: Run[], f: (r: Run) => number) => round(median(list.map(f)), 1)
  const rows = compared.flatMap((c) => [
    `| ${c.what} | req/s | ${mid(c.ours, (r) => r.rps)} | ${mid(c.theirs, (r) => r.rps)} | **${c.ratio.rps}x** |`,
    `| ${c.what} | CPU µs/request | ${mid(c.ours, (r) => r.cpuUsPerRequest)} | ${mid(c.theirs, (r) => r.cpuUsPerRequest)} | **${c.ratio.cpu}x** |`,
    `| ${c.what} | p99 ms | ${mid(c.ours, (r) => r.p99)} | ${mid(c.theirs, (r) => r.p99)} | ${c.ratio.p99}x |`,
    `| ${c.what} | peak RSS MB | ${Math.max(...c.ours.map((r) => r.peakRssMb))} | ${Math.max(...c.theirs.map((r) => r.peakRssMb))} | |`,
  ])
  const bare = runs.filter((r) => r.target === 'bare proxy')
  const vsBare = bare.length === 0
    ? ''
    : `\n- against the bare proxy in the same rounds (median of per-round ratios), session cookie: ${builds.map((b, i) => {
        const own = compared[0]![i === 0 ? 'ours' : 'theirs']
        return `${b.label} ${round(median(own.map((r, k) => r.rps / bare[k]!.rps)), 2)}x req/s, ${round(median(own.map((r, k) => r.cpuUsPerRequest / bare[k]!.cpuUsPerRequest)), 2)}x CPU per request`
      }).join('; ')}\n`
  const signins = storm.length === 0
    ? ''
    : `\nSign-in storm, a fresh 1-worker process of each build per round, ${options.signins} sign-ins by ${options.concurrency} clients, 2 rounds in alternating order:\n\n| build (round) | CPU ms/sign-in | sign-ins/s | peak RSS MB |\n|---|---|---|---|\n${storm.map((s) => `| ${s.target} | ${s.cpuMsPerSignin} | ${s.perSecond} | ${s.peakRssMb} |`).join('\n')}\n`
  return `Against ${builds[1].label} ${new Date().toISOString()}: ${options.settings.generator} ${options.settings.connections} connections, ${options.blocks} pairs of fresh processes (one of each build) with ${options.rounds} rounds of ${options.seconds}s per target each, in alternating order, gateway LOG_LEVEL ${options.logLevel}, each build as its own \`npm start\` runs it.

| path | figure | ${builds[0].label} | ${builds[1].label} | this / ref (median of per-round ratios) |
|---|---|---|---|---|
${rows.join('\n')}
${vsBare}
Every run:

${tableRows([...new Set(runs.map((r) => r.target))].map((name) => ({ name })), runs)}
${signins}`
}
