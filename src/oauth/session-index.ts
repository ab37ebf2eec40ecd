// Which gateway sessions belong to a provider's session: `logout:<provider>:sid:<h>` and
// `logout:<provider>:sub:<h>` are sets of the ids of the sessions signed in with that `sid` or
// `sub`, so a back-channel logout that names one can end them all, on every instance. `<h>` is a
// keyed hash of the value (a store dump shows no user id). Each set lives at least as long as the
// longest-lived session in it: a sign-in adds to it, and every renewal of a session's idle timeout
// (`touch`) extends it, so a session in use for days is still found. Adding is one atomic store
// operation (a Redis set), so concurrent sign-ins of one subject all stay listed. `<h>` is keyed
// by a secret: a sign-in adds under the current one; a renewal extends, and a logout takes, under
// every secret the gateway holds (session.previousSecrets), so the sessions signed in before a
// rotation stay found for as long as their secret still opens them.
// @see https://openid.net/specs/openid-connect-backchannel-1_0.html#BCActions
import { createHmac, type KeyObject } from 'node:crypto'
import type { Clock } from '../ops/clock.js'
import type { Sealer } from '../session/seal.js'
import { mark, markedWithin } from '../store/marks.js'
import { isPendingSignInKey, storeKeys, type KeyValue, type Sets } from '../store/store.js'

/** The size past which a set is pruned of ended sessions at a sign-in: more than a person keeps at one provider session. */
export const PRUNE_ABOVE = 16

/** Which claim of the provider's session a key is for. */
export type SessionClaim = 'sid' | 'sub'

/** What a session keeps of one provider's session (the index's keys are derived from it). */
export interface ProviderSessionClaims { sid?: string, sub?: string }

function storeKey (key: KeyObject, provider: string, claim: SessionClaim, value: string): string {
  const hash = createHmac('sha256', key).update(provider).update('\0').update(claim).update('\0').update(value).digest('base64url')
  return `logout:${provider}:${claim}:${hash}`
}

/** Where a back-channel logout of the `sid` or `sub` whose entries are at `key` is marked. */
const markKey = (key: string): string => `logged-out:${key.slice('logout:'.length)}`

export class SessionIndex {
  /** Each secret's index key, current first. */
  private readonly hashKeys: readonly KeyObject[]

  constructor (
    private readonly store: Sets & Pick<KeyValue, 'remainingMs' | 'set'>,
    /** session.secret (adds) and previousSecrets (renewals and logouts too). */
    sealer: Sealer,
    /** How long an entry lives after the last sign-in or renewal of a session in it (the session's idle timeout). */
    private readonly ttlMs: number,
    private readonly clock: Clock
  ) {
    this.hashKeys = sealer.keys.map((key) => key.derive('logout-index'))
  }

  private keys (hashKeys: readonly KeyObject[], providerSessions: Record<string, ProviderSessionClaims> | undefined): string[] {
    const keys: string[] = []
    for (const hashKey of hashKeys) {
      for (const [provider, claims] of Object.entries(providerSessions ?? {})) {
        if (claims.sid !== undefined) keys.push(storeKey(hashKey, provider, 'sid', claims.sid))
        if (claims.sub !== undefined) keys.push(storeKey(hashKey, provider, 'sub', claims.sub))
      }
    }
    return keys
  }

  /**
   * Records that session `id` signed in with this provider session's `sid` and `sub` (either may be
   * absent), under the current secret. A set grown past PRUNE_ABOVE loses the ids of sessions gone
   * (ended by sign out everywhere, a revoke, a timeout: none of them knows the entries): a person
   * who keeps one session in use and signs in again and again grew it by one id a sign-in, each
   * ended again by a back-channel logout (an outside tester's finding). Below it, a sign-in costs no
   * more commands than before.
   */
  async add (provider: string, claims: ProviderSessionClaims, id: string): Promise<void> {
    for (const key of this.keys(this.hashKeys.slice(0, 1), { [provider]: claims })) {
      if (await this.store.addMember(key, id, this.ttlMs) > PRUNE_ABOVE) await this.prune(key)
    }
  }

  /** Takes out of the set at `key` the ids whose session (or kept sign-in) is gone. */
  private async prune (key: string): Promise<void> {
    for (const id of await this.store.members(key)) {
      if (await this.store.remainingMs(isPendingSignInKey(id) ? id : storeKeys.session(id)) === null) await this.store.removeMember(key, id)
    }
  }

  /**
   * The session's idle timeout was renewed: its entries live at least as long again, under every
   * secret (a session signed in before a rotation is listed under the previous one).
   */
  async touch (providerSessions: Record<string, ProviderSessionClaims> | undefined): Promise<void> {
    for (const key of this.keys(this.hashKeys, providerSessions)) await this.store.extend(key, this.ttlMs)
  }

  /**
   * Session `id` ended here (signed out, or replaced by a sign-in in its browser): it leaves its
   * entries, under every secret. Otherwise a person who signs in again and again while one of their
   * sessions stays in use keeps a set that grows by one id per sign-in.
   */
  async remove (providerSessions: Record<string, ProviderSessionClaims> | undefined, id: string): Promise<void> {
    for (const key of this.keys(this.hashKeys, providerSessions)) await this.store.removeMember(key, id)
  }

  /** The ids of the sessions with this `sid` or `sub` under any secret (read: the caller ends them, then {@link drop}s them). */
  async find (provider: string, claim: SessionClaim, value: string): Promise<string[]> {
    const ids = new Set<string>()
    for (const hashKey of this.hashKeys) {
      for (const id of await this.store.members(storeKey(hashKey, provider, claim, value))) ids.add(id)
    }
    return [...ids]
  }

  /**
   * A back-channel logout of this `sid` or `sub` is under way: marked, under every secret, before
   * the index is read. {@link addSignIn} reads the mark.
   */
  async markLoggedOut (provider: string, claim: SessionClaim, value: string): Promise<void> {
    for (const hashKey of this.hashKeys) await mark(this.store, markKey(storeKey(hashKey, provider, claim, value)))
  }

  /**
   * A sign-in that began at `began` (this instance's clock ms, before its tokens were fetched)
   * lists session `id` under each provider session of its record ({@link add}). Then the name of a
   * provider whose session in the record a back-channel logout ended meanwhile, if any: a logout of
   * its `sid` at any time (a provider session logged out never comes back), or of its `sub` since
   * `began`. The caller ends the session. That holds for the provider signed in at and for the ones
   * the record carries from the browser's earlier session (an attacker's finding: a `sid` logout of
   * a carried one, racing the rename, left it in the new session). Before this, such a sign-in lived
   * on after the logout: the logout had read the index before the entry was there. Asked once the
   * entry is there: the logout marks before it reads, so one of the two sees the other. The mark's
   * age is read on the store's clock (store/marks.ts), the time since `began` on this instance's.
   */
  async addSignIn (providerSessions: Record<string, ProviderSessionClaims> | undefined, id: string, began: number): Promise<string | undefined> {
    const sessions = Object.entries(providerSessions ?? {})
    for (const [provider, claims] of sessions) await this.add(provider, claims, id)
    const sinceMs = this.clock.now() - began
    // Under the current secret: the logout marks under every secret it holds. All at once: one round trip.
    const marked = async (provider: string, claim: SessionClaim, value: string | undefined, withinMs: number) =>
      value !== undefined && await markedWithin(this.store, markKey(storeKey(this.hashKeys[0]!, provider, claim, value)), withinMs)
    const ended = await Promise.all(sessions.map(async ([provider, claims]) => {
      const [bySid, bySub] = await Promise.all([marked(provider, 'sid', claims.sid, Infinity), marked(provider, 'sub', claims.sub, sinceMs)])
      return bySid || bySub ? provider : undefined
    }))
    return ended.find((provider) => provider !== undefined)
  }

  /** Takes ended sessions' ids out of this `sid` or `sub`'s entries, under every secret. */
  async drop (provider: string, claim: SessionClaim, value: string, ids: readonly string[]): Promise<void> {
    for (const hashKey of this.hashKeys) {
      const key = storeKey(hashKey, provider, claim, value)
      for (const id of ids) await this.store.removeMember(key, id)
    }
  }
}
