// `npm run bench -- --refresh-storm`: `sessions` signed-in sessions whose access tokens all go
// stale within the same few seconds while two gateway instances (1 worker each, one Redis) serve
// load for all of them. Each session's refresh token is a real one of the authorization server
// (minted by oidc-provider's own models in its process, bench/as-process.ts: a grant and a refresh
// token per account, what a sign-in leaves behind), and each record is sealed into Redis with the
// gateway's own session code (bench/records.ts): creating 5,000 sessions that way takes seconds,
// where 5,000 sign-ins through the provider's forms would take minutes and measure the sign-in,
// not the refresh. The provider counts the refresh_token grants it answers per account: exactly
// one per session is the goal, across both instances. wrk loads both instances at once, each
// walking the sessions in the same order, so the two instances ask for the same stale session
// at about the same moment (the cross-instance lock is what is tested). The same load runs first
// with every token fresh (baseline), then across the expiry (storm); then every session is asked
// for once more on each instance (it must answer 200 with no further refresh).
import { execFile } from 'node:child_process'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { freePort } from '../test/helpers/net.js'
import { startRedis } from '../test/helpers/redis.js'
import type { SessionRecord } from '../src/session/session.js'
import { writeSessions } from './records.js'
import { Stops, round, startProviderProcess } from './stack.js'
import { cpuOfTree, startGateway, startUpstream, type Target } from './targets.js'

export interface RefreshStormOptions {
  sessions: number
  /** wrk connections per instance. */
  connections: number
  baselineSeconds: number
  stormSeconds: number
  logLevel: string
  /** Run the first gateway under node --cpu-prof: its profile file is returned. */
  profileDir?: string
}

interface WrkStatus { requests: number, p50: number, p99: number, s2xx: number, s3xx: number, s4xx: number, s5xx: number, errors: number, rps: number }

export interface RefreshStormResult {
  sessions: number
  instances: number
  spreadS: number
  baseline: WrkStatus[]
  storm: WrkStatus[]
  /** refresh_token grants the provider answered, per session: how many sessions had 0, 1, 2+ after the storm. */
  duringStorm: { zero: number, one: number, more: number, errors: Record<string, number> }
  /** ...and after the final pass that asks for every session on each instance. */
  afterCheck: { zero: number, one: number, more: number, errors: Record<string, number>, non200: number }
  gatewayCpuMs: { baseline: number, storm: number }
}

/** Seconds before expiry at which the gateway counts an access token stale (EXPIRY_SKEW_S in src/oauth/refresh.ts). */
const EXPIRY_SKEW_S = 30
/** The tokens go stale from this many seconds into the storm's load... */
const LEAD_S = 2
/** ...over this many seconds. */
const SPREAD_S = 3

function luaScript (cookies: string[]): string {
  return `local cookies = { ${cookies.map((c) => `"${c}"`).join(',')} }
local threads = {}
function setup (thread) table.insert(threads, thread) end
function init (args) n = 0 s2 = 0 s3 = 0 s4 = 0 s5 = 0 end
function request ()
  n = n + 1
  return wrk.format("GET", "/app/storm", { ["Cookie"] = "gw_session=" .. cookies[((n - 1) % #cookies) + 1], ["Accept"] = "application/json" })
end
function response (status, headers, body)
  if status >= 500 then s5 = s5 + 1 elseif status >= 400 then s4 = s4 + 1 elseif status >= 300 then s3 = s3 + 1 else s2 = s2 + 1 end
end
function done (summary, latency, requests)
  local t = { s2 = 0, s3 = 0, s4 = 0, s5 = 0 }
  for _, thread in ipairs(threads) do for k, _ in pairs(t) do t[k] = t[k] + thread:get(k) end end
  local e = summary.errors
  io.write(string.format('WRK_RESULT {"requests":%d,"durationUs":%d,"p50Us":%d,"p99Us":%d,"errors":%d,"s2xx":%d,"s3xx":%d,"s4xx":%d,"s5xx":%d}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), e.connect + e.read + e.write + e.timeout, t.s2, t.s3, t.s4, t.s5))
end
`
}

async function wrkRun (url: string, script: string, connections: number, seconds: number): Promise<WrkStatus> {
  const { stdout } = await promisify(execFile)('wrk', ['-t', '1', '-c', String(connections), '-d', `${seconds}s`, '--timeout', '10s', '-s', script, url], { maxBuffer: 1 << 20 })
  const line = stdout.split('\n').find((l) => l.startsWith('WRK_RESULT '))
  if (!line) throw new Error(`wrk printed no result:\n${stdout}`)
  const r = JSON.parse(line.slice('WRK_RESULT '.length)) as { requests: number, durationUs: number, p50Us: number, p99Us: number, errors: number, s2xx: number, s3xx: number, s4xx: number, s5xx: number }
  return { requests: r.requests, rps: Math.round(r.requests / (r.durationUs / 1e6)), p50: round(r.p50Us / 1000, 2), p99: round(r.p99Us / 1000, 2), s2xx: r.s2xx, s3xx: r.s3xx, s4xx: r.s4xx, s5xx: r.s5xx, errors: r.errors }
}

function tally (accounts: string[], refreshes: Record<string, number>) {
  const counts = accounts.map((a) => refreshes[a] ?? 0)
  return { zero: counts.filter((c) => c === 0).length, one: counts.filter((c) => c === 1).length, more: counts.filter((c) => c > 1).length }
}

/** Every session once on each gateway, `concurrency` at a time: the status codes that were not 200. */
async function askEach (gateways: Target[], cookies: string[], concurrency: number): Promise<number> {
  let non200 = 0
  for (const gateway of gateways) {
    let next = 0
    await Promise.all(Array.from({ length: concurrency }, async () => {
      while (next < cookies.length) {
        const cookie = cookies[next++]!
        const response = await fetch(`${gateway.url}/app/check`, { headers: { accept: 'application/json', cookie: `gw_session=${cookie}` } })
        await response.arrayBuffer()
        if (response.status !== 200) non200++
      }
    }))
  }
  return non200
}

/** The first answer other than 200 to `cookie`'s session on any of `gateways`, as status and body. */
async function fetchFirst (gateways: Target[], cookie: string): Promise<string | undefined> {
  for (const gateway of gateways) {
    const response = await fetch(`${gateway.url}/app/check`, { headers: { accept: 'application/json', cookie: `gw_session=${cookie}` } })
    const body = await response.text()
    if (response.status !== 200) return `${gateway.name}: ${response.status} ${body.slice(0, 200)}`
  }
  return undefined
}

export async function refreshStormBench (options: RefreshStormOptions): Promise<RefreshStormResult> {
  const stops = new Stops()
  try {
    const redis = stops.add(await startRedis(process.env.TEST_REDIS === undefined ? 'spawn' : undefined))
    const upstream = stops.add(await startUpstream())
    const ports = [await freePort(), await freePort()]
    const clientSecret = 'bench-client-secret'
    // A refreshed access token lives an hour: one refresh per session is all the storm should see.
    const provider = stops.add(await startProviderProcess([
      { client_id: 'bench', client_secret: clientSecret, redirect_uris: ports.map((p) => `http://127.0.0.1:${p}/oauth/authorized/demo/`) },
    ], 3600))
    const gateways = await Promise.all(ports.map(async (port, i) => stops.add(await startGateway({
      name: `gateway ${i + 1}`,
      upstream: upstream.url,
      redisUrl: redis.url,
      issuer: provider.issuer,
      clientId: 'bench',
      clientSecret,
      port,
      workers: 1,
      logLevel: options.logLevel,
      nodeArgs: i === 0 && options.profileDir ? ['--cpu-prof', '--cpu-prof-dir', options.profileDir] : [],
    }))))
    const scope = 'openid profile email'
    const accounts = Array.from({ length: options.sessions }, (_, i) => `storm${i}`)
    const minted = performance.now()
    const refreshTokens = await provider.mint('bench', accounts, scope)
    process.stdout.write(`refresh-storm: ${options.sessions} refresh tokens minted at the provider in ${Math.round(performance.now() - minted)} ms\n`)
    const record = (i: number, expiresAt: number): SessionRecord => ({
      createdAt: Date.now(),
      tokens: { demo: { access_token: `stale-${i}-${refreshTokens[i]!.slice(0, 12)}`, expires_at: expiresAt, refresh_token: refreshTokens[i]! } },
      identities: { demo: { sub: accounts[i]!, email: `${accounts[i]}@example.test`, name: accounts[i]!, groups: [] } },
    })
    const ttlMs = 8 * 3600_000
    const far = Math.floor(Date.now() / 1000) + 24 * 3600
    const cookies = await writeSessions(redis.url, options.sessions, ttlMs, (i) => record(i, far))
    const dir = await mkdtemp(join(tmpdir(), 'gw-bench-storm-'))
    // A record the gateways cannot read would have every request measured as a 401 (as when the
    // cookie's shape changed and these were not made like the gateway's): refuse to measure that.
    const first = await fetchFirst(gateways, cookies[0]!)
    if (first !== undefined) throw new Error(`refresh-storm: a session written for the bench is not read by the gateway (${first}): bench/records.ts no longer writes what src/session/session.ts reads`)
    const script = join(dir, 'storm.lua')
    await writeFile(script, luaScript(cookies))
    const load = async (seconds: number) => {
      const before = await Promise.all(gateways.map(async (g) => await cpuOfTree(g.pid)))
      const results = await Promise.all(gateways.map(async (g) => await wrkRun(`${g.url}/app/storm`, script, options.connections, seconds)))
      const after = await Promise.all(gateways.map(async (g) => await cpuOfTree(g.pid)))
      return { results, cpuMs: after.reduce((a, b) => a + b, 0) - before.reduce((a, b) => a + b, 0) }
    }
    process.stdout.write(`refresh-storm: baseline, every token fresh: ${options.baselineSeconds}s of wrk (${options.connections} connections) on each of 2 instances\n`)
    const baseline = await load(options.baselineSeconds)
    // The same sessions again, their access tokens now stale from LEAD_S into the storm, over SPREAD_S.
    const nowS = Date.now() / 1000
    await writeSessions(redis.url, options.sessions, ttlMs, (i) => record(i, Math.floor(nowS + EXPIRY_SKEW_S + LEAD_S + SPREAD_S * i / options.sessions)), cookies)
    await provider.reset()
    process.stdout.write(`refresh-storm: storm, ${options.sessions} access tokens going stale ${LEAD_S}-${LEAD_S + SPREAD_S}s in: ${options.stormSeconds}s of wrk on each instance\n`)
    const storm = await load(options.stormSeconds)
    const stormStats = await provider.stats()
    const non200 = await askEach(gateways, cookies, 32)
    const finalStats = await provider.stats()
    return {
      sessions: options.sessions,
      instances: gateways.length,
      spreadS: SPREAD_S,
      baseline: baseline.results,
      storm: storm.results,
      duringStorm: { ...tally(accounts, stormStats.refreshes), errors: stormStats.refreshErrors },
      afterCheck: { ...tally(accounts, finalStats.refreshes), errors: finalStats.refreshErrors, non200 },
      gatewayCpuMs: { baseline: Math.round(baseline.cpuMs), storm: Math.round(storm.cpuMs) },
    }
  } finally {
    await stops.run()
  }
}

export function refreshStormReport (r: RefreshStormResult, options: RefreshStormOptions): string {
  const row = (phase: string, runs: WrkStatus[], seconds: number) => runs.map((w, i) =>
    `| ${phase} | gateway ${i + 1} | ${w.requests} | ${w.rps} | ${w.p50} | **${w.p99}** | ${w.s2xx} | ${w.s3xx} | ${w.s4xx} | **${w.s5xx}** | ${w.errors} | ${seconds} |`).join('\n')
  const errors = (e: Record<string, number>) => Object.keys(e).length === 0 ? 'none' : Object.entries(e).map(([k, v]) => `${k}: ${v}`).join(', ')
  return `| phase | instance | requests | req/s | p50 ms | p99 ms | 2xx | 3xx | 4xx | 5xx | socket errors | seconds |
|---|---|---|---|---|---|---|---|---|---|---|---|
${row('baseline (tokens fresh)', r.baseline, options.baselineSeconds)}
${row('storm (tokens going stale)', r.storm, options.stormSeconds)}

- refresh_token grants at the provider per session, during the storm: **${r.duringStorm.one} sessions refreshed exactly once**, ${r.duringStorm.more} more than once, ${r.duringStorm.zero} not (yet); refused or failed grants: ${errors(r.duringStorm.errors)}
- after asking for every session once more on each instance: ${r.afterCheck.one} exactly once, ${r.afterCheck.more} more than once, ${r.afterCheck.zero} never; answers other than 200: ${r.afterCheck.non200}; refused or failed grants: ${errors(r.afterCheck.errors)}
- both gateways' CPU: ${r.gatewayCpuMs.baseline} ms in the baseline, ${r.gatewayCpuMs.storm} ms in the storm
`
}
