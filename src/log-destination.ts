// Where log lines go: pino's own asynchronous destination (sonic-boom on stdout), fed once per turn
// of the event loop instead of once per line. Sonic-boom keeps doing the file-descriptor work
// (partial writes, EAGAIN, flushing at exit); the batching spares it a rescan of its whole pending
// buffer on every write, which profiled as the largest cost of the one-line-per-request log.
import pino, { type DestinationStream } from 'pino'

interface Target {
  write (chunk: string): unknown
  flushSync (): void
}

/** Every destination made in this process, written out when it exits (process.exit included). */
const destinations = new Set<BatchedDestination>()
let exitHook = false

export class BatchedDestination implements DestinationStream {
  private lines: string[] = []
  private scheduled = false
  private readonly flushSoon = () => {
    this.scheduled = false
    this.flush()
  }

  constructor (private readonly target: Target = pino.destination({ dest: 1, sync: false })) {
    destinations.add(this)
    if (!exitHook) {
      exitHook = true
      process.once('exit', () => { for (const destination of destinations) destination.flushSync() })
    }
  }

  write (line: string): void {
    this.lines.push(line)
    if (!this.scheduled) {
      this.scheduled = true
      setImmediate(this.flushSoon)
    }
  }

  /** Hands what is pending to the target (which writes it asynchronously). */
  flush (): void {
    if (this.lines.length === 0) return
    const chunk = this.lines.length === 1 ? this.lines[0]! : this.lines.join('')
    this.lines = []
    this.target.write(chunk)
  }

  /** Writes everything out before returning: at shutdown, and what pino calls on a fatal line. */
  flushSync (): void {
    this.flush()
    try {
      this.target.flushSync()
    } catch {
      // sonic-boom refuses while its file descriptor is not open yet: nothing was written to lose.
    }
  }
}
