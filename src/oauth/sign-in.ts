// The sign-in callback's protocol steps, in order, as one function a test can call without a
// server: the callback's parameters, the `state` checked against this browser's flow (and marked
// used), the provider's error or code, the code exchanged (with the PKCE verifier and the nonce),
// the ID token checked, userinfo, who the user is, and, when the route the sign-in is for has
// `reauth:`, that the provider did sign the person in as recently (and as strongly) as asked. The
// caller starts the session.
// @see https://www.rfc-editor.org/rfc/rfc6749#section-4.1.2 (authorization response)
// @see https://openid.net/specs/openid-connect-core-1_0.html#CodeFlowSteps
import type { GatewayConfig, ReauthConfig } from '../config/types.js'
import { GatewayError, withOwn } from '../errors.js'
import type { Clock } from '../ops/clock.js'
import type { ProviderSession, SignIn } from '../session/record.js'
import { identityFrom, untakenUser } from './claims.js'
import { callbackParameters, checkCallback, exchangeCode, fetchUserinfo } from './client.js'
import type { Providers, ResolvedProvider } from './providers.js'
import { parseFlowCookie, type Flows } from './state.js'
import { maxAgeSeconds, stepUpProblem, type StepUpProblem } from './step-up.js'
import { HOME, loginUrl, redirectUri } from './urls.js'

export interface SignInDeps {
  config: Pick<GatewayConfig, 'server' | 'providers'>
  providers: Providers
  flows: Flows
  /** What "now" is for the tokens' expiry and a step-up's `auth_time`. */
  clock: Clock
  /**
   * The step-up a sign-in at `provider` toward `next` must meet (the `reauth` of the route serving
   * `next`), or undefined. Absent: none is checked.
   */
  stepUp?: (provider: string, next: string) => ReauthConfig | undefined
}

/** A sign-in the provider completed: what the session keeps, and where the browser goes next (not yet checked by safeNext). */
export interface CompletedSignIn {
  readonly signIn: SignIn
  readonly next: string
  /** The binding of the kept form this sign-in was started for (its signed state says so), if any. */
  readonly form?: string | undefined
  /** The agent authorization (interaction id) this sign-in was started for, if any: its session is the grant's. */
  readonly agent?: string | undefined
  /** The store id of the session the browser had when this sign-in began, if it had one. */
  readonly beganIn?: string | undefined
  /** The browser's flow binding tag (FlowRecord.binding), kept in the session it makes. */
  readonly flow: string
}

/**
 * Completes the sign-in at provider `name` from the callback's query string (without `?`) and the
 * browser's flow cookie.
 * @throws GatewayError `invalid_state`, `access_denied` (also: a step-up the provider did not
 * honour), `token_exchange_failed`, `forbidden` (an unverified address, or not one address, as the user name),
 * `provider_unavailable`: each with a `loginUrl` that starts the sign-in over toward the same `next`
 */
export async function completeSignIn (deps: SignInDeps, name: string, query: string, flowCookie: string | undefined): Promise<CompletedSignIn> {
  let next = HOME
  try {
    const parameters = callbackParameters(query)
    const { pkce, openid } = deps.config.providers[name]!
    const flow = await deps.flows.complete(parameters.get('state') ?? undefined, name, parseFlowCookie(flowCookie), { pkce, openid })
    next = flow.next
    const provider = await deps.providers.get(name)
    const callback = checkCallback(provider, parameters)
    const { tokens, idClaims, idToken } = await exchangeCode(provider, callback, redirectUri(deps.config, name), flow.verifier, flow.nonce, deps.clock)
    const userinfo = provider.userinfoUrl ? await fetchUserinfo(provider, tokens.access_token, idClaims?.sub) : {}
    const claims = { ...idClaims, ...userinfo }
    // A user name that is an address nobody verified is anyone's to claim, and one two readers read apart is no one's: no session is made.
    const untaken = untakenUser(claims, provider.claims)
    if (untaken !== undefined) throw new GatewayError('forbidden', untaken)
    const mapped = identityFrom(claims, provider.claims, deps.config.providers[name]!.keptClaims)
    // The issuer the ID token's `iss` was checked against (no ID token: the provider's own origin).
    const identity = mapped && { ...mapped, iss: provider.expectedIssuer }
    const reauth = deps.stepUp?.(name, next)
    if (reauth !== undefined) checkStepUp(reauth, idClaims, deps.clock.now())
    return { next, form: flow.form, agent: flow.agent, beganIn: flow.session, flow: flow.binding, signIn: { tokens, identity, providerSession: providerSession(provider, idClaims, idToken) } }
  } catch (error) {
    throw error instanceof GatewayError ? withOwn(error, { loginUrl: loginUrl(deps.config, name, error.details.flowNext ?? next) }) : error
  }
}

/** The longest `acr` a session keeps. */
const ACR_MAX_LENGTH = 256

/** What each step-up problem tells the person: the provider did not do what the sign-in asked of it. */
const STEP_UP_REFUSED: Record<StepUpProblem, (reauth: ReauthConfig) => string> = {
  no_auth_time: () => 'it did not say when you signed in',
  too_old: (reauth) => `it reused a sign-in older than the ${maxAgeSeconds(reauth)} seconds this page allows`,
  wrong_acr: (reauth) => `it did not sign you in with one of: ${reauth.acr.join(', ')}`,
}

/**
 * Checks that the provider honoured the fresh sign-in it was asked for (`max_age`, `acr_values`):
 * the ID token's `auth_time` within `reauth.maxAge` of now (60 s of clock skew allowed) and its
 * `acr` listed. A 403 otherwise, and no session change: sending the browser round again would
 * only meet the same provider (a loop).
 * @throws GatewayError `access_denied`
 * @see https://openid.net/specs/openid-connect-core-1_0.html#IDToken (auth_time, acr)
 */
export function checkStepUp (reauth: ReauthConfig, idClaims: Record<string, unknown> | undefined, nowMs: number): void {
  const problem = stepUpProblem(reauth, { authTime: idClaims?.auth_time, acr: idClaims?.acr }, nowMs)
  if (problem === undefined) return
  throw new GatewayError('access_denied', `The provider did not honour the fresh sign-in this page needs: ${STEP_UP_REFUSED[problem](reauth)}.`)
}

/**
 * What sign-out needs of the provider's session: the ID token only where sign-out will send it back
 * (id_token_hint: it is the largest part), `sid` and `sub` only where a back-channel logout may name
 * them (and find them in the index); and what step-up judges (a route's `reauth`): the ID token's
 * `auth_time` and `acr`, whenever it has them.
 */
function providerSession (provider: ResolvedProvider, idClaims: Record<string, unknown> | undefined, idToken: string | undefined): ProviderSession | undefined {
  if (!idClaims) return undefined
  const listed = provider.backchannelLogout
  return {
    ...(provider.endSessionUrl && idToken ? { idToken } : {}),
    ...(listed && typeof idClaims.sid === 'string' ? { sid: idClaims.sid } : {}),
    ...(listed && typeof idClaims.sub === 'string' ? { sub: idClaims.sub } : {}),
    ...(typeof idClaims.auth_time === 'number' && Number.isFinite(idClaims.auth_time) ? { authTime: idClaims.auth_time } : {}),
    // The provider's text, kept in every record: a bounded one, or none (a step-up route then asks again).
    ...(typeof idClaims.acr === 'string' && idClaims.acr.length <= ACR_MAX_LENGTH ? { acr: idClaims.acr } : {}),
  }
}
