// The `state` parameter (a JWS, RFC 7515) and the browser's flow cookie. A sign-in in flight costs
// the store nothing: the PKCE verifier (RFC 7636) and the OIDC nonce are HMACs over the browser's
// flow binding and the state's id, so neither is in the URL or the JWS, and nothing is written at
// login. The callback claims `used-state:<id>` (set if absent, for the state's remaining lifetime):
// a state is usable once, only in the browser that started it, for one provider, before it expires.
// The state's header names the key id of the secret it was signed with; the binding tag, verifier
// and nonce are made with that same secret's flow key, so a sign-in begun before a secret rotation
// (session.previousSecrets) completes after it. The provider sees the state (in its logs, its
// analytics, the browser's history of its pages) and may decode a JWS: where the sign-in goes back
// to (`next`, whose query may hold an application's own code or a reset token), the kept form's
// binding and the agent interaction are sealed in it (`x`, AES-256-GCM with that secret's keys).
// @see https://www.rfc-editor.org/rfc/rfc6749#section-10.12
import { createHash, createHmac, randomBytes, type KeyObject } from 'node:crypto'
import { GatewayError, MESSAGES } from '../errors.js'
import { systemClock, type Clock } from '../ops/clock.js'
import { randomToken, type Sealer, type SealingKey } from '../session/seal.js'
import { ownClaim, storeKeys, type KeyValue, type Lock } from '../store/store.js'
import { openState, signState, stateKey, stateKeyring, type StateKey, type StateKeyring } from './signed-state.js'

/** Sign-ins a browser may have in flight; a callback for an older one is `invalid_state`. */
export const MAX_FLOWS_IN_FLIGHT = 8

/** What the callback needs of a sign-in, rebuilt from the state and the flow cookie. */
export interface FlowRecord {
  provider: string
  next: string
  /** PKCE code_verifier (RFC 7636 §4.1); absent when the provider has pkce: false. */
  verifier?: string
  /** OIDC nonce sent in the authorize request, expected in the ID token. */
  nonce?: string
  /** The binding of the form kept before this sign-in, when the sign-in was started for one (routes/form-replay.ts). */
  form?: string
  /** The agent authorization (its interaction id) this sign-in was started for (src/agents/): its session is the grant's, not the browser's. */
  agent?: string
  /** The store id of the session the browser had when the sign-in began (none: it had none). */
  session?: string
  /** A hash of the browser's flow binding: the same for every sign-in of that browser, whichever secret signed its state. */
  binding: string
}

/**
 * The flow cookie: a random binding shared by the browser's sign-ins, and the sequence number of
 * the newest one it started (which bounds the sign-ins in flight without listing them).
 */
export interface FlowCookie {
  binding: string
  sequence: number
}

/** What a state carries that the provider must not read, sealed in it (`x`). */
interface Hidden {
  next: string
  /** the binding of the kept form this sign-in was started for, if any */
  f?: string
  /** the agent authorization this sign-in was started for, if any */
  a?: string
  /** the store id of the browser's session when the sign-in began, if it had one */
  i?: string
}

/** The signed state's claims besides iat and exp. */
export interface StatePayload {
  /** provider (<remote_app_name>) */
  p: string
  /** {@link Hidden}, sealed to the state's id with the signing secret's keys (base64url) */
  x: string
  /** the state's random id: the used-state key, and an input of the verifier and nonce */
  n: string
  /** a keyed hash of the browser's flow binding: the state only completes in that browser */
  b: string
  /** the sign-in's sequence number in that browser */
  s: number
}

/** A state as the callback reads it: its claims with what was sealed in them, and the key id that signed it. */
export type OpenedSignIn = Omit<StatePayload, 'x'> & Hidden & { exp: number, kid: string }

/** The sealing purpose of {@link Hidden}. */
const HIDDEN = 'state-hidden'

const FLOW_COOKIE = /^([A-Za-z0-9_-]{43})(?:\.(\d{1,15}))?$/
/** The largest sequence number a flow cookie holds (15 digits, as FLOW_COOKIE reads them). */
const MAX_SEQUENCE = 999_999_999_999_999

/** The flow cookie's value, or undefined when it is absent or malformed. */
export function parseFlowCookie (value: string | undefined): FlowCookie | undefined {
  const match = value === undefined ? null : FLOW_COOKIE.exec(value)
  return match ? { binding: match[1]!, sequence: Number(match[2] ?? 0) } : undefined
}

export function formatFlowCookie (cookie: FlowCookie): string {
  return `${cookie.binding}.${cookie.sequence}`
}

/**
 * The PKCE S256 code_challenge: base64url(SHA-256(verifier)) (RFC 7636 §4.2), with node:crypto
 * (WebCrypto's digest, behind oauth4webapi's helper, costs several times the CPU: see docs/performance.md).
 */
export function pkceChallenge (verifier: string): string {
  return createHash('sha256').update(verifier, 'ascii').digest('base64url')
}

/** HMAC-SHA256 of `label` and `parts` (NUL-separated) under a flow key, base64url. */
function flowMac (flowKey: KeyObject, label: string, ...parts: string[]): string {
  const hmac = createHmac('sha256', flowKey).update(label)
  for (const part of parts) hmac.update('\0').update(part)
  return hmac.digest().toString('base64url')
}

function bindingTag (flowKey: KeyObject, binding: string): string {
  // 128 bits are plenty to tell browsers apart; the state stays short.
  return flowMac(flowKey, 'binding', binding).slice(0, 22)
}

export class Flows {
  // Keys made KeyObjects once: createHmac with raw key bytes costs more per call (see docs/performance.md).
  /** The current secret's state key (signs every new state). */
  private readonly stateKey: StateKey
  /** Every secret's state key, by the header that names it. */
  private readonly stateKeys: StateKeyring
  /** Every secret's flow key, by key id. */
  private readonly flowKeys: ReadonlyMap<string, KeyObject>

  constructor (
    private readonly store: KeyValue & Pick<Lock, 'release'>,
    /** session.secret and previousSecrets: new states are signed and sealed with the current one. */
    private readonly sealer: Sealer,
    readonly ttlMs: number,
    private readonly clock: Clock = systemClock
  ) {
    const keys = sealer.keys.map((key) => stateKey(key.kid, key.derive('state')))
    this.stateKey = keys[0]!
    this.stateKeys = stateKeyring(keys)
    this.flowKeys = new Map(sealer.keys.map((key) => [key.kid, key.derive('flow')]))
  }

  /**
   * Starts a sign-in: the signed `state`, the flow cookie to set, and the PKCE challenge and OIDC
   * nonce for the authorize request. Writes nothing to the store.
   */
  async begin (cookie: FlowCookie | undefined, flow: { provider: string, next: string, pkce: boolean, openid: boolean, form?: string | undefined, agent?: string | undefined, session?: string | undefined }): Promise<{
    state: string
    cookie: FlowCookie
    codeChallenge?: string
    nonce?: string
  }> {
    // A cookie at the largest sequence (one a sibling host planted: a browser never gets there)
    // starts a binding of its own; its next number could not be read back (an outside tester's point).
    const next = cookie === undefined || cookie.sequence >= MAX_SEQUENCE ? { binding: randomToken(), sequence: 1 } : { binding: cookie.binding, sequence: cookie.sequence + 1 }
    const id = randomBytes(16).toString('base64url')
    const flowKey = this.flowKeys.get(this.stateKey.kid)!
    const claims = { p: flow.provider, next: flow.next, n: id, b: bindingTag(flowKey, next.binding), s: next.sequence, ...(flow.form === undefined ? {} : { f: flow.form }), ...(flow.agent === undefined ? {} : { a: flow.agent }), ...(flow.session === undefined ? {} : { i: flow.session }) }
    const state = issueState(this.stateKey, this.sealer.key(this.stateKey.kid)!, claims, this.ttlMs, this.clock.now())
    const verifier = flow.pkce ? flowMac(flowKey, 'pkce', next.binding, id) : undefined
    return {
      state,
      cookie: next,
      codeChallenge: verifier ? pkceChallenge(verifier) : undefined,
      nonce: flow.openid ? flowMac(flowKey, 'nonce', next.binding, id) : undefined,
    }
  }

  /**
   * Verifies `state` for `provider` against the browser's flow cookie and marks it used. Throws
   * `invalid_state` when the state is missing, tampered with, expired, for another provider, from
   * another browser, older than the browser's newest {@link MAX_FLOWS_IN_FLIGHT} sign-ins, or used.
   * Only a signed, unexpired state of this browser reaches the store (one SET NX).
   */
  async complete (state: string | undefined, provider: string, cookie: FlowCookie | undefined, options: { pkce: boolean, openid: boolean }): Promise<FlowRecord> {
    // Where an expired state was going is said only to the browser that started it.
    const owns = (claims: Record<string, unknown>, kid: string) => cookie !== undefined && this.flowKeys.has(kid) && claims.b === bindingTag(this.flowKeys.get(kid)!, cookie.binding)
    const payload = verifyState(this.stateKeys, this.sealer, state, provider, this.clock.now(), owns)
    // The flow key of the secret that signed the state (the one its header named).
    const flowKey = this.flowKeys.get(payload.kid)!
    // Another browser's state (leaked from the provider's logs, say) says nothing of where it was going.
    if (!cookie) throw staleSignIn('the sign-in was started in another browser (no flow cookie)')
    if (payload.b !== bindingTag(flowKey, cookie.binding)) throw staleSignIn('the sign-in was started in another browser')
    if (payload.s <= cookie.sequence - MAX_FLOWS_IN_FLIGHT) {
      throw staleSignIn(`this browser started more than ${MAX_FLOWS_IN_FLIGHT} sign-ins after this one, so it was dropped`, payload.next)
    }
    // exp is in whole seconds; the marker outlives the state by a second at most.
    const remainingMs = Math.max(1000, (payload.exp + 1) * 1000 - this.clock.now())
    // Given back when the store fails (a claim that ran, its reply late): the reload of the callback
    // then signs in, where it was told the link was used (a tester's finding).
    if (!(await ownClaim(this.store, storeKeys.usedState(payload.n)).take(remainingMs))) {
      const used = staleSignIn('the state has already been used', payload.next)
      used.details.stateUsed = true
      throw used
    }
    return {
      provider,
      next: payload.next,
      verifier: options.pkce ? flowMac(flowKey, 'pkce', cookie.binding, payload.n) : undefined,
      nonce: options.openid ? flowMac(flowKey, 'nonce', cookie.binding, payload.n) : undefined,
      form: payload.f,
      agent: payload.a,
      session: payload.i,
      binding: createHash('sha256').update(cookie.binding).digest('base64url'),
    }
  }
}

/**
 * `invalid_state` in the words a person reads (MESSAGES.staleSignIn); `reason`, which check failed,
 * is the cause and so goes to the log only. `next`: where the flow was going, when the state is the
 * gateway's own for this provider, so that "Start again" can go back toward it.
 */
function staleSignIn (reason: string, next?: string): GatewayError {
  return new GatewayError('invalid_state', MESSAGES.staleSignIn, { cause: new Error(reason), details: next === undefined ? {} : { flowNext: next } })
}

/** A text or nothing, as the optional fields of {@link Hidden} are. */
const optionalText = (value: unknown): value is string | undefined => value === undefined || typeof value === 'string'

/**
 * What `claims` sealed (opened with `key`, to the state's id), or undefined when it cannot be read.
 * A state 1.0.0 signed carries them in the clear (`next`, `f`, `a`): read so for `state.ttl` after an upgrade.
 */
function hiddenOf (claims: Record<string, unknown>, key: SealingKey | undefined): Hidden | undefined {
  let hidden: Record<string, unknown> = claims
  if (claims.x !== undefined) {
    const text = typeof claims.x === 'string' && typeof claims.n === 'string' ? key?.open(HIDDEN, claims.n, claims.x) : undefined
    const parsed: unknown = typeof text === 'string' ? JSON.parse(text) : undefined
    if (typeof parsed !== 'object' || parsed === null) return undefined
    hidden = parsed as Record<string, unknown>
  }
  if (typeof hidden.next !== 'string' || !optionalText(hidden.f) || !optionalText(hidden.a) || !optionalText(hidden.i)) return undefined
  return { next: hidden.next, ...(hidden.f === undefined ? {} : { f: hidden.f }), ...(hidden.a === undefined ? {} : { a: hidden.a }), ...(hidden.i === undefined ? {} : { i: hidden.i }) }
}

/**
 * The state of `claims`: what the provider must not read sealed with `sealing` (the same secret's
 * keys), then signed (HS256, key derived from session.secret; the header names its id) with iat and exp.
 */
export function issueState (key: StateKey, sealing: SealingKey, claims: Omit<StatePayload, 'x'> & Hidden, ttlMs: number, nowMs: number): string {
  const { next, f, a, i, ...open } = claims
  const hidden: Hidden = { next, ...(f === undefined ? {} : { f }), ...(a === undefined ? {} : { a }), ...(i === undefined ? {} : { i }) }
  const payload: StatePayload = { ...open, x: sealing.seal(HIDDEN, open.n, JSON.stringify(hidden)) }
  return signState(key, { ...payload }, ttlMs, nowMs)
}

/**
 * Checks signature (with the key the header names), expiry and provider, and opens what it sealed;
 * the message says which check failed. `kid` is the id of the key that signed it.
 */
export function verifyState (keys: StateKeyring, sealer: Sealer, state: string | undefined, provider: string, nowMs: number,
  owns: (claims: Record<string, unknown>, kid: string) => boolean): OpenedSignIn {
  if (!state) throw new GatewayError('invalid_state', MESSAGES.noSignIn, { cause: new Error('the state parameter is missing') })
  const opened = openState(keys, state, nowMs)
  if (!opened.ok) {
    // The `next` of an expired state this gateway signed for `provider`, in the browser that started
    // it (`owns`: its flow cookie's binding): "Start again" goes back toward it. To anyone else who
    // holds the state, nothing of it: the sealed `next` may carry an application's own token (an
    // outside tester's finding: the callback's login_url opened it for any caller).
    const mine = opened.reason === 'expired' && opened.claims.p === provider && owns(opened.claims, opened.kid)
    throw opened.reason === 'expired' ? staleSignIn('the state has expired', mine ? hiddenOf(opened.claims, sealer.key(opened.kid))?.next : undefined) : staleSignIn('the state is invalid')
  }
  const payload = opened.claims as Partial<StatePayload> & { exp: number }
  const hidden = hiddenOf(opened.claims, sealer.key(opened.kid))
  if (typeof payload.n !== 'string' || typeof payload.p !== 'string' || typeof payload.b !== 'string' || !Number.isSafeInteger(payload.s) || hidden === undefined) {
    throw staleSignIn('the state is invalid')
  }
  if (payload.p !== provider) throw staleSignIn('the state was issued for another provider')
  return { p: payload.p, n: payload.n, b: payload.b, s: payload.s!, ...hidden, exp: payload.exp, kid: opened.kid }
}
