// Processes of the tests: the child processes a test file starts (gateway CLIs), ended in afterAll
// whatever happened in the test, before what they used (a Redis the next file may be handed, a
// port) is let go, since a test that failed halfway would otherwise leave its gateway running and
// connected to that Redis; and a lock that keeps two machine-loading test files from overlapping.
import type { ChildProcess } from 'node:child_process'
import { mkdir, readdir, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export class Children {
  private readonly started: ChildProcess[] = []

  /** Keeps `child` to be ended by {@link end}; returns it. */
  add<T extends ChildProcess> (child: T): T {
    this.started.push(child)
    return child
  }

  /** SIGKILL to every child still running, and waits until each has exited. */
  async end (): Promise<void> {
    await Promise.all(this.started.splice(0).map(async (child) => {
      if (child.exitCode !== null || child.signalCode !== null) return
      const exited = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGKILL')
      await exited
    }))
  }
}

/**
 * The processes of this machine whose environment has `name=value` (Linux's /proc, as CI runs):
 * a test gives its children a value of its own, and whatever they started inherits it, so a
 * grandchild left running after its parent was killed is found although nobody knows its pid.
 */
export async function processesWithEnv (name: string, value: string): Promise<number[]> {
  const wanted = `${name}=${value}`
  const found: number[] = []
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    // Gone meanwhile, or another user's: not one of ours.
    const environ = await readFile(`/proc/${entry}/environ`, 'latin1').catch(() => '')
    if (environ.split('\0').includes(wanted)) found.push(Number(entry))
  }
  return found
}

/**
 * Holds a lock named `name` across the test workers of this vitest run (a directory made
 * atomically, named with the run's pid) until the returned function is called: two test files
 * that each load the machine take it so they never run at the same time, whatever order the
 * scheduler picked. Gives up after `timeoutMs`.
 */
export async function exclusively (name: string, timeoutMs = 60_000): Promise<() => Promise<void>> {
  const dir = join(tmpdir(), `gateway-test-${name}-${process.ppid}`)
  const deadline = Date.now() + timeoutMs
  for (;;) {
    try {
      await mkdir(dir)
      return async () => { await rm(dir, { recursive: true, force: true }) }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
      if (Date.now() > deadline) throw new Error(`another test file held ${dir} for ${timeoutMs} ms`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
}
