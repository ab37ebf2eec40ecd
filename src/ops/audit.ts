// The audit fields of a protected request's log line (http/request-end.ts writes them), declared
// once: access/responder.ts makes them from the pipeline's verdict, for the proxy and forward-auth.

/**
 * What a request was judged by: a machine client's `bearer` token, a person's `session`, or an
 * `agent`'s token the gateway issued (judged as its grant's session, src/agents/).
 */
export type Credential = 'bearer' | 'session' | 'agent'

export interface Audit {
  /**
   * What was decided: `allow`, `forbidden`, `sign_in`, `unauthenticated`, `step_up`, `public`,
   * `unavailable`, `invalid_request`, `token_refused` (`forbidden` too where an admitted request was
   * refused after all).
   */
  readonly decision: string
  /** Who asked (the identity's `sub`), or null when nobody is known. */
  readonly user: string | null
  /** The rule that decided (`deny[0]`, `allow[1]`), or `none`. */
  readonly rule: string
  /** null: neither a token nor a session (a sign-in, a 401, a public path). */
  readonly credential: Credential | null
  /** Why a token or an admitted request was refused after all, or a request before anyone was judged: one of a closed set of words (`expired`, `method_override`, `origin`), never a value. */
  readonly reason?: string | undefined
  /**
   * On forward-auth: the original request a trusted proxy named: its method and URL as the rules
   * judged them (the canonical path, query names only), and, for what could not be told, what the
   * proxy sent (`sent`: `name: value` of each header, `; `-separated, query names only).
   */
  readonly original?: { readonly method: string | undefined, readonly url: string | undefined, readonly sent?: string | undefined } | undefined
  /**
   * On forward-auth's 401 and at /oauth/login/: `refused` when the address to return to after the
   * sign-in was not taken (another origin whose host, with its port, forwardAuth.allowedRedirectHosts
   * does not list, or no plain address), so the sign-in ends at /oauth/.
   */
  readonly returnTo?: 'refused' | undefined
}
