// `npm run bench`: one command, no manual steps. Starts a real Redis, a fixed-body upstream, the
// bare @fastify/http-proxy baseline (no auth) and the gateway (1 worker, and `workers: auto`) with a
// real signed-in session obtained through the real flow against oidc-provider, then loads each
// with the same load generator (wrk when installed, else autocannon; 50 keep-alive connections,
// small GET), interleaved, and prints a markdown table; then loads the bare proxy and the 1-worker
// gateway again, paced to about half the bare proxy's throughput, to compare latency at equal load.
// Results go to bench/results/latest.md and are appended to bench/results/history.jsonl.
//   --quick        one short repetition, for a fast look
//   --soak         5 minutes of load on the 1-worker gateway: RSS at start and end, errors
//   --profile      load the bare proxy and the 1-worker gateway under `node --cpu-prof` and print
//                  where the CPU of each goes
//   --log-level L  the gateways' LOG_LEVEL (default info); `silent` shows what the request log line costs
//   --assertion    the gateways' route has `assertion: true` (a signed identity assertion upstream);
//                  compare its ratios with a run without it (results in latest-assertion.md)
//   --generator wrk|autocannon                which load generator (default: wrk when installed)
//   --reps N, --seconds N, --soak-seconds N   override the defaults
// Scale modes (bench/README.md says what each figure means):
//   --signin         a sign-in storm through the real provider (bench/signin.ts): sign-ins/s, the
//                    gateway's CPU ms per sign-in, its own latency, peak RSS; beside Apache when installed
//                    --signins N (1000), --concurrency N (32); with --profile, where its CPU went
//   --refresh-storm  5,000 sessions whose access tokens go stale together, two instances (bench/refresh-storm.ts):
//                    refreshes per session at the provider, 5xx, p99 with and without the storm
//                    --sessions N (5000), --seconds N (baseline, 10), --storm-seconds N (30), --connections N (25)
//   --session-bytes  store bytes per session, 1 and 3 providers, a million extrapolated (bench/session-bytes.ts)
//                    --records N (10000)
//   --bearer         the 1-worker gateway's route also accepts machine clients (`bearer:`): the same
//                    gateway loaded with a signed-in session cookie and with a client-credentials JWT
//                    (verified once, then served from the token cache), beside the bare proxy
//                    (bench/results/latest-bearer.md)
//   --agent          the 1-worker gateway's route has `agents: true` (with --profile: profiled under the agent's token): the same gateway loaded with a
//                    signed-in session cookie and with a token the gateway issued to an agent (the
//                    real registration, consent and code exchange: bench/agent.ts), beside the bare
//                    proxy (bench/results/latest-agent.md)
//                    --ab-flags "F", --ab-env "K=V K=V", --ab-main PATH: instead, an A/B of the 1-worker
//                    gateway as shipped against it with those node flags, environment or another build
//                    (--rounds N, default 3, order alternating), with its memory at peak (bench/README.md)
//   --ab-rules       instead, the same build with its route judging `allow` and `deny` rules, sending
//                    two claim headers and accepting machine clients, against the plain route;
//                    with --profile, the profiled gateway's route is that one; with --against, the
//                    two routes of this build in --against's rounds (the ref is not built)
//   --quick alone runs the hot-path comparison once and each scale mode at a tiny size (the CI smoke).
// This is a benchmark, not a test: it asserts nothing; the figures are for reading.
import { appendFile, mkdir, mkdtemp, readdir, writeFile } from 'node:fs/promises'
import { availableParallelism, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { startAuthorizationServer } from '../demo/authorization-server.js'
import { Browser } from '../test/helpers/browser.js'
import { freePort } from '../test/helpers/net.js'
import { startRedis } from '../test/helpers/redis.js'
import { APACHE_SESSION_COOKIE, apacheBinary, apacheRedirectUri, startApache } from './apache.js'
import { summarizeProfile } from './profile.js'
import { againstBench } from './against.js'
import { agentToken } from './agent.js'
import { refreshStormBench, refreshStormReport } from './refresh-storm.js'
import { sessionBytesBench, sessionBytesTable } from './session-bytes.js'
import { signinAb, signinBench, signinTable, type SigninVariant } from './signin.js'
import { load as loadWith, median, mb, middleHalf, round, tableRows, type Run } from './load.js'
import { rssOfTree, startBareProxy, startGateway, startUpstream, which, type Target } from './targets.js'

// `--against` alone (or before another option) compares with the last release.
const argv = process.argv.slice(2)
const againstAt = argv.indexOf('--against')
if (againstAt !== -1 && (argv[againstAt + 1] === undefined || argv[againstAt + 1]!.startsWith('--'))) argv.splice(againstAt + 1, 0, 'release')
const { values: args } = parseArgs({
  args: argv,
  options: {
    against: { type: 'string' },
    'max-growth': { type: 'string' },
    blocks: { type: 'string' },
    together: { type: 'boolean' },
    quick: { type: 'boolean' },
    soak: { type: 'boolean' },
    profile: { type: 'boolean' },
    reps: { type: 'string' },
    seconds: { type: 'string' },
    'soak-seconds': { type: 'string' },
    'log-level': { type: 'string' },
    connections: { type: 'string' },
    generator: { type: 'string' },
    assertion: { type: 'boolean' },
    bearer: { type: 'boolean' },
    agent: { type: 'boolean' },
    signin: { type: 'boolean' },
    'refresh-storm': { type: 'boolean' },
    'session-bytes': { type: 'boolean' },
    signins: { type: 'string' },
    concurrency: { type: 'string' },
    sessions: { type: 'string' },
    records: { type: 'string' },
    'storm-seconds': { type: 'string' },
    'ab-flags': { type: 'string' },
    'ab-env': { type: 'string' },
    'ab-main': { type: 'string' },
    'ab-rules': { type: 'boolean' },
    rounds: { type: 'string' },
  },
})
const reps = Number(args.reps ?? (args.quick ? 1 : 9))
const seconds = Number(args.seconds ?? (args.quick ? 3 : 6))
const connections = Number(args.connections ?? 50)
const logLevel = args['log-level'] ?? 'info'
const assertion = args.assertion === true
const bearer = args.bearer === true
const agent = args.agent === true
/** One gateway loaded two ways (--bearer, --agent): no Apache, no second gateway's figures. */
const tokenMode = bearer || agent
/** The resource (RFC 8707) the bench's machine client asks its token for, and the route's audience. */
const BEARER_AUDIENCE = 'api://bench'
const generator = args.generator ?? (which('wrk') ? 'wrk' : 'autocannon')
if (generator !== 'wrk' && generator !== 'autocannon') throw new Error(`--generator must be wrk or autocannon, not ${generator}`)
const settings = { generator, connections } as const
const load = async (target: Target, durationS: number, headers: Record<string, string>, pauseMs = 0) => await loadWith(settings, target, durationS, headers, pauseMs)

async function main (): Promise<void> {
  const cores = availableParallelism()
  process.stdout.write(`bench: ${cores} cores, ${generator}, ${connections} connections, ${reps} repetition(s) of ${seconds}s per target, gateway LOG_LEVEL ${logLevel}${assertion ? ', route with assertion: true' : ''}\n`)
  if (generator !== 'wrk' || !which('nginx')) {
    process.stdout.write('bench: for the reference setup (wrk as the load, nginx as the upstream): apt-get install -y wrk nginx-light\n')
  }
  // Everything started is stopped again, in reverse order, whatever fails on the way.
  const stops: Array<() => Promise<void>> = []
  const started = <T extends { stop?: () => Promise<void>, close?: () => Promise<void> }>(thing: T): T => {
    stops.unshift(async () => { await (thing.stop ?? thing.close)?.call(thing) })
    return thing
  }
  const profileDirs = args.profile ? await Promise.all([0, 1].map(async () => await mkdtemp(join(tmpdir(), 'gw-bench-profile-')))) : []
  const profileArgs = (i: number) => profileDirs[i] ? ['--cpu-prof', '--cpu-prof-dir', profileDirs[i]] : []
  /** CPU µs per request of the bare proxy and the gateway while profiled: what the stages' shares are of. */
  const profiledCpu: number[] = []
  try {
    const redis = started(await startRedis(process.env.TEST_REDIS === undefined ? 'spawn' : undefined))
    const upstream = started(await startUpstream())
    const bare = started(await startBareProxy(upstream.url, profileArgs(0)))
    const ports = [await freePort(), await freePort()]
    const httpd = args.soak || args.profile || tokenMode ? undefined : apacheBinary()
    const apachePort = await freePort()
    const clientSecret = 'bench-client-secret'
    const as = started(await startAuthorizationServer({
      clients: [
        { client_id: 'bench', client_secret: clientSecret, redirect_uris: ports.map((p) => `http://127.0.0.1:${p}/oauth/authorized/demo/`) },
        { client_id: 'bench-apache', client_secret: clientSecret, redirect_uris: [apacheRedirectUri(apachePort)] },
      ],
      ...(bearer ? { machineClients: [{ client_id: 'bench-ci', client_secret: clientSecret }], resources: { [BEARER_AUDIENCE]: { scope: 'bench.read' } } } : {}),
    }))
    const common = { upstream: upstream.url, redisUrl: redis.url, issuer: as.issuer, clientId: 'bench', clientSecret, logLevel, assertion, ...(bearer ? { bearer: { audience: BEARER_AUDIENCE } } : {}), ...(agent ? { route: { agents: true } } : {}) }
    // --profile --ab-rules: the profiled gateway's route is the ruled one.
    const profiledRoute = args.profile && args['ab-rules'] === true ? { route: RULED_ROUTE } : {}
    const gateway = started(await startGateway({ ...common, ...profiledRoute, name: 'gateway, 1 worker', port: ports[0]!, workers: 1, nodeArgs: profileArgs(1) }))
    const variant = abVariant()
    // With --ab-*, the second gateway is the 1-worker gateway started otherwise, instead of workers: auto.
    const gatewayAuto = started(await startGateway(variant
      ? { ...common, ...variant, port: ports[1]!, workers: 1 }
      : { ...common, name: `gateway, workers: auto (${cores})`, port: ports[1]!, workers: 'auto' }))
    const apache = httpd ? started(await startApache(httpd, { ...common, clientId: 'bench-apache', port: apachePort })) : undefined
    if (!httpd && !args.soak && !args.profile && !tokenMode) {
      process.stdout.write('bench: Apache + mod_auth_openidc not installed, so not compared (apt-get install -y apache2 libapache2-mod-auth-openidc)\n')
    }

    // A real signed-in session, through the real flow. Both gateways share Redis and the secret.
    const browser = new Browser()
    const landed = await browser.navigate(`${gateway.url}/app/`, { login: 'bench' })
    if (landed.status !== 200) throw new Error(`sign-in for the benchmark failed: ${landed.status}`)
    const headers = { accept: 'application/json', cookie: `gw_session=${browser.cookies.get('gw_session')!.value}` }
    const check = await fetch(`${gatewayAuto.url}/app/bench`, { headers })
    if (check.status !== 200) throw new Error(`the session does not work on the workers gateway: ${check.status}`)
    if (apache) {
      const apacheBrowser = new Browser()
      const signedIn = await apacheBrowser.navigate(`${apache.url}/app/`, { login: 'bench' })
      const session = apacheBrowser.cookies.get(APACHE_SESSION_COOKIE)
      if (signedIn.status !== 200 || !session) {
        const hops = apacheBrowser.hops.map((hop) => `${hop.status} ${hop.url.split('?')[0]}`).join('\n  ')
        throw new Error(`sign-in through Apache + mod_auth_openidc failed: ${signedIn.status}\n  ${hops}`)
      }
      apache.headers = { accept: 'application/json', cookie: `${APACHE_SESSION_COOKIE}=${session.value}` }
    }

    if (bearer) {
      const token = await machineToken(as.issuer, 'bench-ci', clientSecret)
      const withToken = { ...gateway, name: 'gateway, 1 worker, bearer JWT', headers: { accept: 'application/json', authorization: `Bearer ${token}` } }
      const check = await fetch(`${gateway.url}/app/bench`, { headers: withToken.headers })
      if (check.status !== 200) throw new Error(`the bearer token does not pass the gateway: ${check.status}`)
      await tokenCompare('bearer', [bare, { ...gateway, name: 'gateway, 1 worker, session' }, withToken], headers, upstream.kind, cores)
    } else if (agent) {
      const withToken = { ...gateway, name: 'gateway, 1 worker, agent token', headers: { accept: 'application/json', authorization: `Bearer ${await agentToken(gateway.url, '/app/', 'bench')}` } }
      const check = await fetch(`${gateway.url}/app/bench`, { headers: withToken.headers })
      if (check.status !== 200) throw new Error(`the agent's token does not pass the gateway: ${check.status}`)
      if (args.profile) await profiled([bare, withToken], headers, profiledCpu)
      else await tokenCompare('agent', [bare, { ...gateway, name: 'gateway, 1 worker, session' }, withToken], headers, upstream.kind, cores)
    } else if (args.soak) await soak(gateway, headers, upstream.kind)
    else if (args.profile) await profiled([bare, gateway], headers, profiledCpu)
    else if (variant) await abCompare([bare, gateway, gatewayAuto], headers)
    else await compare([bare, gateway, gatewayAuto, ...(apache ? [apache] : [])], headers, upstream.kind, cores)
  } finally {
    for (const stop of stops) await stop()
  }
  for (const [i, dir] of profileDirs.entries()) {
    const file = join(dir, (await readdir(dir)).find((name) => name.endsWith('.cpuprofile'))!)
    process.stdout.write(`\n## ${i === 0 ? 'bare proxy' : 'gateway, 1 worker'}\n\n${await summarizeProfile(file, 25, profiledCpu[i])}\nprofile: ${file} (open it in Chrome DevTools > Performance)\n`)
  }
}

/** The bare proxy and the 1-worker gateway under the profiler, each loaded once (a target's own headers win). */
async function profiled (targets: Target[], headers: Record<string, string>, profiledCpu: number[]): Promise<void> {
  for (const [i, target] of targets.entries()) {
    const run = await load(target, seconds, headers)
    profiledCpu[i] = run.cpuUsPerRequest
    process.stdout.write(`  ${target.name}: ${run.rps} req/s, ${run.cpuUsPerRequest} µs CPU/request (under the profiler)\n`)
  }
}

/** Every target in turn, `reps` times over (so each repetition sees the same machine conditions). */
async function interleaved (targets: Target[], headers: Record<string, string>, pauseMs = 0): Promise<Run[]> {
  const runs: Run[] = []
  for (let rep = 1; rep <= reps; rep++) {
    for (const target of targets) {
      const run = { target: target.name, rep, ...(await load(target, seconds, headers, pauseMs)) }
      runs.push(run)
      process.stdout.write(`  ${target.name} #${rep}${pauseMs ? ' (paced)' : ''}: ${run.rps} req/s, p99 ${run.p99} ms, ${run.cpuUsPerRequest} µs CPU/request, ${run.errors} errors, ${run.non2xx} non-2xx, host steal ${run.stealPct}%\n`)
    }
  }
  return runs
}

async function compare (targets: Target[], headers: Record<string, string>, upstreamKind: string, cores: number): Promise<void> {
  for (const target of targets) await load(target, 2, headers) // warm-up (JIT, connection pools)
  const runs = await interleaved(targets, headers)
  const [bare, one, auto, apache] = targets.map((t) => runs.filter((r) => r.target === t.name))
  // At full load the p99 is mostly queueing (latency = connections / throughput), so it follows the
  // req/s ratio. Paced, each connection waits after every answer so that both proxies are offered
  // about half what the bare proxy managed: the p99 then shows what a request itself costs.
  const pauseMs = Math.max(1, Math.round(connections * 1000 / (median(bare!.map((r) => r.rps)) / 2)))
  const pacedTargets = targets.slice(0, 2) // the bare proxy and the 1-worker gateway
  const paced = await interleaved(pacedTargets, headers, pauseMs)
  const [pacedBare, pacedOne] = pacedTargets.map((t) => paced.filter((r) => r.target === t.name))
  // Each comparison is taken per repetition (the two runs next to each other in time), then summed
  // up by its median and by the middle half of the repetitions, which shows how much it moved.
  const perRep = (a: Run[], b: Run[], f: (x: Run, y: Run) => number) => a.map((run, i) => f(run, b[i]!))
  const rpsRatio = (x: Run, y: Run) => x.rps / y.rps
  const p99Above = (x: Run, y: Run) => x.p99 - y.p99
  const cpuRatio = (x: Run, y: Run) => x.cpuUsPerRequest / y.cpuUsPerRequest
  const series: Record<string, number[]> = {
    gatewayVsBare: perRep(one!, bare!, rpsRatio),
    workersVsOne: perRep(auto!, one!, rpsRatio),
    p99AboveBareMs: perRep(one!, bare!, p99Above),
    cpuVsBare: perRep(one!, bare!, cpuRatio),
    ...(apache ? { oneVsApache: perRep(one!, apache, rpsRatio), autoVsApache: perRep(auto!, apache, rpsRatio) } : {}),
    pacedP99AboveBareMs: perRep(pacedOne!, pacedBare!, p99Above),
    pacedCpuVsBare: perRep(pacedOne!, pacedBare!, cpuRatio),
  }
  const medians = Object.fromEntries(Object.entries(series).map(([key, values]) => [key, median(values)]))
  const spread = Object.fromEntries(Object.entries(series).map(([key, values]) => [key, middleHalf(values).map((v) => round(v, 2))]))
  const summary = { date: new Date().toISOString(), cores, upstream: upstreamKind, generator, logLevel, assertion, connections, seconds, reps, pauseMs, ...medians, spread, runs, paced }
  const figure = (key: string, unit: string, digits = 2) => {
    const [low, high] = spread[key]!
    const range = reps >= 3 ? ` (middle half of the repetitions: ${low!.toFixed(digits)} to ${high!.toFixed(digits)}${unit})` : ''
    return `**${medians[key]!.toFixed(digits)}${unit}**${range}`
  }
  const table = `Benchmark ${summary.date}: ${cores} cores, upstream ${upstreamKind}, ${generator} ${connections} keep-alive connections, GET with a signed-in session cookie, ${reps} x ${seconds}s per target, interleaved, gateway LOG_LEVEL ${logLevel}${assertion ? ', the gateways\' route with `assertion: true` (a signed identity assertion upstream)' : ''}.

Full load (each connection sends its next request as soon as the answer arrives):

${tableRows(targets, runs)}

- gateway (1 worker) / bare proxy, req/s: ${figure('gatewayVsBare', 'x')}
- gateway p99 minus bare p99: ${figure('p99AboveBareMs', ' ms', 1)}
- workers: auto / 1 worker, req/s: ${figure('workersVsOne', 'x')}
- gateway (1 worker) / bare proxy, CPU time per request (what authentication costs on the hot path): ${figure('cpuVsBare', 'x')}
${apache ? `- gateway / Apache + mod_auth_openidc, req/s: ${figure('oneVsApache', 'x')} with 1 worker, ${figure('autoVsApache', 'x')} with workers: auto\n` : ''}
Paced (each connection waits ${pauseMs} ms after every answer: about half the bare proxy's full-load req/s offered to both):

${tableRows(pacedTargets, paced)}

- gateway p99 minus bare p99, paced: ${figure('pacedP99AboveBareMs', ' ms', 1)}
- gateway / bare proxy, CPU time per request, paced: ${figure('pacedCpuVsBare', 'x')}
`
  process.stdout.write(`\n${table}`)
  if (quickLook()) return
  await mkdir('bench/results', { recursive: true })
  // A run with another log level, or with the assertion, does not replace the reference table.
  const variant = [logLevel === 'info' ? '' : `log-${logLevel}`, assertion ? 'assertion' : ''].filter(Boolean).join('-')
  const latest = variant === '' ? 'bench/results/latest.md' : `bench/results/latest-${variant}.md`
  const flags = [args.quick ? '--quick' : '', logLevel === 'info' ? '' : `--log-level ${logLevel}`, assertion ? '--assertion' : ''].filter(Boolean).join(' ')
  await writeFile(latest, `${table}\nCommand: \`npm run bench${flags ? ` -- ${flags}` : ''}\`\n`)
  await appendFile('bench/results/history.jsonl', `${JSON.stringify(summary)}\n`)
  process.stdout.write(`\nwritten: ${latest}, bench/results/history.jsonl\n`)
}

/** A client-credentials access token (a JWT) for the bench's resource, as a CI job gets one. */
async function machineToken (issuer: string, clientId: string, clientSecret: string): Promise<string> {
  const form = new URLSearchParams({ grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret, resource: BEARER_AUDIENCE, scope: 'bench.read' })
  const response = await fetch(`${issuer}/token`, { method: 'POST', body: form })
  const body = await response.json() as { access_token?: string }
  if (!response.ok || body.access_token === undefined) throw new Error(`the provider refused the bench's client-credentials grant: ${response.status}`)
  return body.access_token
}

/** What --bearer and --agent load the route with, besides the session cookie. */
const TOKEN_MODES = {
  bearer: { label: 'bearer JWT', route: `\`bearer: { audience: ${BEARER_AUDIENCE} }\``, token: 'a client-credentials JWT' },
  agent: { label: 'agent token', route: '`agents: true`', token: 'a token the gateway issued to an agent' },
} as const

/**
 * One gateway loaded with a session cookie and with a token (a machine client's, or an agent's the
 * gateway issued), beside the bare proxy, interleaved: what such a request costs against a browser's.
 */
async function tokenCompare (mode: keyof typeof TOKEN_MODES, targets: Target[], headers: Record<string, string>, upstreamKind: string, cores: number): Promise<void> {
  const { label, route, token: what } = TOKEN_MODES[mode]
  for (const target of targets) await load(target, 2, headers) // warm-up (JIT, connection pools, the token cache)
  const runs = await interleaved(targets, headers)
  const [bare, session, token] = targets.map((t) => runs.filter((r) => r.target === t.name))
  const perRep = (a: Run[], b: Run[], f: (x: Run, y: Run) => number) => a.map((run, i) => f(run, b[i]!))
  const series: Record<string, number[]> = {
    [`${mode}VsSessionRps`]: perRep(token!, session!, (x, y) => x.rps / y.rps),
    [`${mode}VsSessionCpu`]: perRep(token!, session!, (x, y) => x.cpuUsPerRequest / y.cpuUsPerRequest),
    sessionVsBareCpu: perRep(session!, bare!, (x, y) => x.cpuUsPerRequest / y.cpuUsPerRequest),
    [`${mode}VsBareCpu`]: perRep(token!, bare!, (x, y) => x.cpuUsPerRequest / y.cpuUsPerRequest),
  }
  const medians = Object.fromEntries(Object.entries(series).map(([key, values]) => [key, median(values)]))
  const spread = Object.fromEntries(Object.entries(series).map(([key, values]) => [key, middleHalf(values).map((v) => round(v, 2))]))
  const figure = (key: string) => {
    const [low, high] = spread[key]!
    return `**${medians[key]!.toFixed(2)}x**${reps >= 3 ? ` (middle half of the repetitions: ${low!.toFixed(2)} to ${high!.toFixed(2)}x)` : ''}`
  }
  const date = new Date().toISOString()
  const table = `Benchmark ${date}: ${cores} cores, upstream ${upstreamKind}, ${generator} ${connections} keep-alive connections, GET, ${reps} x ${seconds}s per target, interleaved, gateway LOG_LEVEL ${logLevel}; one gateway process whose route has ${route}, loaded with a signed-in session cookie and with ${what}.

${tableRows(targets, runs)}

- ${label} / session, req/s: ${figure(`${mode}VsSessionRps`)}
- ${label} / session, CPU time per request: ${figure(`${mode}VsSessionCpu`)}
- session / bare proxy, CPU time per request: ${figure('sessionVsBareCpu')}
- ${label} / bare proxy, CPU time per request: ${figure(`${mode}VsBareCpu`)}
`
  process.stdout.write(`\n${table}`)
  if (quickLook()) return
  await mkdir('bench/results', { recursive: true })
  await writeFile(`bench/results/latest-${mode}.md`, `${table}\nCommand: \`npm run bench -- --${mode}${args.quick ? ' --quick' : ''}\`\n`)
  await appendFile('bench/results/history.jsonl', `${JSON.stringify({ date, mode, cores, upstream: upstreamKind, generator, logLevel, connections, seconds, reps, ...medians, spread, runs })}\n`)
  process.stdout.write(`\nwritten: bench/results/latest-${mode}.md, bench/results/history.jsonl\n`)
}

async function soak (target: Target, headers: Record<string, string>, upstreamKind: string): Promise<void> {
  const total = Number(args['soak-seconds'] ?? 300)
  const slice = Math.min(30, total)
  process.stdout.write(`soak: ${total}s of load on ${target.name} (upstream ${upstreamKind}), in ${slice}s slices\n`)
  const slices: Array<Awaited<ReturnType<typeof load>> & { rssMb: number }> = []
  for (let elapsed = 0; elapsed < total; elapsed += slice) {
    const result = await load(target, Math.min(slice, total - elapsed), headers)
    const rssMb = mb(Math.max(...await rssOfTree(target.pid)))
    slices.push({ ...result, rssMb })
    process.stdout.write(`  ${elapsed + slice}s: ${result.rps} req/s, p99 ${result.p99} ms, RSS ${rssMb} MB, ${result.errors} errors, ${result.non2xx} non-2xx\n`)
  }
  const first = slices[0]!
  const last = slices.at(-1)!
  const errors = slices.reduce((n, s) => n + s.errors + s.non2xx, 0)
  const report = `Soak ${new Date().toISOString()}: ${total}s on ${target.name}. RSS after the first slice ${first.rssMb} MB, at the end ${last.rssMb} MB ` +
    `(peak ${Math.max(...slices.map((s) => s.peakRssMb))} MB); errors and non-2xx: ${errors}; req/s first ${first.rps}, last ${last.rps}.\n`
  process.stdout.write(`\n${report}`)
  await mkdir('bench/results', { recursive: true })
  await writeFile('bench/results/soak.md', `${report}\nCommand: \`npm run bench -- --soak\`\n`)
  await appendFile('bench/results/history.jsonl', `${JSON.stringify({ date: new Date().toISOString(), soak: true, seconds: total, slices })}\n`)
}

/** The sign-in, refresh-storm and session-bytes modes; with --quick and no mode, each at a tiny size. */
async function modes (): Promise<boolean> {
  const quickSmoke = args.quick === true && !args.signin && !args['refresh-storm'] && !args['session-bytes'] && !args.soak && !args.profile && !tokenMode
  const sizes = { signins: Number(args.signins ?? (args.quick ? 20 : 1000)), concurrency: Number(args.concurrency ?? (args.quick ? 4 : 32)) }
  let ran = false
  if (args.signin && (args['ab-flags'] !== undefined || args['ab-env'] !== undefined || args['ab-main'] !== undefined)) {
    await signinAbMode(sizes)
    return true
  }
  if (args.signin || quickSmoke) {
    ran = true
    const { results, profile } = await signinBench({ ...sizes, profile: args.profile === true, logLevel, scaling: true })
    const report = `Sign-in storm ${new Date().toISOString()}: ${availableParallelism()} cores, ${sizes.signins} sign-ins per target by ${sizes.concurrency} clients at once, each a new user; gateway LOG_LEVEL ${logLevel}${args.profile ? ', gateway under --cpu-prof' : ''}.\n\n${signinTable(results)}\n${profile ? `\nWhere the gateway's CPU went during the storm (warm-up included):\n\n${profile}` : ''}`
    process.stdout.write(`\n${report}`)
    await record(args.quick ? undefined : `bench/results/signin${args.profile ? '-profile' : ''}.md`, report, { signin: true, ...sizes, profile: args.profile === true, results })
  }
  if (args['refresh-storm'] || quickSmoke) {
    ran = true
    const options = {
      sessions: Number(args.sessions ?? (args.quick ? 50 : 5000)),
      connections: Number(args.connections ?? 25),
      baselineSeconds: Number(args.seconds ?? (args.quick ? 3 : 10)),
      stormSeconds: Number(args['storm-seconds'] ?? (args.quick ? 8 : 30)),
      logLevel,
      profileDir: args.profile ? await mkdtemp(join(tmpdir(), 'gw-bench-storm-profile-')) : undefined,
    }
    const result = await refreshStormBench(options)
    if (options.profileDir) {
      const file = join(options.profileDir, (await readdir(options.profileDir)).find((name) => name.endsWith('.cpuprofile'))!)
      process.stdout.write(`\nGateway 1 under --cpu-prof (baseline and storm):\n\n${await summarizeProfile(file)}\nprofile: ${file}\n`)
    }
    const report = `Refresh storm ${new Date().toISOString()}: ${availableParallelism()} cores, ${result.sessions} sessions (refresh tokens minted at the provider, records sealed into Redis with the gateway's session code), 2 gateway instances with 1 worker each on one Redis, wrk ${options.connections} connections per instance walking all sessions in the same order, access tokens going stale over ${result.spreadS}s; gateway LOG_LEVEL ${logLevel}.\n\n${refreshStormReport(result, options)}`
    process.stdout.write(`\n${report}`)
    await record(args.quick ? undefined : 'bench/results/refresh-storm.md', report, { refreshStorm: true, ...options, result })
  }
  if (args['session-bytes'] || quickSmoke) {
    ran = true
    const records = Number(args.records ?? (args.quick ? 200 : 10_000))
    const results = await sessionBytesBench({ records })
    const report = `Session bytes ${new Date().toISOString()}: Redis ${records} records of each shape written with the gateway's own sealing code, the first two shapes copied from records the gateway wrote after real sign-ins (token strings of the real lengths, random per record).\n\n${sessionBytesTable(results)}\n`
    process.stdout.write(`\n${report}`)
    await record(args.quick ? undefined : 'bench/results/session-bytes.md', report, { sessionBytes: true, records, results })
  }
  return ran
}

/** The gateway as --ab-flags, --ab-env and --ab-main start it; undefined without them. */
function abVariant (): (SigninVariant & { route?: Record<string, unknown> }) | undefined {
  // The same build, its route with what a route may judge and send: `allow`, `deny`, `headers:` and `bearer:`.
  if (args['ab-rules'] === true) return { name: 'B: route with allow, deny, headers, bearer', route: RULED_ROUTE }
  if (args['ab-flags'] === undefined && args['ab-env'] === undefined && args['ab-main'] === undefined) return undefined
  const env = Object.fromEntries((args['ab-env'] ?? '').split(/\s+/).filter(Boolean).map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]))
  const nodeArgs = (args['ab-flags'] ?? '').split(/\s+/).filter(Boolean)
  const description = [...nodeArgs, ...Object.entries(env).map(([k, v]) => `${k}=${v}`), ...(args['ab-main'] ? [args['ab-main']] : [])].join(' ')
  return { name: `B: ${description}`, nodeArgs, env, main: args['ab-main'] }
}

/** The route of `--ab-rules`: rules the bench's user passes (after every `deny` is checked), two claim headers, machine clients too. */
const RULED_ROUTE = {
  allow: [{ groups: ['admins'] }, { domains: ['example.test'], methods: ['GET', 'HEAD'] }],
  deny: [{ paths: ['/app/admin/*'] }, { emails: ['mallory@evil.test'] }, { groups: ['blocked'] }],
  headers: { 'X-Email': 'claims.email', 'X-Groups': 'claims.groups' },
  bearer: { audience: 'api://bench' },
}

/** `--ab-*` without a mode: the bare proxy, the shipped 1-worker gateway and the variant, interleaved. */
async function abCompare (targets: Target[], headers: Record<string, string>): Promise<void> {
  for (const target of targets) await load(target, 2, headers) // warm-up (JIT, connection pools)
  const runs = await interleaved(targets, headers)
  const [, shipped, variant] = targets.map((t) => runs.filter((r) => r.target === t.name))
  const perRep = (f: (r: Run) => number) => median(variant!.map((run, i) => f(run) / f(shipped![i]!)))
  const report = `Hot-path A/B ${new Date().toISOString()}: ${generator} ${connections} connections, ${reps} x ${seconds}s per target, interleaved, gateway LOG_LEVEL ${logLevel}.\n\n${tableRows(targets, runs)}\n\n` +
    `- ${variant![0]!.target} / as shipped: CPU per request **${round(perRep((r) => r.cpuUsPerRequest), 2)}x**, req/s ${round(perRep((r) => r.rps), 2)}x, ` +
    `peak RSS ${Math.max(...variant!.map((r) => r.peakRssMb))} against ${Math.max(...shipped!.map((r) => r.peakRssMb))} MB\n`
  process.stdout.write(`\n${report}`)
  await record('bench/results/ab.md', report, { ab: true, reps, seconds, runs })
}

/** `--signin --ab-*`: the shipped 1-worker gateway against one started otherwise, interleaved rounds. */
async function signinAbMode (sizes: { signins: number, concurrency: number }): Promise<void> {
  const variants = [{ name: 'A: as shipped' }, abVariant()!]
  const results = await signinAb({ ...sizes, profile: false, logLevel, variants, rounds: Number(args.rounds ?? 3) })
  const report = `Sign-in storm A/B ${new Date().toISOString()}: ${availableParallelism()} cores, 1-worker gateway, a fresh process per storm, ${sizes.signins} sign-ins by ${sizes.concurrency} clients; gateway LOG_LEVEL ${logLevel}.\n\n${signinTable(results)}\n`
  process.stdout.write(`\n${report}`)
  await record('bench/results/signin-ab.md', report, { signinAb: true, ...sizes, variants, results })
}

/**
 * A `--quick` run is a look (and CI's smoke run): it writes nothing, so that the committed tables
 * and history stay those of full runs.
 */
function quickLook (): boolean {
  if (args.quick === true) process.stdout.write('\n--quick: a look, not a measurement; bench/results/ is left as it is\n')
  return args.quick === true
}

/** Writes a mode's report and appends its JSON line to the history (a --quick run writes nothing). */
async function record (file: string | undefined, report: string, summary: object): Promise<void> {
  if (quickLook()) return
  await mkdir('bench/results', { recursive: true })
  // Quoted where a value holds spaces (--ab-flags="--a --b"), so the line can be pasted back.
  const flags = process.argv.slice(2).map((arg) => /\s/.test(arg) ? `"${arg}"` : arg).join(' ')
  if (file) await writeFile(file, `${report}\nCommand: \`npm run bench -- ${flags}\`\n`)
  await appendFile('bench/results/history.jsonl', `${JSON.stringify({ date: new Date().toISOString(), quick: args.quick === true, ...summary })}\n`)
  process.stdout.write(`\nwritten: ${file ? `${file}, ` : ''}bench/results/history.jsonl\n`)
}

/** `--against <ref>`: this build against another, in alternating rounds (bench/against.ts). */
async function againstMode (): Promise<void> {
  const maxGrowth = args['max-growth'] === undefined ? undefined : Number(args['max-growth'])
  if (maxGrowth !== undefined && !(maxGrowth > 0)) throw new Error(`--max-growth must be a percentage above 0, not ${args['max-growth']}`)
  const { report, summary, failure } = await againstBench({
    ref: args.against!,
    settings,
    blocks: Number(args.blocks ?? (args.quick ? 10 : 3)),
    rounds: Number(args.rounds ?? 3),
    seconds: Number(args.seconds ?? (args.quick ? 2 : 5)),
    full: args.quick !== true,
    // The guard's form loads both builds at once (the machine's noise then hits both alike); the
    // full form one after the other, so that each build's req/s is its own.
    together: args.together ?? args.quick === true,
    signins: Number(args.signins ?? 600),
    concurrency: Number(args.concurrency ?? 32),
    logLevel,
    maxGrowthPct: maxGrowth,
    // --ab-rules: the route with rules against the plain one, both of this build, in the same rounds.
    routeVariant: args['ab-rules'] === true ? { label: 'this tree, route with allow, deny, headers, bearer', route: RULED_ROUTE } : undefined,
  })
  process.stdout.write(`\n${report}`)
  await record(args.quick ? undefined : 'bench/results/against.md', report, { against: args.against, ...summary })
  if (failure !== undefined) {
    process.stderr.write(`bench: ${failure}\n`)
    process.exitCode = 1
  }
}

async function entry (): Promise<void> {
  if (args.against !== undefined) return await againstMode()
  const quickSmoke = args.quick === true && !args.signin && !args['refresh-storm'] && !args['session-bytes']
  if (!args.signin && !args['refresh-storm'] && !args['session-bytes']) await main()
  if (quickSmoke || args.signin || args['refresh-storm'] || args['session-bytes']) await modes()
}

entry().catch((error: unknown) => {
  process.stderr.write(`bench: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`)
  process.exit(1)
})
