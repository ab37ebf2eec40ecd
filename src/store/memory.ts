// The in-process store: the zero-setup default for a single gateway instance. Every role with the
// Redis store's semantics; entries expire by the injected clock, lazily on read and by a periodic
// sweep, so tests move the clock instead of sleeping.
import { systemClock, type Clock } from '../ops/clock.js'
import { lockOwner, type LockHandle, type SessionStore, type StoreHealth } from './store.js'

/** A value as it was set: text, or bytes (read back as text in UTF-8, as Redis clients do). */
interface Entry { value: string | Buffer, expiresAt: number }

const text = (value: string | Buffer): string => typeof value === 'string' ? value : value.toString('utf8')
const bytes = (value: string | Buffer): Buffer => typeof value === 'string' ? Buffer.from(value, 'utf8') : Buffer.from(value)

export interface MemoryStoreOptions {
  /** What "now" is for expiry (default the wall clock). */
  clock?: Clock
  /** How often expired entries are dropped even if nobody reads them. */
  sweepEveryMs?: number
}

export class MemoryStore implements SessionStore {
  readonly redis = undefined
  private readonly entries = new Map<string, Entry>()
  private readonly sets = new Map<string, { members: Set<string>, expiresAt: number }>()
  /** Ranked sets: member -> score. */
  private readonly ranked = new Map<string, { members: Map<string, number>, expiresAt: number }>()
  private readonly listeners = new Map<string, Array<(message: string) => void>>()
  private readonly sweeper: NodeJS.Timeout
  private readonly clock: Clock

  constructor ({ clock = systemClock, sweepEveryMs = 60_000 }: MemoryStoreOptions = {}) {
    this.clock = clock
    this.sweeper = setInterval(() => this.sweep(), sweepEveryMs)
    this.sweeper.unref()
  }

  private live (key: string): Entry | undefined {
    const entry = this.entries.get(key)
    if (entry && entry.expiresAt <= this.clock.now()) {
      this.entries.delete(key)
      return undefined
    }
    return entry
  }

  private sweep (): void {
    const now = this.clock.now()
    for (const [key, entry] of this.entries) if (entry.expiresAt <= now) this.entries.delete(key)
    for (const [key, set] of this.sets) if (set.expiresAt <= now) this.sets.delete(key)
    for (const [key, set] of this.ranked) if (set.expiresAt <= now) this.ranked.delete(key)
  }

  private liveSet (key: string): { members: Set<string>, expiresAt: number } | undefined {
    const set = this.sets.get(key)
    if (set && set.expiresAt <= this.clock.now()) {
      this.sets.delete(key)
      return undefined
    }
    return set
  }

  async addMember (key: string, member: string, ttlMs: number): Promise<number> {
    const set = this.liveSet(key) ?? { members: new Set<string>(), expiresAt: 0 }
    set.members.add(member)
    set.expiresAt = Math.max(set.expiresAt, this.clock.now() + ttlMs)
    this.sets.set(key, set)
    return set.members.size
  }

  async extend (key: string, ttlMs: number): Promise<void> {
    const set = this.liveSet(key) ?? this.liveRanked(key)
    if (set) set.expiresAt = Math.max(set.expiresAt, this.clock.now() + ttlMs)
  }

  /** Ranked members by their bytes as latin1 text (one character per byte): a Map key that compares as bytes. */
  private liveRanked (key: string): { members: Map<string, number>, expiresAt: number } | undefined {
    const set = this.ranked.get(key)
    if (set && set.expiresAt <= this.clock.now()) {
      this.ranked.delete(key)
      return undefined
    }
    return set
  }

  /** Members lowest score first; equal scores by member, as Redis orders them. */
  private static inOrder (members: Map<string, number>): string[] {
    return [...members].sort(([a, x], [b, y]) => x - y || (a < b ? -1 : a > b ? 1 : 0)).map(([member]) => member)
  }

  async addRanked (key: string, member: Buffer, score: number, ttlMs: number, max: number, exempt?: Buffer): Promise<Buffer[]> {
    return this.rank(key, member, score, ttlMs, max, exempt?.toString('latin1'))
  }

  async addRankedIfRoom (key: string, member: Buffer, score: number, ttlMs: number, max: number): Promise<boolean> {
    const members = this.liveRanked(key)?.members
    if (members && !members.has(member.toString('latin1')) && members.size >= max) return false
    // No trim here: as on Redis, a set already over the bound only has the member re-scored.
    this.rank(key, member, score, ttlMs, Infinity)
    return true
  }

  private rank (key: string, member: Buffer, score: number, ttlMs: number, max: number, exempt?: string): Buffer[] {
    const set = this.liveRanked(key) ?? { members: new Map<string, number>(), expiresAt: 0 }
    set.members.set(member.toString('latin1'), score)
    set.expiresAt = Math.max(set.expiresAt, this.clock.now() + ttlMs)
    this.ranked.set(key, set)
    const kept = exempt !== undefined && exempt !== '' && set.members.has(exempt) ? max + 1 : max
    const dropped = MemoryStore.inOrder(set.members).filter((each) => each !== exempt).slice(0, Math.max(0, set.members.size - kept))
    for (const gone of dropped) set.members.delete(gone)
    return dropped.map((gone) => Buffer.from(gone, 'latin1'))
  }

  async rankedMembers (key: string): Promise<Buffer[]> {
    const set = this.liveRanked(key)
    return set ? MemoryStore.inOrder(set.members).map((member) => Buffer.from(member, 'latin1')) : []
  }

  async removeRanked (key: string, member: Buffer): Promise<void> {
    this.liveRanked(key)?.members.delete(member.toString('latin1'))
  }

  async members (key: string): Promise<string[]> {
    const set = this.liveSet(key)
    return set ? [...set.members] : []
  }

  async removeMember (key: string, member: string): Promise<void> {
    const set = this.liveSet(key)
    set?.members.delete(member)
    if (set?.members.size === 0) this.sets.delete(key)
  }

  async get (key: string): Promise<string | null> {
    const entry = this.live(key)
    return entry ? text(entry.value) : null
  }

  async getBytes (key: string): Promise<Buffer | null> {
    const entry = this.live(key)
    return entry ? bytes(entry.value) : null
  }

  private touch (key: string, ttlMs: number): Entry | undefined {
    const entry = this.live(key)
    if (entry) entry.expiresAt = this.clock.now() + ttlMs
    return entry
  }

  async getAndTouchBytes (key: string, ttlMs: number): Promise<Buffer | null> {
    const entry = this.touch(key, ttlMs)
    return entry ? bytes(entry.value) : null
  }

  async remainingMs (key: string): Promise<number | null> {
    const entry = this.live(key)
    return entry ? entry.expiresAt - this.clock.now() : null
  }

  async capExpiry (key: string, ttlMs: number): Promise<void> {
    const entry = this.live(key)
    if (entry) entry.expiresAt = Math.min(entry.expiresAt, this.clock.now() + ttlMs)
  }

  async set (key: string, value: string | Uint8Array, ttlMs: number): Promise<void> {
    // Bytes are copied: the caller may reuse its buffer, as it may after a write to Redis.
    this.entries.set(key, { value: typeof value === 'string' ? value : Buffer.from(value), expiresAt: this.clock.now() + ttlMs })
  }

  async replace (key: string, expected: Uint8Array, value: string | Uint8Array, ttlMs: number): Promise<boolean> {
    const entry = this.live(key)
    if (!entry || !bytes(entry.value).equals(expected)) return false
    await this.set(key, value, ttlMs)
    return true
  }

  async take (key: string): Promise<string | null> {
    const entry = this.live(key)
    this.entries.delete(key)
    return entry ? text(entry.value) : null
  }

  async delete (key: string): Promise<void> {
    this.entries.delete(key)
  }

  async end (key: string): Promise<boolean> {
    const there = this.live(key) !== undefined
    this.entries.delete(key)
    return there
  }

  /** Nothing to wait for: there are no replicas. */
  async settled (_key: string): Promise<void> {}
  async unsettled (_key: string): Promise<boolean> { return false }

  async claim (key: string, value: string, ttlMs: number): Promise<boolean> {
    if (this.live(key)) return false
    this.entries.set(key, { value, expiresAt: this.clock.now() + ttlMs })
    return true
  }

  async acquire (key: string, ttlMs: number): Promise<LockHandle | null> {
    const owner = lockOwner()
    return await this.claim(key, owner, ttlMs) ? { key, owner } : null
  }

  async release ({ key, owner }: LockHandle): Promise<boolean> {
    if (this.live(key)?.value !== owner) return false
    this.entries.delete(key)
    return true
  }

  async publish (channel: string, message: string): Promise<void> {
    for (const listener of this.listeners.get(channel) ?? []) listener(message)
  }

  async subscribe (channel: string, onMessage: (message: string) => void): Promise<void> {
    this.listeners.set(channel, [...(this.listeners.get(channel) ?? []), onMessage])
  }

  async ready (): Promise<boolean> {
    return true
  }

  async ping (): Promise<void> {}

  async health (): Promise<StoreHealth> {
    return { state: 'up', unreachable: [] }
  }

  async close (): Promise<void> {
    clearInterval(this.sweeper)
    this.entries.clear()
    this.sets.clear()
    this.ranked.clear()
    this.listeners.clear()
  }
}
