// wrk (when installed) as the load generator: a C program, so it takes far less of a 2-core
// machine than autocannon does, and leaves the proxy under test more of the CPU. A Lua script
// counts every non-2xx answer (a 302 to login is a failure) and prints one JSON line at the end.
import { execFile } from 'node:child_process'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'

export interface LoadResult {
  rps: number
  p50: number
  p99: number
  errors: number
  non2xx: number
}

const SCRIPT = `local threads = {}
function setup (thread) table.insert(threads, thread) end
function init (args) non2xx = 0 end
function response (status, headers, body) if status < 200 or status > 299 then non2xx = non2xx + 1 end end
function done (summary, latency, requests)
  local bad = 0
  for _, thread in ipairs(threads) do bad = bad + thread:get("non2xx") end
  local e = summary.errors
  io.write(string.format('WRK_RESULT {"requests":%d,"durationUs":%d,"p50Us":%d,"p99Us":%d,"errors":%d,"non2xx":%d}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.timeout, bad))
end
`

const scripts = new Map<number, Promise<string>>()

/** The script file; with a pause, each connection waits that long after every answer (wrk's delay()). */
function script (pauseMs: number): Promise<string> {
  let file = scripts.get(pauseMs)
  if (!file) {
    file = mkdtemp(join(tmpdir(), 'gw-bench-wrk-')).then(async (dir) => {
      await writeFile(join(dir, 'report.lua'), pauseMs > 0 ? `${SCRIPT}function delay () return ${pauseMs} end\n` : SCRIPT)
      return join(dir, 'report.lua')
    })
    scripts.set(pauseMs, file)
  }
  return file
}

export async function wrk (url: string, connections: number, durationS: number, headers: Record<string, string>, pauseMs = 0): Promise<LoadResult> {
  const args = ['-t', '1', '-c', String(connections), '-d', `${durationS}s`, '--timeout', '5s', '-s', await script(pauseMs),
    ...Object.entries(headers).flatMap(([name, value]) => ['-H', `${name}: ${value}`]), url]
  const { stdout } = await promisify(execFile)('wrk', args, { maxBuffer: 1 << 20 })
  const line = stdout.split('\n').find((l) => l.startsWith('WRK_RESULT '))
  if (!line) throw new Error(`wrk printed no result:\n${stdout}`)
  const r = JSON.parse(line.slice('WRK_RESULT '.length)) as { requests: number, durationUs: number, p50Us: number, p99Us: number, errors: number, non2xx: number }
  return {
    rps: Math.round(r.requests / (r.durationUs / 1e6)),
    p50: Math.round(r.p50Us / 10) / 100,
    p99: Math.round(r.p99Us / 10) / 100,
    errors: r.errors,
    non2xx: r.non2xx,
  }
}
