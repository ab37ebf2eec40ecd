// Sign-out at the providers, after the gateway's own session has ended: the tokens are revoked
// where the provider has a revocation endpoint (RFC 7009), and the browser is walked through the
// end-session endpoint of every OIDC provider in the session, one after the other (RP-Initiated
// Logout 1.0), then to `next`. What the walk still needs (the remaining providers and their ID
// tokens) is sealed in the store under a random token that only this browser's sign-out cookie
// holds; each provider leg carries a `state` (a JWS like the sign-in state, with its own key) that
// is bound to that cookie and usable once. Each leg's state names the key id of the secret that
// signed it, and that secret also keyed the walk's store key, seal and binding tag: a walk begun
// before a secret rotation (session.previousSecrets) ends after it, opened in one try; the next leg
// is written with the current secret.
// @see https://openid.net/specs/openid-connect-rpinitiated-1_0.html
// @see https://www.rfc-editor.org/rfc/rfc7009
import { createHmac, randomBytes, type KeyObject } from 'node:crypto'
import type { Logger } from '../ops/logger.js'
import * as oauth from 'oauth4webapi'
import { GatewayError, MESSAGES } from '../errors.js'
import { systemClock, type Clock } from '../ops/clock.js'
import { randomToken, type Sealer, type SealingKey } from '../session/seal.js'
import type { SessionRecord } from '../session/session.js'
import { ownClaim, storeKeys, type SessionStore } from '../store/store.js'
import { revokeToken } from './client.js'
import type { Providers, ResolvedProvider } from './providers.js'
import { openState, signState, stateKey, stateKeyring, type StateKey, type StateKeyring } from './signed-state.js'

/** One provider still to visit: its name and the ID token to send as `id_token_hint`. */
interface SignOutStep {
  provider: string
  idToken: string
}

/** What the walk keeps between providers (sealed in the store). */
interface SignOutWalk {
  /** Where to go at the end; undefined: the signed-out page. */
  next: string | undefined
  /** "Use another account": the provider to sign in at again at the end, toward `next`. */
  switchTo?: string | undefined
  /** "Sign out everywhere": the end says what it did and did not end. */
  everywhere?: true
  steps: SignOutStep[]
}

/** The sign-out state's claims besides iat and exp. */
interface SignOutState {
  /** always 'signout': a sign-in state can never be taken for one (other key too) */
  typ: 'signout'
  /** the provider this leg went to */
  p: string
  /** the state's random id: the used-state key */
  n: string
  /** a keyed hash of the browser's sign-out cookie */
  b: string
}

const PURPOSE = 'signout'
const COOKIE_VALUE = /^[A-Za-z0-9_-]{43}$/

/** `invalid_state` in the words a person reads (MESSAGES.staleSignOut); `reason`, which check failed, is the cause, for the log. */
function staleSignOut (reason: string): GatewayError {
  return new GatewayError('invalid_state', MESSAGES.staleSignOut, { cause: new Error(reason) })
}

/** Where a sign-out goes next: a provider's end-session page, or the end of the walk. */
export type SignOutNext = { url: string } | { done: true, next: string | undefined, switchTo: string | undefined, everywhere: boolean }

export class SignOuts {
  /** HS256 keys of the sign-out state (derived from each secret, apart from the sign-in state's), by header. */
  private readonly stateKeys: StateKeyring
  /** Each secret's sealing key and sign-out state key, by key id. */
  private readonly keys: ReadonlyMap<string, { sealing: SealingKey, state: StateKey }>

  constructor (
    private readonly store: SessionStore,
    private readonly sealer: Sealer,
    private readonly providers: Providers,
    /** How long a walk may take per provider (the sign-in state's lifetime). */
    readonly ttlMs: number,
    /** {base_url}: the return address is {base_url}/oauth/logout/<provider>/. */
    private readonly baseUrl: string,
    private readonly log: Logger,
    private readonly clock: Clock = systemClock
  ) {
    const keys = sealer.keys.map((sealing) => ({ sealing, state: stateKey(sealing.kid, sealing.derive('signout-state')) }))
    this.stateKeys = stateKeyring(keys.map((key) => key.state))
    this.keys = new Map(keys.map((key) => [key.sealing.kid, key]))
  }

  /** The current secret's keys: every leg is written with them. */
  private get current (): { sealing: SealingKey, state: StateKey } {
    return this.keys.get(this.sealer.current.kid)!
  }

  /** post_logout_redirect_uri: where the provider sends the browser back. */
  returnUri (provider: string): string {
    return `${this.baseUrl}/oauth/logout/${provider}/`
  }

  private bindingTag (key: KeyObject, cookie: string): string {
    return createHmac('sha256', key).update('binding\0').update(cookie).digest().toString('base64url').slice(0, 22)
  }

  private walkKey (key: SealingKey, cookie: string): string {
    return `signout:${key.idFor(PURPOSE, cookie)}`
  }

  private async resolved (name: string): Promise<ResolvedProvider | undefined> {
    try {
      return await this.providers.get(name)
    } catch (error) {
      this.log.warn({ provider: name, reason: error instanceof GatewayError ? error.code : 'error' }, 'sign-out could not reach this provider; the gateway session has ended anyway')
      return undefined
    }
  }

  /**
   * Revokes each provider's refresh token and access token where it has a revocation endpoint.
   * A failure logs one warn line per provider and is otherwise ignored: the session has ended.
   */
  async revoke (record: SessionRecord): Promise<void> {
    await Promise.all(Object.entries(record.tokens).map(async ([name, tokens]) => {
      const provider = await this.resolved(name)
      if (!provider?.revocationUrl) return
      try {
        if (tokens.refresh_token) await revokeToken(provider, tokens.refresh_token, 'refresh_token')
        await revokeToken(provider, tokens.access_token, 'access_token')
        this.log.info({ provider: name }, 'tokens revoked at the provider')
      } catch (error) {
        const reason = error instanceof oauth.ResponseBodyError ? error.error : error instanceof Error ? error.name : 'error'
        this.log.warn({ provider: name, reason }, 'token revocation failed; the gateway session has ended anyway')
      }
    }))
  }

  /**
   * Starts the walk over the providers of `record` that have an end-session endpoint and an ID
   * token. Undefined when there is none; else the sign-out cookie's value and the first address.
   * `switchTo` ("Use another account") and `everywhere` are kept with the walk, for its end.
   */
  async begin (record: SessionRecord, next: string | undefined, { switchTo, everywhere = false }: { switchTo?: string | undefined, everywhere?: boolean } = {}): Promise<{ cookie: string, url: string } | undefined> {
    const steps = Object.entries(record.providerSessions ?? {})
      .filter((entry): entry is [string, { idToken: string }] => entry[1].idToken !== undefined)
      .map(([provider, { idToken }]) => ({ provider, idToken }))
    if (steps.length === 0) return undefined
    const cookie = randomToken()
    const step = await this.advance(cookie, { next, switchTo, ...(everywhere ? { everywhere } : {}), steps })
    return 'url' in step ? { cookie, url: step.url } : undefined
  }

  /**
   * A provider sent the browser back: checks `state` for `provider` against the sign-out cookie
   * and marks it used, then goes on with the next provider or ends the walk. Throws `invalid_state`
   * when the state is missing, tampered with, expired, for another provider, from another browser,
   * or used.
   */
  async resume (provider: string, state: string | undefined, cookie: string | undefined): Promise<SignOutNext> {
    const payload = this.verifyState(state, provider)
    // The secret that signed this leg's state also keyed its binding and the walk it left.
    const keys = this.keys.get(payload.kid)!
    if (cookie === undefined || !COOKIE_VALUE.test(cookie)) throw staleSignOut('no sign-out cookie: the sign-out was started in another browser, or has already ended')
    if (payload.b !== this.bindingTag(keys.state.key, cookie)) throw staleSignOut('the sign-out was started in another browser')
    const remainingMs = Math.max(1000, (payload.exp + 1) * 1000 - this.clock.now())
    if (!(await ownClaim(this.store, storeKeys.usedState(payload.n)).take(remainingMs))) {
      throw staleSignOut('the state has already been used')
    }
    const sealed = await this.store.take(this.walkKey(keys.sealing, cookie))
    const json = sealed === null ? null : keys.sealing.open(PURPOSE, cookie, sealed)
    if (json === null) return { done: true, next: undefined, switchTo: undefined, everywhere: false }
    this.log.info({ provider }, 'signed out at the provider')
    return await this.advance(cookie, JSON.parse(json) as SignOutWalk)
  }

  /** The next provider's end-session address (the rest of the walk stored), or the end. */
  private async advance (cookie: string, walk: SignOutWalk): Promise<SignOutNext> {
    for (let step = walk.steps.shift(); step !== undefined; step = walk.steps.shift()) {
      const provider = await this.resolved(step.provider)
      if (!provider?.endSessionUrl) continue
      await this.store.set(this.walkKey(this.current.sealing, cookie), this.current.sealing.seal(PURPOSE, cookie, JSON.stringify(walk)), this.ttlMs)
      return { url: this.endSessionUrl(provider, step.idToken, cookie) }
    }
    return { done: true, next: walk.next, switchTo: walk.switchTo, everywhere: walk.everywhere === true }
  }

  private endSessionUrl (provider: ResolvedProvider, idToken: string, cookie: string): string {
    const claims: SignOutState = { typ: 'signout', p: provider.name, n: randomBytes(16).toString('base64url'), b: this.bindingTag(this.current.state.key, cookie) }
    const state = signState(this.current.state, { ...claims }, this.ttlMs, this.clock.now())
    const url = new URL(provider.endSessionUrl!)
    url.searchParams.set('id_token_hint', idToken)
    url.searchParams.set('client_id', provider.clientId)
    url.searchParams.set('post_logout_redirect_uri', this.returnUri(provider.name))
    url.searchParams.set('state', state)
    return url.href
  }

  private verifyState (state: string | undefined, provider: string): SignOutState & { exp: number, kid: string } {
    if (!state) throw staleSignOut('the state parameter is missing')
    const opened = openState(this.stateKeys, state, this.clock.now())
    if (!opened.ok) throw staleSignOut(opened.reason === 'expired' ? 'the state has expired' : 'the state is invalid')
    const payload = opened.claims as Partial<SignOutState> & { exp: number }
    if (payload.typ !== 'signout' || typeof payload.p !== 'string' || typeof payload.n !== 'string' || typeof payload.b !== 'string') {
      throw staleSignOut('the state is invalid')
    }
    if (payload.p !== provider) throw staleSignOut('the state was issued for another provider')
    return { ...(payload as SignOutState & { exp: number }), kid: opened.kid }
  }
}
