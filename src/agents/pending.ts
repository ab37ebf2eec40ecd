// A sign-in made for an agent's authorization, kept until the person allows or denies the client
// (at most `state.ttl`), and only then made a session: a sign-in nobody allows leaves nothing
// lasting (no session, no entry in the person's list that could push older sessions out of it).
// The browser that signed in holds a random token sealed to the authorization's id; the store holds
// the sign-in sealed to that token, under a keyed hash of it. That key is listed for back-channel
// logout as a session id is (store.ts isPendingSignInKey): a logout of the provider session while the consent
// page is open deletes the kept sign-in, and the Allow that follows finds nothing to make a session of.
import type { Clock } from '../ops/clock.js'
import { randomToken, type Sealer } from '../session/seal.js'
import type { SignIn } from '../session/record.js'
import { ownClaim, storeKeys, type KeyValue, type Lock } from '../store/store.js'

const PURPOSE = 'agents-pending'

/**
 * A kept sign-in: at which provider, what it brought, for which authorization, and when it was made
 * (the grant's session counts `session.maxAge` from then, as a browser's does from its callback, not
 * from the Allow up to `state.ttl` later; absent in what a gateway before this kept).
 */
export interface PendingSignIn {
  readonly uid: string
  readonly provider: string
  readonly signIn: SignIn
  readonly at?: number
  /**
   * How long from `at` until the kept key expires, as the instance that kept it set it: the time
   * it took to keep it, on its clock, and its state.ttl (another instance's may differ while a
   * change of config rolls out).
   */
  readonly expiresAfterMs?: number
}

export class PendingSignIns {
  constructor (private readonly store: KeyValue & Lock, private readonly sealer: Sealer, private readonly ttlMs: number, private readonly clock: Clock) {}

  /** Where the sign-in is kept: under every secret's id, the current one first (one kept by an instance before a rotation). */
  private keys (token: string): string[] {
    return this.sealer.idsFor(PURPOSE, token).map((id) => storeKeys.pendingSignIn(id))
  }

  /** Keeps the sign-in for authorization `uid`, made at `at`: the value of the browser's cookie for it, and its store key. */
  async keep (uid: string, provider: string, signIn: SignIn, at: number): Promise<{ cookie: string, key: string }> {
    const token = randomToken()
    const pending: PendingSignIn = { uid, provider, signIn, at, expiresAfterMs: this.clock.now() - at + this.ttlMs }
    const key = this.keys(token)[0]!
    await this.store.set(key, this.sealer.seal(PURPOSE, token, JSON.stringify(pending)), this.ttlMs)
    return { cookie: this.sealer.seal(PURPOSE, uid, token), key }
  }

  /** The sign-in the browser's cookie names for authorization `uid`, or undefined (none, another one's, expired, used). */
  async open (uid: string, cookie: string | undefined): Promise<PendingSignIn | undefined> {
    return await this.read(uid, cookie, async (key) => await this.store.get(key))
  }

  /**
   * The sign-in, claimed for the person's answer (allowed or denied: once, even by two answers at
   * the same moment); undefined when it is gone or answered already. `given` when the answer is
   * written (the kept sign-in deleted, best effort: the claim already stops a second answer);
   * `giveBack` when writing it failed (a store reply that came too late: the person's retry of the
   * same answer goes on, where taking it first had lost the authorization, an outside tester's
   * finding). The claim holds a value of this answer's own: giving back never frees another's.
   * `began`: when its sign-in began (`at`), on this instance's clock. The time since then is read
   * on the store's (the kept sign-in's remaining time): another instance may have kept it, and the
   * two clocks may disagree (an attacker's finding: 5 s of skew let an Allow outlive a back-channel
   * logout that raced it, or refused one made after a logout).
   */
  async answer (uid: string, cookie: string | undefined): Promise<{ signIn: PendingSignIn, began: number, given: () => Promise<void>, giveBack: () => Promise<void> } | undefined> {
    let at: string | undefined
    const signIn = await this.read(uid, cookie, async (key) => { const sealed = await this.store.get(key); if (sealed !== null) at = key; return sealed })
    if (signIn === undefined || at === undefined) return undefined
    const kept = at
    const claim = ownClaim(this.store, `${kept}:answered`)
    if (!await claim.take(this.ttlMs)) return undefined
    const left = await this.store.remainingMs(kept) ?? 0
    // As the keeping instance set it (an attacker's finding: a state.ttl of 1 h there and 5 min here put `began` in the future).
    const began = signIn.at === undefined ? 0 : this.clock.now() - ((signIn.expiresAfterMs ?? this.ttlMs) - left)
    return { signIn, began, given: async () => { await this.store.delete(kept).catch(() => {}) }, giveBack: claim.giveBack }
  }

  /** The kept sign-in for `uid` that `fetch` reads from the store, opened. */
  private async read (uid: string, cookie: string | undefined, fetch: (key: string) => Promise<string | null>): Promise<PendingSignIn | undefined> {
    const token = this.token(uid, cookie)
    if (token === undefined) return undefined
    let sealed: string | null = null
    for (const key of this.keys(token)) if ((sealed = await fetch(key)) !== null) break
    const plain = sealed === null ? null : this.sealer.open(PURPOSE, token, sealed)
    const pending = plain === null ? undefined : JSON.parse(plain) as PendingSignIn
    return pending?.uid === uid ? pending : undefined
  }

  /** A string that names this browser's sign-in for `uid` (the CSRF token's binding), or undefined. */
  binding (uid: string, cookie: string | undefined): string | undefined {
    return this.token(uid, cookie)
  }

  private token (uid: string, cookie: string | undefined): string | undefined {
    return cookie === undefined ? undefined : this.sealer.open(PURPOSE, uid, cookie) ?? undefined
  }
}
