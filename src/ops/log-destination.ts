// Where log lines go: pino's own asynchronous destination (sonic-boom on stdout), fed in batches:
// the lines of a short window (5 ms) in one write. Sonic-boom keeps doing the file-descriptor work
// (partial writes, EAGAIN, flushing at exit). Batching spares it a rescan of its whole pending buffer
// on every write (the largest cost of the one-line-per-request log at full load), and a window
// rather than one write per event-loop turn keeps the cost per line low at moderate load too, where
// a turn often carries a single request and each write is a trip through libuv's thread pool.
// What a window holds must die young: lines kept as strings for 25 ms outlived a young-generation
// collection or two at full load, so each collection copied them and then promoted them, and the
// old generation's collections set the p99 (12 ms against the bare proxy's 6, and a fifth more CPU
// per request). So the lines wait as bytes in one reused buffer outside V8's heap, and the window is
// 5 ms: with 25 ms the p99 was still 8 ms (docs/performance.md). Nothing is lost at exit: every
// destination is written out synchronously then (only a write sonic-boom had already started in
// the last moment may be).
import pino, { type DestinationStream } from 'pino'

interface Target {
  write (chunk: Buffer): unknown
  flushSync (): void
  /** Written before it returns: at exit, a write handed to libuv's thread pool may never be made. */
  writeSync (chunk: Buffer): void
}

/** Every destination made in this process, written out when it exits (process.exit included). */
const destinations = new Set<BatchedDestination>()
let exitHook = false

/**
 * pino's asynchronous destination (sonic-boom) writing bytes to `dest`, a file descriptor or path.
 * Its type declares strings only; in its buffer mode it takes Buffers (and only them).
 */
export function bytesTo (dest: number | string): Target & { once (event: 'ready', listener: () => void): unknown } {
  const boom = pino.destination({ dest, sync: false, contentMode: 'buffer' })
  // sonic-boom's flushSync writes what it holds, but a write it has already started stays on the
  // thread pool; what is written at exit goes through a synchronous destination of its own instead.
  let atExit: ReturnType<typeof pino.destination> | undefined
  return {
    write: (chunk) => boom.write(chunk as unknown as string),
    flushSync: () => { boom.flushSync() },
    writeSync: (chunk) => {
      atExit ??= pino.destination({ dest, sync: true, contentMode: 'buffer' })
      atExit.write(chunk as unknown as string)
    },
    once: (event, listener) => boom.once(event, listener),
  }
}

/** Writes every destination's pending lines before it returns (what exit does, for a message that must come after them). */
export function writeLogsNow (): void {
  for (const destination of destinations) destination.flushSync()
}

/** UTF-8 takes at most three bytes for each UTF-16 code unit of a string. */
const MAX_BYTES_PER_UNIT = 3

export class BatchedDestination implements DestinationStream {
  private readonly batch: Buffer
  private used = 0
  private timer: NodeJS.Timeout | undefined
  private readonly flushSoon = () => {
    this.timer = undefined
    this.flush()
  }

  /**
   * @param windowMs how long a line may wait for others to share its write
   * @param maxBytes a batch this large is written at once, whatever the window
   */
  constructor (
    private readonly target: Target = bytesTo(1),
    private readonly windowMs = 5,
    private readonly maxBytes = 256 * 1024
  ) {
    this.batch = Buffer.allocUnsafeSlow(maxBytes)
    destinations.add(this)
    if (!exitHook) {
      exitHook = true
      process.once('exit', () => { for (const destination of destinations) destination.flushSync() })
    }
  }

  write (line: string): void {
    if (this.used + line.length * MAX_BYTES_PER_UNIT > this.maxBytes) {
      this.flush()
      // A line longer than a whole batch goes on its own.
      if (line.length * MAX_BYTES_PER_UNIT > this.maxBytes) {
        this.target.write(Buffer.from(line))
        return
      }
    }
    this.used += this.batch.write(line, this.used)
    // Unref'd: a pending batch never keeps the process alive (the exit hook writes it).
    this.timer ??= setTimeout(this.flushSoon, this.windowMs).unref()
  }

  /** Hands what is pending to the target (which writes it asynchronously, holding on to the bytes until then). */
  flush (): void {
    clearTimeout(this.timer)
    this.timer = undefined
    if (this.used === 0) return
    // A copy the target holds only until its write is done (a turn or two): the batch itself is
    // reused. A new batch per window fared no better than strings (p99 10 ms against the bare
    // proxy's 6): it lived long enough to be promoted to the old generation, and then kept its
    // 256 KiB outside the heap until a full collection.
    const chunk = Buffer.copyBytesFrom(this.batch, 0, this.used)
    this.used = 0
    this.target.write(chunk)
  }

  /**
   * Writes everything out before returning: at shutdown, and what pino calls on a fatal line. What
   * the target holds first, then what is pending here, synchronously: handed to the target's
   * asynchronous write, a process ending right after (the "shut down" line) could lose it.
   */
  flushSync (): void {
    clearTimeout(this.timer)
    this.timer = undefined
    try {
      this.target.flushSync()
    } catch {
      // sonic-boom refuses while its file descriptor is not open yet: nothing was written to lose.
    }
    if (this.used === 0) return
    const chunk = Buffer.copyBytesFrom(this.batch, 0, this.used)
    this.used = 0
    this.target.writeSync(chunk)
  }
}
