// What the sign-in, refresh-storm and session-bytes benchmarks share: the authorization server in
// a child process (bench/as-process.ts) driven over IPC, a list of things to stop in reverse order,
// statistics, and a process's CPU and peak memory over a stretch of time.
import { fork, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import type { DemoClient } from '../demo/authorization-server.js'
import type { FromProvider, ProviderStats, ToProvider } from './as-process.js'
import { cpuOfTree, rssOfTree } from './targets.js'

export interface ProviderProcess {
  issuer: string
  pid: number
  /** Real refresh tokens for `accounts` (one grant each), minted by the provider's own models. */
  mint (clientId: string, accounts: string[], scope: string): Promise<string[]>
  stats (): Promise<ProviderStats>
  reset (): Promise<void>
  stop (): Promise<void>
}

export async function startProviderProcess (clients: DemoClient[], accessTokenTtlS?: number): Promise<ProviderProcess> {
  const child: ChildProcess = fork(fileURLToPath(new URL('./as-process.js', import.meta.url)), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  // One request at a time over IPC: each answer is the reply to the last request.
  let queue = Promise.resolve() as Promise<unknown>
  const ask = <T extends FromProvider['type']>(message: ToProvider, expect: T): Promise<Extract<FromProvider, { type: T }>> => {
    const answer = queue.then(() => new Promise<Extract<FromProvider, { type: T }>>((resolve, reject) => {
      const onExit = () => reject(new Error('the authorization server process exited'))
      child.once('exit', onExit)
      child.once('message', (reply: FromProvider) => {
        child.off('exit', onExit)
        if (reply.type === expect) resolve(reply as Extract<FromProvider, { type: T }>)
        else reject(new Error(reply.type === 'error' ? reply.message : `unexpected reply ${reply.type}`))
      })
      child.send(message)
    }))
    queue = answer.catch(() => {})
    return answer
  }
  const { issuer } = await ask({ type: 'start', clients, ...(accessTokenTtlS ? { accessTokenTtlS } : {}) }, 'started')
  return {
    issuer,
    pid: child.pid!,
    mint: async (clientId, accounts, scope) => (await ask({ type: 'mint', clientId, accounts, scope }, 'minted')).refreshTokens,
    stats: async () => (await ask({ type: 'stats' }, 'stats')).stats,
    reset: async () => { await ask({ type: 'reset' }, 'reset') },
    stop: async () => {
      if (child.connected) child.disconnect()
      await exited
    },
  }
}

/** Things started, stopped again in reverse order whatever fails on the way. */
export class Stops {
  private readonly list: Array<() => Promise<void>> = []

  add<T extends { stop?: () => Promise<void>, close?: () => Promise<void> }>(thing: T): T {
    this.list.unshift(async () => { await (thing.stop ?? thing.close)?.call(thing) })
    return thing
  }

  async run (): Promise<void> {
    for (const stop of this.list.splice(0)) await stop().catch(() => {})
  }
}

export const round = (value: number, digits: number) => Math.round(value * 10 ** digits) / 10 ** digits

/** The q-quantile (0..1) of `values`, nearest rank; NaN when there are none. */
export function quantile (values: number[], q: number): number {
  if (values.length === 0) return NaN
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!
}

export const mean = (values: number[]) => values.length === 0 ? NaN : values.reduce((a, b) => a + b, 0) / values.length

/** CPU time (ms, all of them) and peak resident memory (MB, largest process) of process trees while `work` runs. */
export async function measured<T> (pids: number | number[], work: () => Promise<T>): Promise<{ result: T, cpuMs: number, peakRssMb: number }> {
  const roots = typeof pids === 'number' ? [pids] : pids
  const cpu = async () => (await Promise.all(roots.map(cpuOfTree))).reduce((a, b) => a + b, 0)
  let peak = 0
  const sample = () => Promise.all(roots.map(rssOfTree)).then((sizes) => { peak = Math.max(peak, ...sizes.flat()) }, () => {})
  const sampler = setInterval(() => { void sample() }, 100)
  const before = await cpu()
  try {
    const result = await work()
    await sample()
    return { result, cpuMs: await cpu() - before, peakRssMb: round(peak / 1e6, 1) }
  } finally {
    clearInterval(sampler)
  }
}
