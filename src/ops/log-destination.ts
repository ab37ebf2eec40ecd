// Where log lines go: pino's own asynchronous destination (sonic-boom on stdout), fed in batches:
// the lines of a short window (25 ms) in one write. Sonic-boom keeps doing the file-descriptor work
// (partial writes, EAGAIN, flushing at exit). Batching spares it a rescan of its whole pending buffer
// on every write (the largest cost of the one-line-per-request log at full load), and a window
// rather than one write per event-loop turn keeps the cost per line low at moderate load too, where
// a turn often carries a single request and each write is a trip through libuv's thread pool
// (see docs/performance.md). Nothing is lost at exit: every destination
// is written out synchronously then.
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
  private timer: NodeJS.Timeout | undefined
  private readonly flushSoon = () => {
    this.timer = undefined
    this.flush()
  }

  /**
   * @param windowMs how long a line may wait for others to share its write
   * @param maxLines a batch this long is written at once, whatever the window
   */
  constructor (
    private readonly target: Target = pino.destination({ dest: 1, sync: false }),
    private readonly windowMs = 25,
    private readonly maxLines = 1000
  ) {
    destinations.add(this)
    if (!exitHook) {
      exitHook = true
      process.once('exit', () => { for (const destination of destinations) destination.flushSync() })
    }
  }

  write (line: string): void {
    this.lines.push(line)
    if (this.lines.length >= this.maxLines) this.flush()
    // Unref'd: a pending batch never keeps the process alive (the exit hook writes it).
    else this.timer ??= setTimeout(this.flushSoon, this.windowMs).unref()
  }

  /** Hands what is pending to the target (which writes it asynchronously). */
  flush (): void {
    clearTimeout(this.timer)
    this.timer = undefined
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
