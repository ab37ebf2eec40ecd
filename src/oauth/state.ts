// The `state` parameter (a JWS, RFC 7515) and the browser's flow cookie. A sign-in in flight costs
// the store nothing: the PKCE verifier (RFC 7636) and the OIDC nonce are HMACs over the browser's
// flow binding and the state's id, so neither is in the URL or the JWS, and nothing is written at
// login. The callback claims `used-state:<id>` (set if absent, for the state's remaining lifetime):
// a state is usable once, only in the browser that started it, for one provider, before it expires.
// @see https://www.rfc-editor.org/rfc/rfc6749#section-10.12
import { createHash, createHmac, randomBytes, webcrypto } from 'node:crypto'
import { SignJWT, errors as joseErrors, jwtVerify } from 'jose'
import { GatewayError } from '../http/errors.js'
import { randomToken } from '../session/seal.js'
import { storeKeys, type KeyValue } from '../store/store.js'

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
 * (a few µs; WebCrypto's digest, behind oauth4webapi's helper, costs about ten times that in CPU).
 */
export function pkceChallenge (verifier: string): string {
  return createHash('sha256').update(verifier, 'ascii').digest('base64url')
}

export class Flows {
  /**
   * The state key imported once as a CryptoKey: jose imports raw key bytes again on every sign and
   * verify, which about doubled what each costs (measured: bench/README.md, sign-in storm).
   */
  private readonly stateCryptoKey: Promise<webcrypto.CryptoKey>

  constructor (
    private readonly store: KeyValue,
    stateKey: Uint8Array,
    private readonly flowKey: Uint8Array,
    readonly ttlMs: number
  ) {
    this.stateCryptoKey = webcrypto.subtle.importKey('raw', stateKey, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign', 'verify'])
  }

  private mac (label: string, ...parts: string[]): string {
    const hmac = createHmac('sha256', this.flowKey).update(label)
    for (const part of parts) hmac.update('\0').update(part)
    return hmac.digest().toString('base64url')
  }

  private bindingTag (binding: string): string {
    // 128 bits are plenty to tell browsers apart; the state stays short.
    return this.mac('binding', binding).slice(0, 22)
  }

  /**
   * Starts a sign-in: the signed `state`, the flow cookie to set, and the PKCE challenge and OIDC
   * nonce for the authorize request. Writes nothing to the store.
   */
  async begin (cookie: FlowCookie | undefined, flow: { provider: string, next: string, pkce: boolean, openid: boolean }): Promise<{
    state: string
    cookie: FlowCookie
    codeChallenge?: string
    nonce?: string
  }> {
    const next = { binding: cookie?.binding ?? randomToken(), sequence: (cookie?.sequence ?? 0) + 1 }
    const id = randomBytes(16).toString('base64url')
    const state = await issueState(await this.stateCryptoKey, { p: flow.provider, next: flow.next, n: id, b: this.bindingTag(next.binding), s: next.sequence }, this.ttlMs)
    const verifier = flow.pkce ? this.mac('pkce', next.binding, id) : undefined
    return {
      state,
      cookie: next,
      codeChallenge: verifier ? pkceChallenge(verifier) : undefined,
      nonce: flow.openid ? this.mac('nonce', next.binding, id) : undefined,
    }
  }

  /**
   * Verifies `state` for `provider` against the browser's flow cookie and marks it used. Throws
   * `invalid_state` when the state is missing, tampered with, expired, for another provider, from
   * another browser, older than the browser's newest {@link MAX_FLOWS_IN_FLIGHT} sign-ins, or used.
   * Only a signed, unexpired state of this browser reaches the store (one SET NX).
   */
  async complete (state: string | undefined, provider: string, cookie: FlowCookie | undefined, options: { pkce: boolean, openid: boolean }): Promise<FlowRecord> {
    const payload = await verifyState(await this.stateCryptoKey, state, provider)
    if (!cookie) throw new GatewayError('invalid_state', 'The sign-in was started in another browser (no flow cookie).')
    if (payload.b !== this.bindingTag(cookie.binding)) throw new GatewayError('invalid_state', 'The sign-in was started in another browser.')
    if (payload.s <= cookie.sequence - MAX_FLOWS_IN_FLIGHT) {
      throw new GatewayError('invalid_state', `This browser started more than ${MAX_FLOWS_IN_FLIGHT} sign-ins after this one, so it was dropped.`)
    }
    // exp is in whole seconds; the marker outlives the state by a second at most.
    const remainingMs = Math.max(1000, (payload.exp + 1) * 1000 - Date.now())
    if (!(await this.store.claim(storeKeys.usedState(payload.n), '1', remainingMs))) {
      throw new GatewayError('invalid_state', 'The state has already been used.')
    }
    return {
      provider,
      next: payload.next,
      verifier: options.pkce ? this.mac('pkce', cookie.binding, payload.n) : undefined,
      nonce: options.openid ? this.mac('nonce', cookie.binding, payload.n) : undefined,
    }
  }
}

/** Signs the state (HS256, key derived from session.secret) with iat and exp. */
export async function issueState (key: Uint8Array | webcrypto.CryptoKey, payload: StatePayload, ttlMs: number): Promise<string> {
  const now = Math.floor(Date.now() / 1000)
  return await new SignJWT({ ...payload })
    .setProtectedHeader({ alg: 'HS256' })
    .setIssuedAt(now)
    .setExpirationTime(now + Math.ceil(ttlMs / 1000))
    .sign(key)
}

/** Checks signature, expiry and provider; the message says which check failed. */
export async function verifyState (key: Uint8Array | webcrypto.CryptoKey, state: string | undefined, provider: string): Promise<StatePayload & { exp: number }> {
  if (!state) throw new GatewayError('invalid_state', 'The state parameter is missing.')
  let payload: Partial<StatePayload> & { exp?: number }
  try {
    payload = (await jwtVerify(state, key, { algorithms: ['HS256'], clockTolerance: 0, requiredClaims: ['exp'] })).payload as Partial<StatePayload>
  } catch (error) {
    if (error instanceof joseErrors.JWTExpired) throw new GatewayError('invalid_state', 'The state has expired.', { cause: error })
    throw new GatewayError('invalid_state', 'The state is invalid.', { cause: error })
  }
  if (typeof payload.n !== 'string' || typeof payload.next !== 'string' || typeof payload.p !== 'string' ||
    typeof payload.b !== 'string' || !Number.isSafeInteger(payload.s) || typeof payload.exp !== 'number') {
    throw new GatewayError('invalid_state', 'The state is invalid.')
  }
  if (payload.p !== provider) throw new GatewayError('invalid_state', 'The state was issued for another provider.')
  return payload as StatePayload & { exp: number }
}
