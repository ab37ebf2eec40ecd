// One stretch of load on one target, and the statistics every comparison of the bench takes over
// repetitions: the load generator (wrk when installed, else autocannon), the target's CPU time and
// peak resident memory read from /proc while it runs, and the host's steal time.
import autocannon from 'autocannon'
import { readFile } from 'node:fs/promises'
import { cpuOfTree, rssOfTree, type Target } from './targets.js'
import { wrk, type LoadResult } from './wrk.js'

export interface Run {
  target: string
  rep: number
  rps: number
  p50: number
  p99: number
  errors: number
  non2xx: number
  /** Peak resident memory of the largest process (the worker) during the run, MB. */
  peakRssMb: number
  processes: number
  /** CPU time (user + system, all of the target's processes) per request, µs: less noisy than req/s. */
  cpuUsPerRequest: number
  /** Share of the machine's CPU time the hypervisor gave to others during the run (%): host noise. */
  stealPct: number
}

/** How every target of a run is loaded. */
export interface LoadSettings {
  generator: 'wrk' | 'autocannon'
  /** Keep-alive connections. */
  connections: number
}

export const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/** The middle half of the values (first and third quartile): how much a per-repetition ratio moved. */
export const middleHalf = (values: number[]): [number, number] => {
  const sorted = [...values].sort((a, b) => a - b)
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.round(q * (sorted.length - 1)))]!
  return [at(0.25), at(0.75)]
}

export const round = (value: number, digits: number): number => Math.round(value * 10 ** digits) / 10 ** digits
export const mb = (bytes: number): number => Math.round(bytes / 1e5) / 10

/** Load on a target for durationS; with pauseMs, each connection waits that long after every answer. */
export async function load (settings: LoadSettings, target: Target, durationS: number, headers: Record<string, string>, pauseMs = 0): Promise<Omit<Run, 'target' | 'rep'>> {
  let peak = 0
  let processes = 1
  const sampler = setInterval(() => {
    rssOfTree(target.pid).then((sizes) => {
      peak = Math.max(peak, ...sizes)
      processes = sizes.length
    }, () => {})
  }, 250)
  const url = `${target.url}/app/bench`
  const cpuBefore = await cpuOfTree(target.pid)
  const stealBefore = await machineCpu()
  const sent = target.headers ?? headers
  const result = settings.generator === 'wrk'
    ? await wrk(url, settings.connections, durationS, sent, pauseMs)
    : await autocannonLoad(url, settings.connections, durationS, sent, pauseMs)
  clearInterval(sampler)
  const cpuMs = await cpuOfTree(target.pid) - cpuBefore
  const stealAfter = await machineCpu()
  const stealPct = round(100 * (stealAfter.steal - stealBefore.steal) / Math.max(1, stealAfter.total - stealBefore.total), 1)
  return { ...result, peakRssMb: mb(peak), processes, cpuUsPerRequest: Math.round(cpuMs * 1000 / (result.rps * durationS)), stealPct }
}

/** The machine's CPU time so far (clock ticks): all of it, and what the hypervisor stole (/proc/stat). */
async function machineCpu (): Promise<{ total: number, steal: number }> {
  try {
    const fields = (await readFile('/proc/stat', 'utf8')).split('\n', 1)[0]!.trim().split(/\s+/).slice(1, 9).map(Number)
    return { total: fields.reduce((a, b) => a + b, 0), steal: fields[7] ?? 0 }
  } catch {
    return { total: 0, steal: 0 }
  }
}

async function autocannonLoad (url: string, connections: number, durationS: number, headers: Record<string, string>, pauseMs: number): Promise<LoadResult> {
  const result = await autocannon({ url, connections, duration: durationS, headers, ...(pauseMs > 0 ? { connectionRate: 1000 / pauseMs } : {}) })
  return {
    rps: Math.round(result.requests.average),
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
  }
}

/** The per-repetition rows and the median row of each target. */
export function tableRows (targets: ReadonlyArray<{ name: string }>, runs: Run[]): string {
  const rows = runs.map((r) => `| ${r.target} | ${r.rep} | ${r.rps} | ${r.p50} | ${r.p99} | ${r.errors} | ${r.non2xx} | ${r.cpuUsPerRequest} | ${r.peakRssMb} (${r.processes} proc.) | ${r.stealPct} |`)
  const medianRows = targets.map((t) => {
    const own = runs.filter((r) => r.target === t.name)
    const mid = (f: (r: Run) => number, digits: number) => round(median(own.map(f)), digits)
    return `| ${t.name} | median | ${mid((r) => r.rps, 0)} | ${mid((r) => r.p50, 2)} | ${mid((r) => r.p99, 2)} | ${own.reduce((n, r) => n + r.errors, 0)} | ${own.reduce((n, r) => n + r.non2xx, 0)} | ${mid((r) => r.cpuUsPerRequest, 0)} | ${Math.max(...own.map((r) => r.peakRssMb))} | ${mid((r) => r.stealPct, 1)} |`
  })
  return `| target | rep | req/s | p50 ms | p99 ms | errors | non-2xx | CPU µs/request | peak RSS MB (largest process) | host steal % |
|---|---|---|---|---|---|---|---|---|---|
${[...rows, ...medianRows].join('\n')}`
}
