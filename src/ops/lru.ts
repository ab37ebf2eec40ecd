// A least-recently-used map with a fixed number of entries: the bound of every cache whose keys a
// client influences (forwarded hosts, audiences, session ids), so that no stream of distinct
// values can grow the process. A Map keeps insertion order; a read moves its key to the end.

/** A Map that holds at most `capacity` entries, dropping the least recently used first. */
export class Lru<K, V> {
  private readonly entries = new Map<K, V>()

  /** @param capacity at least 1 */
  constructor (readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`an LRU needs a capacity of at least 1, got ${capacity}`)
  }

  get size (): number {
    return this.entries.size
  }

  /** The value, now the most recently used; undefined when absent. */
  get (key: K): V | undefined {
    const value = this.entries.get(key)
    if (value === undefined) return undefined
    this.entries.delete(key)
    this.entries.set(key, value)
    return value
  }

  /** The value without touching its place (for a read that must not keep an entry alive). */
  peek (key: K): V | undefined {
    return this.entries.get(key)
  }

  /** Sets `key` as the most recently used, dropping the least recently used when full. */
  set (key: K, value: V): void {
    this.entries.delete(key)
    if (this.entries.size >= this.capacity) this.entries.delete(this.entries.keys().next().value!)
    this.entries.set(key, value)
  }

  delete (key: K): void {
    this.entries.delete(key)
  }

  clear (): void {
    this.entries.clear()
  }

  values (): IterableIterator<V> {
    return this.entries.values()
  }
}
