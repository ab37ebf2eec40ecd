// What a large streamed answer leaves behind. Every read from the upstream's socket is a fresh
// buffer of up to 64 KiB outside V8's heap (an ArrayBuffer over malloc'd memory); once written to the
// client it is garbage, but V8 collects it only when its young generation fills with the small
// objects each chunk allocates, or when external memory has grown by about 64 MB since the last
// collection. A 1 GiB download through one worker thus held 60-100 MB of written chunks at a time
// (RSS 112 -> 207 MB), and what malloc had grown to for them stayed after the burst. A minor
// collection (a scavenge, about a millisecond with 8 MB semi-spaces) after every few MiB of streamed
// body frees them while they are still young, so what they hold stays below that many MiB per
// process. Only streamed answers are counted: small ones are read whole (upstream-response.ts).
import type { Readable } from 'node:stream'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'

/** Streamed body bytes between two minor collections: what written chunks may hold at most, per process. */
export const COLLECT_EVERY_BYTES = 8 * 1024 * 1024

/** The bytes of one streamed body that have flowed on to the client so far. */
export interface Flowed { bytes: number }

/** Counts the bytes of streamed answers and runs `collect` after every `everyBytes` of them. */
export class ChunkCollector {
  private passed = 0

  constructor (private readonly everyBytes: number, private readonly collect: () => void) {}

  /**
   * Counts `body`'s chunks as they flow to the client, and returns the count of this body's bytes
   * (what a cut-off's log line reports). The body is paused first, so the listener does not start
   * the flow before the reply's pipe is attached (which resumes it, and pauses it again whenever the
   * client's socket is full: the listener never reads on its own).
   */
  watch (body: Readable): Flowed {
    const flowed = { bytes: 0 }
    body.pause()
    body.on('data', (chunk: Buffer) => {
      flowed.bytes += chunk.length
      this.count(chunk.length)
    })
    return flowed
  }

  private count (bytes: number): void {
    this.passed += bytes
    if (this.passed < this.everyBytes) return
    this.passed = 0
    this.collect()
  }
}

type Gc = (options: { type: 'minor' | 'major' }) => void

/** V8's gc() (as `--expose-gc` gives it) without exposing it to every module: taken in a context of its own. */
export function minorCollection (): () => void {
  const exposed = (globalThis as { gc?: Gc }).gc
  let gc: Gc
  if (exposed !== undefined) gc = exposed
  else {
    setFlagsFromString('--expose-gc')
    gc = runInNewContext('gc') as Gc
    setFlagsFromString('--no-expose-gc')
  }
  return () => gc({ type: 'minor' })
}

let shared: ChunkCollector | undefined

/** The process's one collector (the garbage is the process's, whatever route it came through). */
export function chunkCollector (): ChunkCollector {
  shared ??= new ChunkCollector(COLLECT_EVERY_BYTES, minorCollection())
  return shared
}
