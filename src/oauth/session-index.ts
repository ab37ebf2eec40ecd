// Which gateway sessions belong to a provider's session: `logout:<provider>:sid:<h>` and
// `logout:<provider>:sub:<h>` are sets of the ids of the sessions signed in with that `sid` or
// `sub`, so a back-channel logout that names one can end them all, on every instance. `<h>` is a
// keyed hash of the value (a store dump shows no user id). Each set lives at least as long as the
// longest-lived session in it: a sign-in adds to it, and every renewal of a session's idle timeout
// (`touch`) extends it, so a session in use for days is still found. Adding is one atomic store
// operation (a Redis set), so concurrent sign-ins of one subject all stay listed.
// @see https://openid.net/specs/openid-connect-backchannel-1_0.html#BCActions
import { createHmac } from 'node:crypto'
import type { Sets } from '../store/store.js'

/** Which claim of the provider's session a key is for. */
export type SessionClaim = 'sid' | 'sub'

/** What a session keeps of one provider's session (the index's keys are derived from it). */
export interface ProviderSessionClaims { sid?: string, sub?: string }

export class SessionIndex {
  constructor (
    private readonly store: Sets,
    private readonly key: Uint8Array,
    /** How long an entry lives after the last sign-in or renewal of a session in it (the session's idle timeout). */
    private readonly ttlMs: number
  ) {}

  private storeKey (provider: string, claim: SessionClaim, value: string): string {
    const hash = createHmac('sha256', this.key).update(provider).update('\0').update(claim).update('\0').update(value).digest('base64url')
    return `logout:${provider}:${claim}:${hash}`
  }

  private keys (providerSessions: Record<string, ProviderSessionClaims> | undefined): string[] {
    const keys: string[] = []
    for (const [provider, claims] of Object.entries(providerSessions ?? {})) {
      if (claims.sid !== undefined) keys.push(this.storeKey(provider, 'sid', claims.sid))
      if (claims.sub !== undefined) keys.push(this.storeKey(provider, 'sub', claims.sub))
    }
    return keys
  }

  /** Records that session `id` signed in with this provider session's `sid` and `sub` (either may be absent). */
  async add (provider: string, claims: ProviderSessionClaims, id: string): Promise<void> {
    for (const key of this.keys({ [provider]: claims })) await this.store.addMember(key, id, this.ttlMs)
  }

  /** The session's idle timeout was renewed: its entries live at least as long again. */
  async touch (providerSessions: Record<string, ProviderSessionClaims> | undefined): Promise<void> {
    for (const key of this.keys(providerSessions)) await this.store.extend(key, this.ttlMs)
  }

  /** The ids of the sessions with this `sid` or `sub`, and the entry removed (they are about to end). */
  async take (provider: string, claim: SessionClaim, value: string): Promise<string[]> {
    return await this.store.takeMembers(this.storeKey(provider, claim, value))
  }
}
