// How a function's cost grows with its input, measured in one run on this machine: the ratio of
// the time it takes on an input 4 times larger. Linear growth gives about 4, quadratic about 16.
// Never an absolute time: the machine may be slow or busy, but it is the same machine for both.
// Keep both inputs on one side of V8's largest ordinary heap object (128 KiB): a string or copy
// above it is made elsewhere, at another price, and a linear scan of 60 against 240 KB read over 8
// in a full run of the suite (test/access/method-override.test.ts).

/**
 * CPU microseconds (user and system) of this thread for `reps` calls of `fn(input)`. CPU time,
 * not wall time: on a shared machine the process may wait for a core, and that waiting is no
 * cost of `fn`. This thread's, not the process's: the loop is synchronous, so nothing else runs
 * on it meanwhile, but V8's own threads do (concurrent marking of what earlier test files of the
 * worker left, optimizing compiles), and counted into one size's measurement they once made a
 * linear parser read as growing more than 8 times for 4 times the input (Node 22.19 and later,
 * as package.json's engines require).
 */
function costOf (fn: (input: string) => unknown, input: string, reps: number): number {
  const start = process.threadCpuUsage()
  for (let i = 0; i < reps; i++) fn(input)
  const used = process.threadCpuUsage(start)
  return used.user + used.system
}

/** A ratio this far below the bound every caller checks (8) after {@link SETTLED_AFTER} trials needs no more of them. */
const SETTLED_BELOW = 6
const SETTLED_AFTER = 2

/** How many of the clock's steps the small input's measurement spans at least. */
const GRAINS = 8

let grain: number | undefined

/**
 * The step of this thread's CPU clock, in microseconds: the largest of a few consecutive advances.
 * On many kernels getrusage(RUSAGE_THREAD) moves by whole scheduler ticks (4 ms at HZ=250, as on
 * this project's machines; the process clock does not), so a measurement only two ticks long read
 * as twice its cost or as nothing: a linear check once failed with a ratio of Infinity.
 */
function clockStep (): number {
  if (grain !== undefined) return grain
  let largest = 0
  let last = process.threadCpuUsage()
  for (let seen = 0; seen < 8;) {
    const now = process.threadCpuUsage()
    const step = now.user + now.system - last.user - last.system
    if (step > 0) {
      largest = Math.max(largest, step)
      seen++
      last = now
    }
  }
  grain = largest
  return grain
}

/**
 * The ratio of the cost of `fn(large)` to the cost of `fn(small)`. The repetitions are chosen so
 * that the small input costs at least 8 ms and 8 steps of the CPU clock (its grain is then at most
 * an eighth of the measurement); the two sizes are then measured in turn, up to `trials` times, and the cheapest measurement
 * of each is kept (a busy machine only ever adds cost, and so does code not yet compiled: a cold
 * first trial is never the cheapest, so two warm-up calls of each size are enough). Once two
 * trials put the ratio under 6, the rest are skipped: for linear code (about 4) that is most of
 * the time spent here; quadratic code (about 16) would need its small input to cost well over
 * twice its price in both trials to get there, and keeps being measured.
 */
export function growth (fn: (input: string) => unknown, small: string, large: string, trials = 7): number {
  for (let i = 0; i < 2; i++) { fn(small); fn(large) }
  const least = Math.max(8000, GRAINS * clockStep())
  let reps = 1
  while (costOf(fn, small, reps) < least && reps < 1e7) reps *= 2
  let cheapestSmall = Infinity
  let cheapestLarge = Infinity
  for (let trial = 0; trial < trials; trial++) {
    const smallCost = costOf(fn, small, reps)
    // Compiled to faster code than when `reps` was chosen: a measurement this short is the clock's
    // grain rather than the cost (it once read 0, a ratio of Infinity, in a full run of the suite).
    // Measure longer, from the first trial again.
    if (smallCost < least / 2 && reps < 1e7) {
      reps *= 2
      cheapestSmall = cheapestLarge = Infinity
      trial = -1
      continue
    }
    cheapestSmall = Math.min(cheapestSmall, smallCost)
    cheapestLarge = Math.min(cheapestLarge, costOf(fn, large, reps))
    if (trial + 1 >= SETTLED_AFTER && cheapestLarge / cheapestSmall < SETTLED_BELOW) break
  }
  return cheapestLarge / cheapestSmall
}
