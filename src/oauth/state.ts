// The `state` parameter (a JWS, RFC 7515) and the per-flow record it points to. The record (PKCE
// verifier, next) lives in the store under the state's nonce, sealed with the browser's binding
// cookie, and is taken atomically at the callback: a state is usable once, only in the browser that
// started the flow, and only before it expires. @see https://www.rfc-editor.org/rfc/rfc6749#section-10.12
import { SignJWT, errors as joseErrors, jwtVerify } from 'jose'
import { GatewayError } from '../errors.js'
import { randomToken, type Sealer } from '../seal.js'
import { storeKeys, type SessionStore } from '../store/store.js'

/** What a sign-in flow keeps server-side between the login redirect and the callback. */
export interface FlowRecord {
  provider: string
  next: string
  /** PKCE code_verifier (RFC 7636); absent when the provider has pkce: false. */
  verifier?: string
  /** OIDC nonce sent in the authorize request, expected in the ID token. */
  nonce?: string
}

interface StatePayload {
  /** provider (<remote_app_name>) */
  p: string
  next: string
  /** the flow's nonce: the store key of its FlowRecord */
  n: string
}

const PURPOSE = 'flow'

export class Flows {
  constructor (
    private readonly store: SessionStore,
    private readonly sealer: Sealer,
    private readonly stateKey: Uint8Array,
    readonly ttlMs: number
  ) {}

  /** Keeps the flow's record and returns the signed `state` for the authorize redirect. */
  async begin (binding: string, flow: FlowRecord): Promise<string> {
    const nonce = randomToken()
    await this.store.set(storeKeys.flow(nonce), this.sealer.seal(PURPOSE, binding, JSON.stringify(flow)), this.ttlMs)
    return await issueState(this.stateKey, { p: flow.provider, next: flow.next, n: nonce }, this.ttlMs)
  }

  /**
   * Verifies `state` for `provider` and consumes its flow record. Throws `invalid_state` when the
   * state is missing, tampered with, expired, for another provider, already used, or from another
   * browser (the record cannot be opened with this browser's binding cookie).
   */
  async complete (state: string | undefined, provider: string, binding: string | undefined): Promise<FlowRecord> {
    const payload = await verifyState(this.stateKey, state, provider)
    if (!binding) throw new GatewayError('invalid_state', 'The sign-in was started in another browser (no flow cookie).')
    const sealed = await this.store.take(storeKeys.flow(payload.n))
    if (!sealed) throw new GatewayError('invalid_state', 'The state has already been used or has expired.')
    const json = this.sealer.open(PURPOSE, binding, sealed)
    if (!json) throw new GatewayError('invalid_state', 'The sign-in was started in another browser.')
    return JSON.parse(json) as FlowRecord
  }
}

/** Signs the state (HS256, key derived from session.secret) with iat and exp. */
export async function issueState (key: Uint8Array, payload: StatePayload, ttlMs: number): Promise<string> {
  const now = Math.floor(Date.now() / 1000)
  return await new SignJWT({ ...payload })
    .setProtectedHeader({ alg: 'HS256' })
    .setIssuedAt(now)
    .setExpirationTime(now + Math.ceil(ttlMs / 1000))
    .sign(key)
}

/** Checks signature, expiry and provider; the message says which check failed. */
export async function verifyState (key: Uint8Array, state: string | undefined, provider: string): Promise<StatePayload> {
  if (!state) throw new GatewayError('invalid_state', 'The state parameter is missing.')
  let payload: Partial<StatePayload>
  try {
    payload = (await jwtVerify(state, key, { algorithms: ['HS256'], clockTolerance: 0 })).payload as Partial<StatePayload>
  } catch (error) {
    if (error instanceof joseErrors.JWTExpired) throw new GatewayError('invalid_state', 'The state has expired.', { cause: error })
    throw new GatewayError('invalid_state', 'The state is invalid.', { cause: error })
  }
  if (typeof payload.n !== 'string' || typeof payload.next !== 'string' || typeof payload.p !== 'string') {
    throw new GatewayError('invalid_state', 'The state is invalid.')
  }
  if (payload.p !== provider) throw new GatewayError('invalid_state', 'The state was issued for another provider.')
  return payload as StatePayload
}
