// A session record as the store keeps it: the same values under one-letter keys. Field names were
// a large part of a one-provider session's stored bytes, and cutting them moved its Redis value
// into a smaller allocation (see docs/performance.md). Only the stored form changes: the
// rest of the gateway reads SessionRecord as before.
import { notOneAddress, unreadUserName, type Identity, type PersonField } from './record.js'
import type { ProviderSession, SessionRecord, TokenSet } from './record.js'

/** TokenSet: access_token, expires_at, refresh_token. */
interface WireTokens { a: string, e?: number, r?: string }
/**
 * Identity: sub, email (m), emailVerified (v, only ever false), name, groups (left out when none), kept claims (k),
 * subject (j) and iss (o) (absent in records 1.0.0 wrote, which are read without them), and the
 * fields the claims did not tell (x, left out when none), the words of groups sent as one string (w).
 */
interface WireIdentity { s: string, m?: string, v?: false, n?: string, g?: string[], k?: Record<string, readonly string[]>, j?: string, o?: string, x?: readonly PersonField[], w?: readonly string[] }
/** ProviderSession: idToken (d), sid, sub (u), authTime (t), acr (a). */
interface WireProviderSession { d?: string, s?: string, u?: string, t?: number, a?: string }
/** SessionRecord: createdAt, tokens, identities, providerSessions, flow (b). */
export interface WireRecord {
  c: number
  t: Record<string, WireTokens>
  i?: Record<string, WireIdentity>
  p?: Record<string, WireProviderSession>
  b?: string
}

/** `map` with each value converted; fromEntries keeps a key such as "__proto__" an own entry. */
function mapValues<A, B> (map: Readonly<Record<string, A>>, convert: (value: A) => B): Record<string, B> {
  return Object.fromEntries(Object.entries(map).map(([key, value]) => [key, convert(value)]))
}

/** Only the keys whose value is defined (JSON would drop the others anyway; this keeps them out of the object too). */
function defined<T extends object> (value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, item]) => item !== undefined)) as T
}

export function toWire (record: SessionRecord): WireRecord {
  // `satisfies Record<keyof Wire...>`: every wire key is written (fromWire checks the other way).
  return defined({
    c: record.createdAt,
    t: mapValues(record.tokens, (tokens) => defined({ a: tokens.access_token, e: tokens.expires_at, r: tokens.refresh_token } satisfies Record<keyof WireTokens, unknown>)),
    i: record.identities && mapValues(record.identities, (identity) => defined({
      s: identity.sub,
      m: identity.email,
      v: identity.emailVerified,
      n: identity.name,
      g: identity.groups.length > 0 ? [...identity.groups] : undefined,
      k: identity.claims,
      j: identity.subject,
      o: identity.iss,
      x: identity.unknown,
      w: identity.groupWords,
    } satisfies Record<keyof WireIdentity, unknown>)),
    p: record.providerSessions && mapValues(record.providerSessions, (session) => defined({ d: session.idToken, s: session.sid, u: session.sub, t: session.authTime, a: session.acr } satisfies Record<keyof WireProviderSession, unknown>)),
    b: record.flow,
  } satisfies Record<keyof WireRecord, unknown>)
}

/** The stored address, or none and `email` unknown when it is not one address. */
function unreadAddress (identity: WireIdentity): { email: string | undefined, unknown: readonly PersonField[] | undefined } {
  if (identity.m === undefined || !notOneAddress(identity.m)) return { email: identity.m, unknown: identity.x }
  return { email: undefined, unknown: [...new Set([...identity.x ?? [], 'email' as const])] }
}

/**
 * Whether a stored record names someone by a user name a sign-in no longer takes (unreadUserName):
 * a session made before that check, which is then no session (an outside reader's finding: it kept
 * sending the name upstream until it ended).
 */
export function holdsUnreadUserName (wire: WireRecord): boolean {
  return Object.values(wire.i ?? {}).some((identity) => typeof identity.s === 'string' && unreadUserName(identity.s))
}

export function fromWire (wire: WireRecord): SessionRecord {
  // `satisfies Record<keyof ...>`: a field added to a record type fails to compile here until it
  // has a wire key, and then in toWire until it is written there.
  return defined({
    createdAt: wire.c,
    tokens: mapValues(wire.t, (tokens): TokenSet => defined({ access_token: tokens.a, expires_at: tokens.e, refresh_token: tokens.r } satisfies Record<keyof TokenSet, unknown>)),
    identities: wire.i && mapValues(wire.i, (identity): Identity => defined({
      // An address that is not one (`a@x, b@y`, as 1.0.0 kept it) cannot be told, as at a sign-in now.
      ...unreadAddress(identity),
      sub: identity.s,
      emailVerified: identity.v,
      name: identity.n,
      groups: identity.g ?? [],
      claims: identity.k,
      subject: identity.j,
      iss: identity.o,
      groupWords: identity.w,
      // Given by a route (access/name-spaces.ts), never stored.
      aka: undefined,
      // A record 1.0.0 wrote (or rewrote at a refresh during a rolling upgrade) has no subject.
      untoldGroups: identity.j === undefined ? true as const : undefined,
    } satisfies Record<keyof Identity, unknown>)),
    providerSessions: wire.p && mapValues(wire.p, (session): ProviderSession => defined({ idToken: session.d, sid: session.s, sub: session.u, authTime: session.t, acr: session.a } satisfies Record<keyof ProviderSession, unknown>)),
    // Absent in records written before it was kept: only a sign-in begun with the session changes it.
    flow: typeof wire.b === 'string' ? wire.b : undefined,
  } satisfies Record<keyof SessionRecord, unknown>)
}
