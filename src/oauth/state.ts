// The `state` parameter (a JWS, RFC 7515) and the browser's flow cookie. A sign-in in flight costs
// the store nothing: the PKCE verifier (RFC 7636) and the OIDC nonce are HMACs over the browser's
// flow binding and the state's id, so neither is in the URL or the JWS, and nothing is written at
// login. The callback claims `used-state:<id>` (set if absent, for the state's remaining lifetime):
// a state is usable once, only in the browser that started it, for one provider, before it expires.
// The state's header names the key id of the secret it was signed with; the binding tag, verifier
// and nonce are made with that same secret's flow key, so a sign-in begun before a secret rotation
// (session.previousSecrets) completes after it.
// @see https://www.rfc-editor.org/rfc/rfc6749#section-10.12
import { createHash, createHmac, randomBytes, type KeyObject } from 'node:crypto'
import { GatewayError, MESSAGES } from '../errors.js'
import { systemClock, type Clock } from '../ops/clock.js'
import { randomToken, type Sealer } from '../session/seal.js'
import { storeKeys, type KeyValue } from '../store/store.js'
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
}

/**
 * The flow cookie: a random binding shared by the browser's sign-ins, and the sequence number of
 * the newest one it started (which bounds the sign-ins in flight without listing them).
 */
export interface FlowCookie {
  binding: string
  sequence: number
}

/** The signed state's claims besides iat and exp. */
export interface StatePayload {
  /** provider (<remote_app_name>) */
  p: string
  next: string
  /** the state's random id: the used-state key, and an input of the verifier and nonce */
  n: string
  /** a keyed hash of the browser's flow binding: the state only completes in that browser */
  b: string
  /** the sign-in's sequence number in that browser */
  s: number
  /** the binding of the kept form this sign-in was started for, if any */
  f?: string
  /** the agent authorization this sign-in was started for, if any */
  a?: string
}

const FLOW_COOKIE = /^([A-Za-z0-9_-]{43})(?:\.(\d{1,15}))?$/

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
    private readonly store: KeyValue,
    /** session.secret and previousSecrets: new states are signed with the current one. */
    sealer: Sealer,
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
  async begin (cookie: FlowCookie | undefined, flow: { provider: string, next: string, pkce: boolean, openid: boolean, form?: string | undefined, agent?: string | undefined }): Promise<{
    state: string
    cookie: FlowCookie
    codeChallenge?: string
    nonce?: string
  }> {
    const next = { binding: cookie?.binding ?? randomToken(), sequence: (cookie?.sequence ?? 0) + 1 }
    const id = randomBytes(16).toString('base64url')
    const flowKey = this.flowKeys.get(this.stateKey.kid)!
    const payload: StatePayload = { p: flow.provider, next: flow.next, n: id, b: bindingTag(flowKey, next.binding), s: next.sequence }
    if (flow.form !== undefined) payload.f = flow.form
    if (flow.agent !== undefined) payload.a = flow.agent
    const state = issueState(this.stateKey, payload, this.ttlMs, this.clock.now())
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
    const payload = verifyState(this.stateKeys, state, provider, this.clock.now())
    // The flow key of the secret that signed the state (the one its header named).
    const flowKey = this.flowKeys.get(payload.kid)!
    if (!cookie) throw staleSignIn('the sign-in was started in another browser (no flow cookie)', payload.next)
    if (payload.b !== bindingTag(flowKey, cookie.binding)) throw staleSignIn('the sign-in was started in another browser', payload.next)
    if (payload.s <= cookie.sequence - MAX_FLOWS_IN_FLIGHT) {
      throw staleSignIn(`this browser started more than ${MAX_FLOWS_IN_FLIGHT} sign-ins after this one, so it was dropped`, payload.next)
    }
    // exp is in whole seconds; the marker outlives the state by a second at most.
    const remainingMs = Math.max(1000, (payload.exp + 1) * 1000 - this.clock.now())
    if (!(await this.store.claim(storeKeys.usedState(payload.n), '1', remainingMs))) {
      throw staleSignIn('the state has already been used', payload.next)
    }
    return {
      provider,
      next: payload.next,
      verifier: options.pkce ? flowMac(flowKey, 'pkce', cookie.binding, payload.n) : undefined,
      nonce: options.openid ? flowMac(flowKey, 'nonce', cookie.binding, payload.n) : undefined,
      form: payload.f,
      agent: payload.a,
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

/** The `next` of an expired state this gateway signed for `provider`, when it holds one. */
function ownNext (claims: Record<string, unknown>, provider: string): string | undefined {
  return claims.p === provider && typeof claims.next === 'string' ? claims.next : undefined
}

/** Signs the state (HS256, key derived from session.secret; the header names its id) with iat and exp. */
export function issueState (key: StateKey, payload: StatePayload, ttlMs: number, nowMs: number): string {
  return signState(key, { ...payload }, ttlMs, nowMs)
}

/**
 * Checks signature (with the key the header names), expiry and provider; the message says which
 * check failed. `kid` is the id of the key that signed it.
 */
export function verifyState (keys: StateKeyring, state: string | undefined, provider: string, nowMs: number): StatePayload & { exp: number, kid: string } {
  if (!state) throw staleSignIn('the state parameter is missing')
  const opened = openState(keys, state, nowMs)
  if (!opened.ok) throw opened.reason === 'expired' ? staleSignIn('the state has expired', ownNext(opened.claims, provider)) : staleSignIn('the state is invalid')
  const payload = opened.claims as Partial<StatePayload> & { exp: number }
  if (typeof payload.n !== 'string' || typeof payload.next !== 'string' || typeof payload.p !== 'string' ||
    typeof payload.b !== 'string' || !Number.isSafeInteger(payload.s) || (payload.f !== undefined && typeof payload.f !== 'string') ||
    (payload.a !== undefined && typeof payload.a !== 'string')) {
    throw staleSignIn('the state is invalid')
  }
  if (payload.p !== provider) throw staleSignIn('the state was issued for another provider')
  return { ...(payload as StatePayload & { exp: number }), kid: opened.kid }
}
