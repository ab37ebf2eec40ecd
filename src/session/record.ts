// What a session holds, as plain immutable values: a token set per provider, who the user is
// there, and what sign-out needs of the provider's own session. A change is a new record (sign-in,
// refresh, a refused refresh); nothing edits one in place, so a record read by one request never
// changes under another.
/**
 * What no one address the gateway reads holds: white space, a list's or a display name's or a
 * comment's marks, an escape, a control or format character, an RFC 2047 encoded-word (`=?`).
 */
const ODD = /[\s,;<>()\\\p{Cc}\p{Cf}]|=\?/u

/**
 * Whether `text` is not one e-mail address the gateway reads (oauth/claims.ts), so that who it names
 * cannot be told: two, comma-separated; a display name; a comment; no `@` or more than one, or
 * nothing on a side of it (`"a@victim.example"@attacker.example`: rules read the domain after the
 * last `@`, an application splitting at the first would read `victim.example"`); a quote other than
 * one pair around the whole local part, or an escape (`"mal\\lory"@`). Nor is text that a reader
 * decoding it would read otherwise (an outside tester's findings, after PortSwigger's "Splitting the
 * email atom"): an encoded-word (`=?utf-8?q?a=40victim.example?=@attacker.example`, which the Ruby
 * `mail` gem decodes), or text that Unicode compatibility folding (NFKC) makes other than one
 * address (`a＠victim.example@attacker.example`: `＠` is `@`).
 */
export function notOneAddress (text: string): boolean {
  const at = text.indexOf('@')
  if (at <= 0 || at === text.length - 1 || text.indexOf('@', at + 1) >= 0 || ODD.test(text)) return true
  const quotes = text.split('"').length - 1
  if (quotes !== 0 && !(quotes === 2 && at > 2 && text.startsWith('"') && text[at - 1] === '"')) return true
  // Folded, it must be one address too (the rules fold as they compare: `ａlice@` is `alice@` to them).
  const folded = text.normalize('NFKC')
  return folded !== text && notOneAddress(folded)
}

/**
 * Whether a user name cannot be taken as it is: it holds an `@` (or one under NFKC, `＠`) and is not
 * one address, so that an application splitting X-Forwarded-User at its first `@` reads another
 * domain than one splitting at its last (`"a@corp.example"@attacker.example`), whatever claim named it.
 */
export function unreadUserName (name: string): boolean {
  return AT_SIGNS.test(name) && notOneAddress(name)
}

/** `@`, and what NFKC folds to it: U+FE6B (small) and U+FF20 (fullwidth). */
const AT_SIGNS = /[@\ufe6b\uff20]/

/**
 * The signed-in identity at one provider, as kept in the session and shown at /oauth/userinfo/ (read
 * from the provider's claims by oauth/claims.ts).
 */
export interface Identity {
  /** The user name the provider's `claims.user` maps (shown, logged, sent upstream); it may be reassignable. */
  readonly sub: string
  /**
   * The names an own provider's account had before a route qualified it (access/name-spaces.ts:
   * `partner:alice` named `corp:partner:alice`): a `deny` on `users` holds on them too. Never stored.
   */
  readonly aka?: readonly string[]
  /**
   * Read from a record in 1.0's form (no subject: signed in under 1.0, or refreshed by a 1.0.0
   * instance during a rolling upgrade): 1.0 dropped the groups it could not read without a mark, so
   * which groups the person holds cannot be told, and a `deny` on groups holds. Never stored.
   */
  readonly untoldGroups?: true
  /**
   * Who the provider says this is for good: the `sub` of its ID token, userinfo or access token
   * (GitHub: the numeric `id`; a provider without any: the mapped user name). People are keyed on
   * `iss` + `subject`, never on `sub`. Absent in records written before it was kept.
   */
  readonly subject?: string
  /** The issuer that vouches for `subject` (the ID token's `iss`; GitHub: its API's origin). */
  readonly iss?: string
  readonly email?: string
  /** Present, and false, only when the provider said the e-mail address is not verified. */
  readonly emailVerified?: false
  readonly name?: string
  readonly groups: readonly string[]
  /**
   * The words of groups a provider sent as one string with white space or `;` in it (`staff
   * contractors`): whether it named one group or several cannot be told, so `groups` holds it whole
   * (what an `allow` matches) and a `deny` holds on each word as well.
   */
  readonly groupWords?: readonly string[]
  /**
   * The claims some rule or claim header names (the provider's `keptClaims`), by path, each as a
   * list of values in text form; absent when none is named.
   */
  readonly claims?: Readonly<Record<string, readonly string[]>>
  /**
   * The person fields the claims did not tell: on a machine client's identity (never stored), those
   * its token (with the route's `claimsFrom` answer) did not carry; on a session's, groups the
   * provider gave in a shape the gateway does not read. A rule cannot tell them (access/rules.ts); a
   * claim path not carried or not read is left out of `claims`, which rules read the same way.
   */
  readonly unknown?: readonly PersonField[]
}

/**
 * A person field a token may not carry (Identity.unknown); `user`: the provider's mapped user name
 * (`claims.user`), which the token lacks or gives only as an unverified e-mail address.
 */
export type PersonField = 'user' | 'email' | 'groups'

/** What is kept of a token endpoint response for one provider (RFC 6749 §5.1). */
export interface TokenSet {
  readonly access_token: string
  /** Seconds since the epoch, from `expires_in`. */
  readonly expires_at?: number
  readonly refresh_token?: string
}

/**
 * What sign-out needs of a provider's own session, kept apart from the token set (a refresh
 * replaces that): the ID token for `id_token_hint` (only when the provider has an end-session
 * endpoint), and the ID token's `sid` and `sub`, which a back-channel logout names.
 * @see https://openid.net/specs/openid-connect-rpinitiated-1_0.html#RPLogout
 * @see https://openid.net/specs/openid-connect-backchannel-1_0.html#LogoutToken
 */
export interface ProviderSession {
  readonly idToken?: string
  readonly sid?: string
  readonly sub?: string
  /** The ID token's `auth_time` (seconds since the epoch): when the person last signed in at the provider (step-up). */
  readonly authTime?: number
  /** The ID token's `acr`: how they signed in (step-up). */
  readonly acr?: string
}

/** What one session holds: a token set per provider, and who the user is there. */
export interface SessionRecord {
  /** Milliseconds since the epoch. */
  readonly createdAt: number
  readonly tokens: Readonly<Record<string, TokenSet>>
  readonly identities?: Readonly<Record<string, Identity>>
  readonly providerSessions?: Readonly<Record<string, ProviderSession>>
  /**
   * A hash of the flow cookie's binding in the browser whose sign-in made this record, when that
   * sign-in began without a session: another tab's sign-in begun so too may build on it for a
   * state's lifetime (src/routes/sign-in-endpoints.ts ownSignIn).
   */
  readonly flow?: string
}

/** A loaded session: `id` (a keyed hash of the cookie) names it in the store and in logs; `cookie` opens it. */
export interface Session {
  readonly id: string
  readonly cookie: string
  readonly record: SessionRecord
}

/** What one sign-in at `provider` brings: its tokens, and (when known) the identity and the provider's session. */
export interface SignIn {
  readonly tokens: TokenSet
  readonly identity?: Identity
  readonly providerSession?: ProviderSession
}

/** A record with nothing in it yet. */
export function emptyRecord (createdAt: number): SessionRecord {
  return { createdAt, tokens: {} }
}

/**
 * `record` after a sign-in at `provider`: that provider's tokens, identity and provider session
 * replace what it had (an identity or provider session not given is removed); other providers keep theirs.
 */
export function withSignIn (record: SessionRecord, provider: string, signIn: SignIn): SessionRecord {
  return {
    ...record,
    tokens: put(record.tokens, provider, signIn.tokens),
    identities: put(record.identities, provider, signIn.identity),
    providerSessions: put(record.providerSessions, provider, signIn.providerSession),
  }
}

/** `record` with `provider`'s token set replaced (a refresh), or removed when `tokens` is undefined (a refused refresh). */
export function withTokens (record: SessionRecord, provider: string, tokens: TokenSet | undefined): SessionRecord {
  return { ...record, tokens: put(record.tokens, provider, tokens) }
}

/** A copy of `map` with `key` set to `value`, or without `key` when `value` is undefined. */
function put<T> (map: Readonly<Record<string, T>> | undefined, key: string, value: T | undefined): Readonly<Record<string, T>> {
  const entries = Object.entries(map ?? {}).filter(([name]) => name !== key)
  if (value !== undefined) entries.push([key, value])
  // fromEntries defines own properties: a key such as "__proto__" stays an entry, never a prototype.
  return Object.fromEntries(entries)
}
