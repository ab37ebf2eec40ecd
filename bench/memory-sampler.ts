// Loaded into a gateway the bench starts (`node --import ./dist/bench/memory-sampler.js`), never by
// the gateway itself: every 100 ms it reads process.memoryUsage() and, whenever the resident size
// reaches a new peak, writes that sample to the file named by GATEWAY_BENCH_MEMORY. What the peak
// is made of (V8 heap, external buffers, native memory and code) is what the bench prints. The
// file also holds the most ArrayBuffer memory any sample saw (`maxArrayBuffers`, rewritten when it
// grows): what a large streamed answer's chunks held (test/proxy/large-answers.test.ts).
import { writeFileSync } from 'node:fs'
import { threadId } from 'node:worker_threads'

/** One process.memoryUsage() sample, in bytes, at the process's highest resident size so far. */
export interface MemoryPeak {
  rss: number
  heapTotal: number
  heapUsed: number
  external: number
  arrayBuffers: number
  /** The largest `arrayBuffers` of any sample so far, at the peak or not. */
  maxArrayBuffers: number
}

const file = process.env.GATEWAY_BENCH_MEMORY
if (file !== undefined && threadId === 0) {
  const target = `${file}.${process.pid}`
  let peak: Omit<MemoryPeak, 'maxArrayBuffers'> | undefined
  let maxArrayBuffers = 0
  const sample = (): void => {
    const usage = process.memoryUsage()
    if (usage.rss <= (peak?.rss ?? 0) && usage.arrayBuffers <= maxArrayBuffers) return
    if (usage.rss > (peak?.rss ?? 0)) {
      const { rss, heapTotal, heapUsed, external, arrayBuffers } = usage
      peak = { rss, heapTotal, heapUsed, external, arrayBuffers }
    }
    maxArrayBuffers = Math.max(maxArrayBuffers, usage.arrayBuffers)
    writeFileSync(target, JSON.stringify({ ...peak!, maxArrayBuffers } satisfies MemoryPeak))
  }
  // Unref'd: the sampler must never keep a gateway alive that is shutting down.
  setInterval(sample, 100).unref()
}
