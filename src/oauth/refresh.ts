// Keeps access tokens usable: an expired one (30 s early) is refreshed with its refresh token
// before the request is proxied. One refresh per session and provider at a time: in-process
// callers share one promise; across instances a store lock (owner token, released only by its owner)
// lets one refresh while the others wait for its result in the session record, and share its failure
// too (no second attempt). Its result is written only over the record it read: a session ended
// while the provider answered (sign-out, back-channel logout) stays ended. A store that refuses
// the writes (OOM under noeviction, READONLY) does not stop a session whose access token is still
// valid: the request goes on with that token, and a later one refreshes once the store writes again.
// A refresh the provider answered but whose result the store refused is kept in this process (see
// `unwritten`): the next request of that session uses it and writes it, and never sends the refresh
// token the provider has redeemed (a provider that rotates refresh tokens refuses a reused one and
// may end the grant: an outside tester's finding, a sign-out caused by one refused write).
// @see https://www.rfc-editor.org/rfc/rfc6749#section-6
import type { Logger } from '../ops/logger.js'
import { describeCause, GatewayError, waitedOn } from '../errors.js'
import type { Metrics } from '../ops/metrics.js'
import { withTokens, type Session, type TokenSet } from '../session/record.js'
import type { Sessions, StoredRecord } from '../session/session.js'
import { systemClock, type Clock } from '../ops/clock.js'
import { Lru } from '../ops/lru.js'
import { refusedByStore, storeKeys, type KeyValue, type Lock, type LockHandle } from '../store/store.js'
import { refreshTokens } from './client.js'
import { expiredRefreshFailed, FailedJustNow, failureKey, Paused, pausedFor, PROVIDER_FAILURES } from './refresh-failures.js'
import type { Providers, ResolvedProvider } from './providers.js'

/** A token counts as expired this many seconds before its expiry, so it does not expire on the way. */
const EXPIRY_SKEW_S = 30
const POLL_MS = 50
/**
 * How many times a refresh's result is written over a record that changed under it (not ended):
 * each change is another provider's refresh in the same session, finished meanwhile.
 */
const WRITE_ATTEMPTS = 3

function isFresh (token: TokenSet, nowMs: number): boolean {
  return token.expires_at === undefined || token.expires_at - EXPIRY_SKEW_S > nowMs / 1000
}

/**
 * A token due for a refresh goes on while its refresh cannot be had only with this long left: one
 * about to expire would expire on its way (the reason for the refresh's skew).
 */
export const STILL_VALID_FLOOR_S = 5

/** Not expired yet (STILL_VALID_FLOOR_S left at least), though due for a refresh (within EXPIRY_SKEW_S of its expiry). */
function isStillValid (token: TokenSet, nowMs: number): boolean {
  return token.expires_at === undefined || token.expires_at - STILL_VALID_FLOOR_S > nowMs / 1000
}

/** How many refreshes whose result the store refused are kept in a process (oldest forgotten first). */
const UNWRITTEN_MAX = 10_000

/** A refresh's result the store refused: `tokens`, in place of the stored token whose access token is `replaces`. */
interface Unwritten { readonly replaces: string, readonly tokens: TokenSet }

/** A provider's token as the store holds it now, with the record it is in. */
type Current = { token: undefined } | { token: TokenSet, read: StoredRecord }

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

export class TokenRefresher {
  private readonly inFlight = new Map<string, Promise<TokenSet | undefined>>()
  /**
   * By session id and provider: a refresh whose result the store refused. Used, and written, in
   * place of the stored token while the store still holds the one it replaced; forgotten once the
   * store has it, or holds another (a sign-in, another instance's refresh). Per process: another
   * instance still reads the stored token.
   */
  private readonly unwritten = new Lru<string, Unwritten>(UNWRITTEN_MAX)
  /** Per provider: until when its last 429 asked this instance to send no refresh (ms, the clock's). */
  private readonly pausedUntil = new Map<string, number>()
  /**
   * By session id and provider: until when a refresh that failed here is not asked again (ms), as
   * the store's failureKey says for every instance; kept here too, for a store that refuses the mark.
   */
  private readonly failedUntil = new Lru<string, number>(UNWRITTEN_MAX)
  /**
   * By session id and provider: the access token of a grant the provider refused, whose drop the
   * store refused to write. It goes nowhere (401) though the store still holds it.
   */
  private readonly refusedGrants = new Lru<string, string>(UNWRITTEN_MAX)

  constructor (
    private readonly store: Lock & Pick<KeyValue, 'get' | 'set' | 'delete'>,
    private readonly sessions: Sessions,
    private readonly providers: Providers,
    private readonly metrics: Metrics,
    private readonly log: Logger,
    /** What "now" is when deciding whether a token has expired; tests move it. */
    private readonly clock: Clock = systemClock
  ) {}

  /**
   * Runs `fn` holding the refresh locks of `session`'s providers that have a refresh token (but
   * `except`): a refresh in flight on any instance ends first, its result in the record `fn` reads
   * again, and none begins until `fn` is done. A sign-in that renames the session (a new id, the
   * old one ended) would otherwise build on the record read before such a refresh landed, and the
   * session would send the refresh token the provider had already redeemed (found by an outside
   * tester). The locks are taken all at once or none (acquireAll), so none runs out while another
   * is waited for. A provider's timeout is read from the config, not discovery: a provider whose
   * discovery fails must not stop a sign-in at another; one no longer configured is refreshed nowhere.
   */
  async holdingRefreshes<T> (session: Session, except: string, fn: () => Promise<T>): Promise<T> {
    const wanted = Object.entries(session.record.tokens).flatMap(([name, token]) => {
      const timeoutMs = this.providers.timeoutOf(name)
      return name !== except && token?.refresh_token !== undefined && timeoutMs !== undefined ? [{ key: storeKeys.refreshLock(session.id, name), failed: failureKey(session.id, name), local: `${session.id}:${name}`, holdMs: timeoutMs + 5000 }] : []
    })
    const held = await this.acquireAll(wanted)
    try {
      // A failure before this hold is history: a request that waits on it refreshes itself.
      for (const { local } of wanted) this.failedUntil.delete(local)
      await Promise.all(wanted.map(async ({ failed }) => { await this.store.delete(failed).catch(() => {}) }))
      return await fn()
    } finally {
      await this.releaseAll(held)
    }
  }

  /**
   * Every lock of `wanted`, or, while one is another's (a refresh under way), none: those taken are
   * let go and all are tried again, at most as long as the longest may be held.
   */
  private async acquireAll (wanted: ReadonlyArray<{ key: string, failed: string, holdMs: number }>): Promise<LockHandle[]> {
    if (wanted.length === 0) return []
    const deadline = this.clock.now() + Math.max(...wanted.map(({ holdMs }) => holdMs))
    for (;;) {
      const held: LockHandle[] = []
      try {
        for (const { key, holdMs } of wanted) {
          const lock = await this.store.acquire(key, holdMs)
          if (lock === null) break
          held.push(lock)
        }
      } catch (error) {
        // The store failed half-way: those taken are let go (found by an outside tester).
        await this.releaseAll(held)
        throw error
      }
      if (held.length === wanted.length) return held
      await this.releaseAll(held)
      if (this.clock.now() > deadline) throw new GatewayError('token_exchange_failed', 'A token refresh of this session did not finish in time.')
      await sleep(POLL_MS)
    }
  }

  private async releaseAll (held: readonly LockHandle[]): Promise<void> {
    await Promise.all(held.map(async (lock) => await this.store.release(lock).catch(() => false)))
  }

  /** The token of `provider` in `session` if it is usable as it is (no refresh needed). */
  freshToken (session: Session, provider: string): TokenSet | undefined {
    const token = session.record.tokens[provider]
    return token && isFresh(token, this.clock.now()) ? token : undefined
  }

  /** A usable token of `provider` in `session`, refreshed if needed; undefined: sign in again. */
  async usableToken (session: Session, provider: string): Promise<TokenSet | undefined> {
    const token = session.record.tokens[provider]
    if (!token) return undefined
    if (isFresh(token, this.clock.now())) return token
    const key = `${session.id}:${provider}`
    if (this.refusedGrants.peek(key) === token.access_token) return undefined
    const kept = this.unwritten.peek(key)
    if (kept !== undefined && kept.replaces !== token.access_token) this.unwritten.delete(key)
    if (kept === undefined && !token.refresh_token) return undefined
    const joined = this.inFlight.get(key)
    if (joined !== undefined) return await joined.catch((error: unknown) => { throw waitedOn(error) })
    const pending = (kept?.replaces === token.access_token ? this.useUnwritten(session, provider, kept) : this.refreshOrKeep(session, provider, token))
      .finally(() => this.inFlight.delete(key))
    this.inFlight.set(key, pending)
    return await pending
  }

  /**
   * A refresh's result the store refused, in place of the stored token: written now if the store
   * takes it (then forgotten); refreshed from, when it is due itself. Its request goes on with it
   * whether or not the store takes it yet.
   */
  private async useUnwritten (session: Session, name: string, kept: Unwritten): Promise<TokenSet | undefined> {
    if (!isFresh(kept.tokens, this.clock.now())) return await this.refreshOrKeep(session, name, kept.tokens, kept.replaces)
    const current = await this.current(session, name, kept.tokens, kept.replaces)
    if (current.token !== kept.tokens) {
      this.unwritten.delete(`${session.id}:${name}`)
      return current.token && isFresh(current.token, this.clock.now()) ? current.token : undefined
    }
    const written = await this.write(session, name, current.read, kept.tokens).catch((error: unknown) => {
      if (!refusedByStore(error)) throw error
      return 'refused' as const
    })
    if (written !== 'refused') this.unwritten.delete(`${session.id}:${name}`)
    return written === false ? undefined : kept.tokens
  }

  /**
   * {@link refreshOnce}, but while the token it has is still valid (a refresh is due 30 s before
   * expiry) a refresh that fails does not fail the request: the token goes on, if the session still
   * holds it. So when the provider fails (an error answer that is no verdict on the grant, a
   * timeout, an answer that cannot be read, its configuration or keys that cannot be read), asks
   * for a pause (429), or the store refuses the writes (the lock, or the record before the provider
   * was asked): a provider down for a minute or a store at `maxmemory` should not turn those 30 s
   * into 502s and 503s (oauth2-proxy, too, goes on with a session whose refresh failed).
   */
  private async refreshOrKeep (session: Session, name: string, stale: TokenSet, replaces?: string): Promise<TokenSet | undefined> {
    // How long the token had when the request came (the log line says it).
    const expiresInS = stale.expires_at === undefined ? undefined : Math.round(stale.expires_at - this.clock.now() / 1000)
    try {
      this.checkPause(name)
      return await this.refreshOnce(session, name, stale, replaces)
    } catch (error) {
      if (!(error instanceof GatewayError)) throw error
      const fields = { provider: name, session: session.id.slice(0, 8) }
      if (!isStillValid(stale, this.clock.now())) throw expiredRefreshFailed(error, fields)
      if (refusedByStore(error)) {
        this.log.debug({ ...fields, refusal: error.cause.reason }, 'token refresh not written (the store refused); the current token is still valid and goes on')
      } else if (error instanceof Paused || error instanceof FailedJustNow) {
        this.log.debug({ ...fields, reason: error.message }, 'token refresh not asked (a pause, or a failure just now); the current token is still valid and goes on')
      } else if (PROVIDER_FAILURES.has(error.code)) {
        this.log.warn({ ...fields, reason: error.message, cause: describeCause(error.cause), retryAfterS: pausedFor(error), expiresInS }, 'token refresh failed; the current token is still valid and goes on (the refresh is asked again by the next request once the provider\'s timeout plus 5 s have passed, or its Retry-After)')
      } else {
        throw error
      }
      return await this.stillHeld(session, name, stale, replaces, error)
    }
  }

  /**
   * `stale`, if the session still holds it: one signed out (or whose token another instance
   * replaced) while the refresh was under way sends it nowhere (an attacker's finding: it went
   * upstream after the sign-out had been answered). `failure` is thrown when the store cannot say.
   */
  private async stillHeld (session: Session, name: string, stale: TokenSet, replaces: string | undefined, failure: Error): Promise<TokenSet | undefined> {
    const current = await this.current(session, name, stale, replaces).catch(() => { throw failure })
    if (current.token === stale) return stale
    return current.token && isFresh(current.token, this.clock.now()) ? current.token : undefined
  }

  /**
   * Refused at once, without asking, while the provider's last 429 asks for a pause (an attacker's
   * finding: every request of every session asked again, adding to what the provider refused).
   */
  private checkPause (name: string): void {
    const until = this.pausedUntil.get(name)
    if (until === undefined) return
    const seconds = Math.ceil((until - this.clock.now()) / 1000)
    if (seconds <= 0) {
      this.pausedUntil.delete(name)
      return
    }
    throw new Paused(seconds)
  }

  /** `replaces`: `stale` is a refresh's unwritten result, and the store still holds the token whose access token this is. */
  private async refreshOnce (session: Session, name: string, stale: TokenSet, replaces: string | undefined): Promise<TokenSet | undefined> {
    const key = `${session.id}:${name}`
    // A failure marked here stands for a token still valid: not asked again, not the provider's
    // configuration either (an attacker's finding: a discovery that failed wrote a line per request).
    if (isStillValid(stale, this.clock.now()) && (this.failedUntil.peek(key) ?? 0) > this.clock.now()) throw new FailedJustNow()
    const provider = await this.providers.get(name).catch((error: unknown) => {
      this.markFailed(key, this.providers.timeoutOf(name) ?? 0)
      throw error
    })
    const lock = storeKeys.refreshLock(session.id, name)
    const holdMs = provider.timeoutMs + 5000
    const deadline = this.clock.now() + holdMs
    let waited = false
    for (;;) {
      const held = await this.store.acquire(lock, holdMs)
      if (held) {
        try {
          if (!waited) await this.judgeEarlierFailure(session.id, name, stale)
          return await this.refreshHoldingLock(session, provider, stale, waited, replaces)
        } finally {
          // Released only if still ours: had the refresh outlasted holdMs, the lock may be another's by now.
          await this.store.release(held).catch(() => {})
        }
      }
      // Another instance is refreshing: its result lands in the session record.
      waited = true
      await sleep(POLL_MS)
      const { token: current } = await this.current(session, name, stale, replaces)
      if (current !== stale) return current && isFresh(current, this.clock.now()) ? current : undefined
      if (this.clock.now() > deadline) throw new GatewayError('token_exchange_failed', 'The token refresh did not finish in time.')
    }
  }

  /** A refresh failed here: not asked again for the provider's timeout plus 5 s (as the store's failureKey says). */
  private markFailed (key: string, timeoutMs: number): void {
    this.failedUntil.set(key, this.clock.now() + timeoutMs + 5000)
  }

  /**
   * Taken without waiting: an earlier failure (failureKey) is history for an expired token, whose
   * request asks again. A token still valid does not ask again while it stands (the provider's
   * timeout plus 5 s): every request of a session whose refresh failed would otherwise wait for a
   * provider that is failing, and add to its load. (This instance's own mark was judged before the
   * lock: refreshOnce.)
   */
  private async judgeEarlierFailure (sessionId: string, name: string, stale: TokenSet): Promise<void> {
    const failed = failureKey(sessionId, name)
    const key = `${sessionId}:${name}`
    if (!isStillValid(stale, this.clock.now())) {
      this.failedUntil.delete(key)
      await this.store.delete(failed).catch(() => {})
    } else if (await this.store.get(failed).catch(() => null) !== null) {
      throw new FailedJustNow()
    }
  }

  /**
   * The provider's token as stored now (`stale` itself when unchanged, undefined when gone), and
   * the record it is in: a refresh writes its result into that record, not into the one first read.
   */
  private async current (session: Session, provider: string, stale: TokenSet, replaces?: string): Promise<Current> {
    const read = await this.sessions.reload(session)
    const token = read?.record.tokens[provider]
    if (!read || !token) return { token: undefined }
    return { read, token: token.access_token === stale.access_token || token.access_token === replaces ? stale : token }
  }

  /** `waited`: another instance held the lock first; it released it, so its refresh has ended. */
  private async refreshHoldingLock (session: Session, provider: ResolvedProvider, stale: TokenSet, waited: boolean, replaces: string | undefined): Promise<TokenSet | undefined> {
    // The session may have changed between our read and the lock: signed out, or refreshed already.
    const current = await this.current(session, provider.name, stale, replaces)
    if (current.token !== stale) return current.token && isFresh(current.token, this.clock.now()) ? current.token : undefined
    // ...and if it has not, the other instance's refresh failed just now (it says so: the holder
    // may also have been a sign-in, holdingRefreshes, that ended without renaming the session).
    // Asking again would make these requests wait a second timeout and double the load on a
    // provider that is struggling.
    const failed = failureKey(session.id, provider.name)
    if (waited && await this.store.get(failed) !== null) throw new FailedJustNow()
    const key = `${session.id}:${provider.name}`
    const result = await refreshTokens(provider, stale.refresh_token!, this.clock).catch(async (error: unknown) => {
      this.metrics.refreshes.inc({ provider: provider.name, result: 'failed' })
      this.markFailed(key, provider.timeoutMs)
      await this.store.set(failed, '1', provider.timeoutMs + 5000).catch(() => {})
      const pause = pausedFor(error)
      if (pause !== undefined) this.pausedUntil.set(provider.name, this.clock.now() + pause * 1000)
      throw error
    })
    if (result === 'refused') {
      this.unwritten.delete(key)
      await this.write(session, provider.name, current.read, undefined).catch((error: unknown) => {
        if (!refusedByStore(error)) throw error
        // Refused by the provider all the same: its token goes nowhere, though the store keeps it
        // until it takes writes again (an attacker's finding: it went upstream, and every request
        // sent the refused refresh token again).
        this.refusedGrants.set(key, stale.access_token)
      })
      this.metrics.refreshes.inc({ provider: provider.name, result: 'refused' })
      this.log.info({ provider: provider.name, session: session.id.slice(0, 8) }, 'token refresh refused; sign-in needed')
      return undefined
    }
    const tokens: TokenSet = { ...result, refresh_token: result.refresh_token ?? stale.refresh_token }
    this.metrics.refreshes.inc({ provider: provider.name, result: 'refreshed' })
    const written = await this.write(session, provider.name, current.read, tokens).catch((error: unknown) => {
      if (!refusedByStore(error)) throw error
      // The provider has answered: its new tokens serve this request, and are kept here for the
      // session's next ones, which write them once the store takes writes again.
      this.log.info({ provider: provider.name, session: session.id.slice(0, 8), refusal: error.cause.reason }, 'token refreshed but not stored (the store refused the write); this request goes on with the new token, and this instance keeps it until the store takes it')
      return 'refused' as const
    })
    if (written === 'refused') {
      this.unwritten.set(key, { replaces: current.read.record.tokens[provider.name]!.access_token, tokens })
      return tokens
    }
    this.unwritten.delete(key)
    if (written) return tokens
    this.log.info({ provider: provider.name, session: session.id.slice(0, 8) }, 'session ended during its token refresh; the new tokens were not kept')
    return undefined
  }

  /**
   * Writes `tokens` (undefined: none, a refused refresh) as `provider`'s in the session's record,
   * only over the record as it was read. False when the session is gone (ended meanwhile: it stays
   * so). A record changed but still there (another provider's refresh) is read again and the
   * tokens written into that one, so neither refresh loses the other's.
   */
  private async write (session: Session, provider: string, read: StoredRecord, tokens: TokenSet | undefined): Promise<boolean> {
    for (let attempt = 1; ; attempt++) {
      if (await this.sessions.update(session, read, withTokens(read.record, provider, tokens))) return true
      const again = await this.sessions.reload(session)
      if (!again) return false
      if (attempt === WRITE_ATTEMPTS) throw new GatewayError('token_exchange_failed', 'The session kept changing during the token refresh. Please try again.')
      read = again
    }
  }
}
