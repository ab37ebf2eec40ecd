// `npm run demo` as a person runs it (dist/demo/run.js, the built demo), on ports from the OS, for
// the tests that click through it in a real browser.
import { spawn, type ChildProcess } from 'node:child_process'
import { freePort } from './net.js'

export interface RunningDemo {
  /** The address the demo says to open. */
  url: string
  /** What it printed so far. */
  output (): string
  /**
   * Ctrl-C: resolves with its exit code (0: it stopped everything it started). `again`: a second
   * SIGINT once it is stopping (its gateway says so), as under `npm run`, where a Ctrl-C comes from
   * the terminal and from npm.
   */
  interrupt (again?: boolean): Promise<number | null>
}

/**
 * Starts the demo with `args` (and `env` over ports from the OS) and resolves once it prints the
 * address to open (20 s at most). The gateway's port is the suite's (freePort, below the OS's
 * ephemeral range): the demo must know it before the gateway starts (its provider's redirect URI),
 * and a port it took from the OS and let go was once taken in between (the gateway exited with
 * EADDRINUSE); its other servers listen on port 0 and keep what they get.
 */
export async function startDemo (args: string[] = [], env: Record<string, string> = {}): Promise<RunningDemo> {
  const demo: ChildProcess = spawn(process.execPath, ['dist/demo/run.js', ...args], {
    env: { ...process.env, DEMO_GATEWAY_PORT: String(await freePort()), DEMO_ISSUER_PORT: '0', DEMO_APP_PORT: '0', DEMO_FRONT_PORT: '0', REDIS_URL: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  const exited = new Promise<number | null>((resolve) => demo.once('exit', resolve))
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the demo printed no URL within 20 s:\n${output}`)), 20_000)
    const read = (chunk: Buffer) => {
      output += chunk.toString()
      const match = /Open (http\S+) in a browser/.exec(output)
      if (match) {
        clearTimeout(timer)
        resolve(match[1]!)
      }
    }
    demo.stdout!.on('data', read)
    demo.stderr!.on('data', read)
    exited.then((code) => reject(new Error(`the demo exited (${code}):\n${output}`)), () => {})
  })
  return {
    url,
    output: () => output,
    interrupt: async (again = false) => {
      if (demo.exitCode !== null || demo.signalCode !== null) return await exited
      const stopping = again ? new Promise<void>((resolve) => { demo.stdout!.on('data', () => { if (output.includes('shutting down')) resolve() }) }) : undefined
      demo.kill('SIGINT')
      if (stopping !== undefined) await Promise.race([stopping.then(() => demo.kill('SIGINT')), exited])
      return await exited
    },
  }
}
