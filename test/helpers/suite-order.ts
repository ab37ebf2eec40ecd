// The order test files are handed to the workers in (vitest.config.ts): the files that mostly wait
// on real servers' clocks spread evenly through the run, so that the workers are never all waiting
// at once while the cores stand idle.

/**
 * `items` in their order, with the waiting ones (`waits`) placed where the weight before them is
 * their share of the whole: each is taken as soon as the waiting weight so far is at most that
 * share of all the weight so far. The order within each kind is kept.
 */
export function spread<T> (items: T[], weight: (item: T) => number, waits: (item: T) => boolean): T[] {
  const waiting = items.filter(waits)
  const busy = items.filter((item) => !waits(item))
  const total = (list: T[]) => list.reduce((sum, item) => sum + weight(item), 0)
  const share = total(waiting) / Math.max(1, total(items))
  const order: T[] = []
  let waited = 0
  let elapsed = 0
  for (let w = 0, b = 0; w < waiting.length || b < busy.length;) {
    const next = w < waiting.length && (b === busy.length || waited <= share * elapsed) ? waiting[w++]! : busy[b++]!
    if (waits(next)) waited += weight(next)
    elapsed += weight(next)
    order.push(next)
  }
  return order
}
