// In-process SessionStore: the zero-setup default for a single gateway instance. Same semantics
// as the Redis store; entries expire lazily on read and by a periodic sweep.
import type { SessionStore, StoreHealth } from './store.js'

interface Entry { value: string, expiresAt: number }

export class MemoryStore implements SessionStore {
  private readonly entries = new Map<string, Entry>()
  private readonly listeners = new Map<string, Array<(message: string) => void>>()
  private readonly sweeper: NodeJS.Timeout

  constructor (sweepEveryMs = 60_000) {
    this.sweeper = setInterval(() => this.sweep(), sweepEveryMs)
    this.sweeper.unref()
  }

  private live (key: string): Entry | undefined {
    const entry = this.entries.get(key)
    if (entry && entry.expiresAt <= Date.now()) {
      this.entries.delete(key)
      return undefined
    }
    return entry
  }

  private sweep (): void {
    const now = Date.now()
    for (const [key, entry] of this.entries) if (entry.expiresAt <= now) this.entries.delete(key)
  }

  async get (key: string): Promise<string | null> {
    return this.live(key)?.value ?? null
  }

  async getAndTouch (key: string, ttlMs: number): Promise<string | null> {
    const entry = this.live(key)
    if (!entry) return null
    entry.expiresAt = Date.now() + ttlMs
    return entry.value
  }

  async set (key: string, value: string, ttlMs: number): Promise<void> {
    this.entries.set(key, { value, expiresAt: Date.now() + ttlMs })
  }

  async take (key: string): Promise<string | null> {
    const entry = this.live(key)
    this.entries.delete(key)
    return entry?.value ?? null
  }

  async delete (key: string): Promise<void> {
    this.entries.delete(key)
  }

  async claim (key: string, value: string, ttlMs: number): Promise<boolean> {
    if (this.live(key)) return false
    this.entries.set(key, { value, expiresAt: Date.now() + ttlMs })
    return true
  }

  async publish (channel: string, message: string): Promise<void> {
    for (const listener of this.listeners.get(channel) ?? []) listener(message)
  }

  async subscribe (channel: string, onMessage: (message: string) => void): Promise<void> {
    this.listeners.set(channel, [...(this.listeners.get(channel) ?? []), onMessage])
  }

  async ping (): Promise<void> {}

  async health (): Promise<StoreHealth> {
    return { state: 'up', unreachable: [] }
  }

  async close (): Promise<void> {
    clearInterval(this.sweeper)
    this.entries.clear()
    this.listeners.clear()
  }
}
