// A store whose commands show as spans of the request they serve (`store.get`, `store.set`...), made
// only when tracing is on: with it off the gateway uses the store itself, at no cost. Attributes
// name the store and the operation, never a key (keys derive from session ids) nor a value.
import type { Spans } from '../ops/tracing-settings.js'
import type { LockHandle, SessionStore, StoreHealth, WriteOptions } from './store.js'

/** `store` with a span around each command a request waits for (readiness and subscriptions run on their own). */
export class TracedStore implements SessionStore {
  private readonly attributes: Record<string, Readonly<Record<string, string>>> = {}

  constructor (private readonly store: SessionStore, private readonly spans: Spans, private readonly system: 'redis' | 'memory') {}

  get redis (): SessionStore['redis'] {
    return this.store.redis
  }

  private traced<T> (operation: string, fn: () => Promise<T>): Promise<T> {
    this.attributes[operation] ??= { 'db.system.name': this.system, 'db.operation.name': operation }
    return this.spans.around(`store.${operation}`, this.attributes[operation], fn)
  }

  get (key: string): Promise<string | null> { return this.traced('get', () => this.store.get(key)) }
  getBytes (key: string): Promise<Buffer | null> { return this.traced('getBytes', () => this.store.getBytes(key)) }
  getAndTouchBytes (key: string, ttlMs: number): Promise<Buffer | null> { return this.traced('getAndTouchBytes', () => this.store.getAndTouchBytes(key, ttlMs)) }
  remainingMs (key: string): Promise<number | null> { return this.traced('remainingMs', () => this.store.remainingMs(key)) }
  capExpiry (key: string, ttlMs: number): Promise<void> { return this.traced('capExpiry', () => this.store.capExpiry(key, ttlMs)) }
  set (key: string, value: string | Uint8Array, ttlMs: number, options?: WriteOptions): Promise<void> { return this.traced('set', () => this.store.set(key, value, ttlMs, options)) }
  replace (key: string, expected: Uint8Array, value: string | Uint8Array, ttlMs: number, options?: WriteOptions): Promise<boolean> { return this.traced('replace', () => this.store.replace(key, expected, value, ttlMs, options)) }
  take (key: string): Promise<string | null> { return this.traced('take', () => this.store.take(key)) }
  delete (key: string): Promise<void> { return this.traced('delete', () => this.store.delete(key)) }
  end (key: string): Promise<boolean> { return this.traced('end', () => this.store.end(key)) }
  settled (key: string): Promise<void> { return this.traced('settled', () => this.store.settled(key)) }
  unsettled (key: string): Promise<boolean> { return this.traced('unsettled', () => this.store.unsettled(key)) }
  claim (key: string, value: string, ttlMs: number): Promise<boolean> { return this.traced('claim', () => this.store.claim(key, value, ttlMs)) }
  addMember (key: string, member: string, ttlMs: number): Promise<number> { return this.traced('addMember', () => this.store.addMember(key, member, ttlMs)) }
  extend (key: string, ttlMs: number): Promise<void> { return this.traced('extend', () => this.store.extend(key, ttlMs)) }
  members (key: string): Promise<string[]> { return this.traced('members', () => this.store.members(key)) }
  removeMember (key: string, member: string): Promise<void> { return this.traced('removeMember', () => this.store.removeMember(key, member)) }
  addRanked (key: string, member: Buffer, score: number, ttlMs: number, max: number, exempt?: Buffer): Promise<Buffer[]> { return this.traced('addRanked', () => this.store.addRanked(key, member, score, ttlMs, max, exempt)) }
  rankedMembers (key: string): Promise<Buffer[]> { return this.traced('rankedMembers', () => this.store.rankedMembers(key)) }
  addRankedIfRoom (key: string, member: Buffer, score: number, ttlMs: number, max: number): Promise<boolean> { return this.traced('addRankedIfRoom', () => this.store.addRankedIfRoom(key, member, score, ttlMs, max)) }
  removeRanked (key: string, member: Buffer): Promise<void> { return this.traced('removeRanked', () => this.store.removeRanked(key, member)) }
  acquire (key: string, ttlMs: number): Promise<LockHandle | null> { return this.traced('acquire', () => this.store.acquire(key, ttlMs)) }
  release (handle: LockHandle): Promise<boolean> { return this.traced('release', () => this.store.release(handle)) }
  publish (channel: string, message: string): Promise<void> { return this.traced('publish', () => this.store.publish(channel, message)) }

  subscribe (channel: string, onMessage: (message: string) => void, onListening?: (listening: boolean) => void): Promise<void> {
    return this.store.subscribe(channel, onMessage, onListening)
  }

  ready (timeoutMs: number): Promise<boolean> { return this.store.ready(timeoutMs) }
  ping (): Promise<void> { return this.store.ping() }
  health (): Promise<StoreHealth> { return this.store.health() }
  close (): Promise<void> { return this.store.close() }
}
