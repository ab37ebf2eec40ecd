// Step-up (a route's `reauth:`): whether a sign-in at a provider is recent enough, and of an
// accepted `acr`, judged by the ID token's `auth_time` and `acr`. One definition of "recent
// enough" for the request pipeline (access/authorize.ts) and the callback (./sign-in.ts): a
// sign-in the callback accepts is one the gate lets through, so a provider's answer can never send
// a browser round in a loop. Which route a sign-in is for is access/step-up-route.ts's.
// @see https://openid.net/specs/openid-connect-core-1_0.html#AuthRequest (max_age, acr_values)
// @see https://www.rfc-editor.org/rfc/rfc9470 (OAuth 2.0 Step Up Authentication Challenge)
import type { ReauthConfig } from '../config/types.js'

/** How far the provider's clock may be from the gateway's, in seconds, when `auth_time` is judged. */
export const AUTH_TIME_SKEW_SECONDS = 60

/** What a sign-in says of itself: the ID token's `auth_time` (seconds since the epoch) and `acr`. */
export interface SignInStrength {
  readonly authTime?: unknown
  readonly acr?: unknown
}

/** Why a sign-in does not meet a route's `reauth`: no `auth_time`, an older one, another `acr`. */
export type StepUpProblem = 'no_auth_time' | 'too_old' | 'wrong_acr'

/**
 * Why `signIn` does not meet `reauth` at `nowMs`, or undefined when it does: its `auth_time` is
 * known, at most `maxAge` old and not in the future (each within {@link AUTH_TIME_SKEW_SECONDS}), and its `acr` is one of the
 * listed ones (when any are listed).
 */
export function stepUpProblem (reauth: ReauthConfig, signIn: SignInStrength | undefined, nowMs: number): StepUpProblem | undefined {
  const authTime = signIn?.authTime
  // A time beyond the skew in the future says nothing true of when the person signed in (and
  // would meet every maxAge for ever): as if there were none.
  if (typeof authTime !== 'number' || !Number.isFinite(authTime) || authTime - nowMs / 1000 > AUTH_TIME_SKEW_SECONDS) return 'no_auth_time'
  if (nowMs / 1000 - authTime > reauth.maxAgeMs / 1000 + AUTH_TIME_SKEW_SECONDS) return 'too_old'
  if (reauth.acr.length > 0 && !(typeof signIn?.acr === 'string' && reauth.acr.includes(signIn.acr))) return 'wrong_acr'
  return undefined
}

/**
 * The moment (clock ms) after which `signIn` no longer meets `reauth`'s maxAge (as stepUpProblem
 * judges it, its skew included); undefined when it names no sign-in time (stepUpProblem refuses it).
 */
export function stepUpEnds (reauth: ReauthConfig, signIn: SignInStrength | undefined): number | undefined {
  const authTime = signIn?.authTime
  return typeof authTime === 'number' && Number.isFinite(authTime) ? (authTime + AUTH_TIME_SKEW_SECONDS) * 1000 + reauth.maxAgeMs + 1 : undefined
}

/** `reauth.maxAge` as the `max_age` the provider is sent: whole seconds. */
export function maxAgeSeconds (reauth: ReauthConfig): number {
  return Math.floor(reauth.maxAgeMs / 1000)
}
