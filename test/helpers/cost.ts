// How a function's cost grows with its input, measured in one run on this machine: the ratio of
// the time it takes on an input 4 times larger. Linear growth gives about 4, quadratic about 16.
// Never an absolute time: the machine may be slow or busy, but it is the same machine for both.

/** Nanoseconds `reps` calls of `fn(input)` take. */
function timeOf (fn: (input: string) => unknown, input: string, reps: number): number {
  const start = process.hrtime.bigint()
  for (let i = 0; i < reps; i++) fn(input)
  return Number(process.hrtime.bigint() - start)
}

/**
 * The ratio of the cost of `fn(large)` to the cost of `fn(small)`. The repetitions are chosen so
 * that the small input takes about 20 ms; the two sizes are then timed in turn, `trials` times,
 * and the fastest time of each is kept (a busy machine only ever adds time).
 */
export function growth (fn: (input: string) => unknown, small: string, large: string, trials = 7): number {
  for (let i = 0; i < 5; i++) { fn(small); fn(large) }
  let reps = 1
  while (timeOf(fn, small, reps) < 20e6 && reps < 1e6) reps *= 2
  let fastestSmall = Infinity
  let fastestLarge = Infinity
  for (let trial = 0; trial < trials; trial++) {
    fastestSmall = Math.min(fastestSmall, timeOf(fn, small, reps))
    fastestLarge = Math.min(fastestLarge, timeOf(fn, large, reps))
  }
  return fastestLarge / fastestSmall
}
