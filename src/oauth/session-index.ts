// Which gateway sessions belong to a provider's session: `logout:<provider>:sid:<h>` and
// `logout:<provider>:sub:<h>` list the ids of the sessions signed in with that `sid` or `sub`, so a
// back-channel logout that names one can end them all, on every instance. `<h>` is a keyed hash of
// the value (a store dump shows no user id). Plain get/set/take on the store: an entry is read,
// extended and written back, so two sign-ins of one subject at the same instant may keep one id
// only (the other session then outlives a back-channel logout, as it would without this index).
// @see https://openid.net/specs/openid-connect-backchannel-1_0.html#BCActions
import { createHmac } from 'node:crypto'
import type { SessionStore } from '../store/store.js'

/** Which claim of the provider's session a key is for. */
export type SessionClaim = 'sid' | 'sub'

/** Ids kept per entry: the newest ones (sessions of a subject beyond this many are the oldest). */
const MAX_IDS = 64

export class SessionIndex {
  constructor (
    private readonly store: SessionStore,
    private readonly key: Uint8Array,
    /** How long an entry lives after its newest sign-in. */
    private readonly ttlMs: number
  ) {}

  private storeKey (provider: string, claim: SessionClaim, value: string): string {
    const hash = createHmac('sha256', this.key).update(provider).update('\0').update(claim).update('\0').update(value).digest('base64url')
    return `logout:${provider}:${claim}:${hash}`
  }

  private static parse (value: string | null): string[] {
    if (value === null) return []
    try {
      const ids: unknown = JSON.parse(value)
      return Array.isArray(ids) ? ids.filter((id): id is string => typeof id === 'string') : []
    } catch {
      return []
    }
  }

  /** Records that session `id` signed in with this provider session's `sid` and `sub` (either may be absent). */
  async add (provider: string, claims: { sid?: string, sub?: string }, id: string): Promise<void> {
    for (const claim of ['sid', 'sub'] as const) {
      const value = claims[claim]
      if (value === undefined) continue
      const key = this.storeKey(provider, claim, value)
      const ids = SessionIndex.parse(await this.store.get(key)).filter((known) => known !== id)
      ids.push(id)
      await this.store.set(key, JSON.stringify(ids.slice(-MAX_IDS)), this.ttlMs)
    }
  }

  /** The ids of the sessions with this `sid` or `sub`, and the entry removed (they are about to end). */
  async take (provider: string, claim: SessionClaim, value: string): Promise<string[]> {
    return SessionIndex.parse(await this.store.take(this.storeKey(provider, claim, value)))
  }
}
