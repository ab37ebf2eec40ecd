// A grant to an agent is a session of the person: when they allow a client, the gateway starts a
// session of its own for that grant (the provider's tokens, refreshed as for browsers), and keeps
// which grant it belongs to. An access token names its grant (`gid`); the grant names its
// session's cookie, sealed to the grant id; a request with the token is then judged as a browser
// with that cookie would be. Ending either ends both: a grant revoked (a refresh token used twice,
// RFC 7009) ends its session, and a session ended (sign-out everywhere, back-channel logout, the
// sessions page, maxAge) leaves the grant nothing to refresh or to reach.
import { Lru } from '../ops/lru.js'
import type { Sealer } from '../session/seal.js'
import type { Sessions } from '../session/session.js'
import { firstHeld, type KeyValue } from '../store/store.js'

const PURPOSE = 'agents-grant-session'
const LABEL_PURPOSE = 'agents-grant-label'

/** What the sessions page says of a grant's session: which client, on which route. */
export interface GrantLabel {
  readonly client: string
  readonly route: string
}
/** Grants whose session cookie this instance remembers: a request with a token then costs no store read for it. */
const CACHED_GRANTS = 10_000

export class AgentGrants {
  private readonly cookies = new Lru<string, string>(CACHED_GRANTS)

  constructor (private readonly store: KeyValue, private readonly sealer: Sealer, private readonly sessions: Sessions) {}

  /** Where the grant's session is named: under every secret's id, the current one first (a grant made before a rotation). */
  private keys (grantId: string): string[] {
    return this.sealer.idsFor(PURPOSE, grantId).map((id) => `agents:grant-session:${id}`)
  }

  /** Records that `grantId`'s requests are judged by the session of `cookie`, for as long as that session may live. */
  async bind (grantId: string, cookie: string, ttlMs: number): Promise<void> {
    await this.store.set(this.keys(grantId)[0]!, this.sealer.seal(PURPOSE, grantId, cookie), ttlMs)
    this.cookies.set(grantId, cookie)
  }

  /**
   * Keeps what the person's sessions page shows of the grant's session (`sessionId`): the client's
   * name and the route, sealed to the session id, for as long as the session may live.
   */
  async label (sessionId: string, label: GrantLabel, ttlMs: number): Promise<void> {
    await this.store.set(this.labelKeys(sessionId)[0]!, this.sealer.seal(LABEL_PURPOSE, sessionId, JSON.stringify(label)), ttlMs)
  }

  /** The label of a grant's session, or undefined (not a grant's, or ended). */
  async labelOf (sessionId: string): Promise<GrantLabel | undefined> {
    const sealed = await firstHeld(this.store, this.labelKeys(sessionId))
    const plain = sealed === undefined ? null : this.sealer.open(LABEL_PURPOSE, sessionId, sealed.value)
    return plain === null ? undefined : JSON.parse(plain) as GrantLabel
  }

  private labelKeys (sessionId: string): string[] {
    return this.sealer.idsFor(LABEL_PURPOSE, sessionId).map((id) => `agents:grant-label:${id}`)
  }

  /** The Cookie header that names the grant's session, or undefined when the grant has none (ended, unknown). */
  async cookieHeader (grantId: string): Promise<string | undefined> {
    const known = this.knownCookieHeader(grantId)
    if (known !== undefined) return known
    const sealed = await firstHeld(this.store, this.keys(grantId))
    const cookie = sealed === undefined ? null : this.sealer.open(PURPOSE, grantId, sealed.value)
    if (cookie === null) return undefined
    this.cookies.set(grantId, cookie)
    return this.header(cookie)
  }

  /** The Cookie header of the grant's session when this instance has it at hand (no store read); else undefined. */
  knownCookieHeader (grantId: string): string | undefined {
    const cookie = this.cookies.get(grantId)
    return cookie === undefined ? undefined : this.header(cookie)
  }

  private header (cookie: string): string {
    return `${this.sessions.cookieName}=${cookie}`
  }

  /** Whether the grant's session is still there (a refresh of the grant's tokens asks). */
  async alive (grantId: string): Promise<boolean> {
    const header = await this.cookieHeader(grantId)
    return header !== undefined && await this.sessions.load(header) !== null
  }

  /**
   * Ends the grant's session (the grant itself was revoked), then forgets where it was: a revoke
   * tried again after a 503 (its ending not yet on a replica) finds the session's cookie again, and
   * is done once a replica has the ending (an attacker's finding: its pointer went first, and the
   * retry found nothing to wait for).
   */
  async end (grantId: string): Promise<void> {
    const header = await this.cookieHeader(grantId)
    if (header !== undefined) await this.sessions.end(await this.sessions.load(header), header)
    this.cookies.delete(grantId)
    for (const key of this.keys(grantId)) await this.store.delete(key)
  }
}
