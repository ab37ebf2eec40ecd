// The one catalogue of public error codes: wire code, HTTP status and the plain-language text a
// person sees. The error table of docs/errors.md is checked against this table by test/http/errors.test.ts.

/** Every error the gateway answers with, as in docs/errors.md's error table. */
export const ERRORS = {
  unknown_provider: {
    status: 404,
    title: 'Unknown sign-in provider',
    explanation: 'This address names a sign-in provider that this gateway does not know.',
  },
  invalid_state: {
    status: 400,
    title: 'This link cannot be used',
    explanation: 'This sign-in link has expired or was already used; start again.',
  },
  access_denied: {
    status: 403,
    title: 'Access was not granted',
    explanation: 'The sign-in provider did not grant access. Sign in again if you want to retry.',
  },
  invalid_request: {
    status: 400,
    title: 'Invalid request',
    explanation: 'The request was missing something the gateway needs.',
  },
  uri_too_long: {
    status: 414,
    title: 'Address too long',
    explanation: 'The address of this request is longer than the gateway accepts (8 KiB).',
  },
  payload_too_large: {
    status: 413,
    title: 'Request too large',
    explanation: 'This request\'s body is larger than this address accepts.',
  },
  unsupported_media_type: {
    status: 415,
    title: 'Body not accepted in this form',
    explanation: 'This address reads the request body to check it, and cannot read it compressed or in this character set; send it uncompressed, in UTF-8.',
  },
  token_exchange_failed: {
    status: 502,
    title: 'Sign-in provider did not answer as expected',
    explanation: 'The sign-in provider did not complete the sign-in as expected. Please try again.',
  },
  session_store_unavailable: {
    status: 503,
    title: 'Service temporarily unavailable',
    explanation: 'The gateway cannot reach its session store right now. Please try again shortly.',
  },
  issuer_keys_unavailable: {
    status: 503,
    title: 'Access token cannot be checked yet',
    explanation: 'The gateway cannot read the keys of this access token\'s issuer right now. Keep the token and try again shortly.',
  },
  bad_gateway: {
    status: 502,
    title: 'Application unreachable',
    explanation: 'The application behind this gateway could not be reached.',
  },
  gateway_timeout: {
    status: 504,
    title: 'Application timed out',
    explanation: 'The application behind this gateway did not answer in time.',
  },
  provider_unavailable: {
    status: 502,
    title: 'Sign-in provider unavailable',
    explanation: 'The gateway could not read the sign-in provider\'s configuration. Please try again shortly.',
  },
  shutting_down: {
    status: 503,
    title: 'Gateway restarting',
    explanation: 'This gateway is shutting down. Please try again in a moment.',
  },
  rate_limited: {
    status: 429,
    title: 'Too many sign-in attempts',
    explanation: 'This address has started too many sign-ins in a short time. Please wait a moment and try again.',
  },
  forbidden: {
    status: 403,
    title: 'Not allowed',
    explanation: 'You are signed in, but this application is not open to your account. Sign in with another account if you have one.',
  },
  unauthenticated: {
    status: 401,
    title: 'Sign-in required',
    explanation: 'You need to sign in to reach this page.',
  },
  insufficient_user_authentication: {
    status: 401,
    title: 'A more recent sign-in is needed',
    explanation: 'This page needs a more recent (or stronger) sign-in than your session has. Sign in again to continue.',
  },
  invalid_token: {
    status: 401,
    title: 'Access token refused',
    explanation: 'The access token sent with this request is not accepted here: get a new one from the issuer and try again.',
  },
  insufficient_scope: {
    status: 403,
    title: 'Access token lacks a scope',
    explanation: 'The access token sent with this request is valid but lacks a scope this resource requires.',
  },
  not_found: {
    status: 404,
    title: 'Not found',
    explanation: 'Nothing is served at this address.',
  },
  internal_error: {
    status: 500,
    title: 'Something went wrong',
    explanation: 'The gateway hit an unexpected problem. It has been logged.',
  },
} as const

export type ErrorCode = keyof typeof ERRORS

/** Extra fields some errors carry into the JSON body and the HTML page. */
export interface ErrorDetails {
  /** Where a person can start the sign-in over (absolute URL). */
  loginUrl?: string
  /** On a route with several providers: each one's sign-in address (the JSON body's `login_urls`). */
  loginUrls?: Record<string, string>
  /** Where a person can simply try again (the same address), when signing in again would not help. */
  retryUrl?: string
  /**
   * On 403 `forbidden` from a route's rules: what the gateway saw of the person and which rule
   * refused, for the page and the JSON body.
   */
  refused?: Refused
  /**
   * Where "Use another account" goes (a POST: it signs out, then signs in again with the provider
   * asked to let the person choose the account).
   */
  switchAccountUrl?: string
  /**
   * On a sign-in's `invalid_state`: the `next` read back from a state this gateway signed (and
   * checked with safeNext when it did), so "Start again" can go back toward it; absent when the
   * state could not be read as the gateway's own.
   */
  flowNext?: string
  /** On a sign-in's `invalid_state`: the state was this browser's own and had been used (a Back or a reload of the callback). */
  stateUsed?: boolean
  /** Extra response headers (e.g. WWW-Authenticate). */
  headers?: Record<string, string>
  /**
   * The `decision` and `reason` the log line of this refusal says (src/ops/audit.ts): in place of
   * the access hook's `allow` when it comes after it (a websocket whose token ended on the way), or
   * where nobody was judged yet (a websocket from another site's page). Without it, a refusal after
   * `allow` is logged by its status (http/error-handler.ts).
   */
  audit?: { readonly decision: string, readonly reason: string }
  /**
   * A failure outside the gateway that it expects (an upstream or a provider down or slow): logged
   * as this one warn line instead of an error line with the cause; at debug where the outage
   * itself is logged once elsewhere (a provider's keys: oauth/issuer-keys.ts; a refresh that failed
   * just now), so that it is not buried under a line per request.
   */
  log?: { msg: string, fields: Record<string, unknown>, level?: 'debug' }
}

/** What a refusing rule saw of the signed-in person: their own identity, never the rule's values. */
export interface Refused {
  /** The identity the rules were asked about; undefined when the session held none. */
  readonly seen: {
    readonly user: string
    readonly email: string | undefined
    /** false only when the provider said the e-mail address is not verified. */
    readonly emailVerified: boolean
    readonly groups: readonly string[]
  } | undefined
  /** The refusing rule's name (`deny[0]`); undefined: no `allow` rule matched. */
  readonly rule: string | undefined
  /** On a route with several providers: the one the person signed in with, as judged. */
  readonly provider?: string | undefined
  /** The client address the rules judged (`networks` conditions), when it was told. */
  readonly address?: string | undefined
  /** The refusing rule names `networks`: where the request came from refused it. */
  readonly byNetwork?: boolean
  /**
   * Only this request was refused (its method and path): the person would pass another request of
   * the route, so another account is not offered.
   */
  readonly refusedFor?: { readonly method: string, readonly path: string }
}

/**
 * An error with a public code. `message` is safe to show to the client; `cause` goes to the log
 * only.
 */
export class GatewayError extends Error {
  readonly code: ErrorCode
  readonly statusCode: number
  readonly details: ErrorDetails

  /** `status` overrides the catalogue's status (only for Fastify's own 4xx errors). */
  constructor (code: ErrorCode, message: string, options: { cause?: unknown, details?: ErrorDetails, status?: number } = {}) {
    super(message, { cause: options.cause })
    this.name = 'GatewayError'
    this.code = code
    this.statusCode = options.status ?? ERRORS[code].status
    this.details = options.details ?? {}
  }
}

/**
 * `error` with what one request adds to it (its own addresses, its log line) where the error has
 * none, on a copy: one failure may be shared by many requests (a provider's discovery, answered
 * alike for seconds; a refresh waited on), and one request's address written into it was every
 * other's "Try again", another person's `next` path among them (a re-reader's finding).
 */
export function withOwn (error: GatewayError, own: ErrorDetails): GatewayError {
  const held = Object.fromEntries(Object.entries(error.details).filter(([, value]) => value !== undefined))
  return new GatewayError(error.code, error.message, { cause: error.cause, status: error.statusCode, details: { ...own, ...held } })
}

/**
 * A failure one request's question met (a refresh, a userinfo or introspection answer), as thrown to
 * another request that waited on the same question: a copy, its line at debug, since the asking
 * request's line said it once (a re-reader's findings: a page's parallel requests each wrote the
 * one refresh's warn line, and one failed userinfo answer was 8 error lines).
 */
export function waitedOn (error: unknown): unknown {
  if (!(error instanceof GatewayError)) return error
  const copy = withOwn(error, {})
  copy.details.log = { ...(error.details.log ?? { msg: 'request failed: it waited on another request\'s question, which failed', fields: {} }), level: 'debug' }
  return copy
}

export function isGatewayError (error: unknown): error is GatewayError {
  return error instanceof GatewayError
}

/**
 * The store failure `error` is, or wraps (oidc-provider's exposed answer to one:
 * agents/store-adapter.ts), else undefined: where the gateway itself meets it, it is answered as the
 * store's 503, never as a 500 or an authorization to start over.
 */
export function storeFailureIn (error: unknown): GatewayError | undefined {
  const failure = isGatewayError(error) ? error : (error as { cause?: unknown } | null | undefined)?.cause
  return isGatewayError(failure) && failure.code === 'session_store_unavailable' ? failure : undefined
}

/** The cause's identifying fields only: library errors may carry bodies with tokens in them. */
export function describeCause (cause: unknown): Record<string, unknown> | undefined {
  if (!(cause instanceof Error)) return undefined
  // `errno`: the library's error code (ECONNREFUSED, UND_ERR_...), named apart from OAuth's `code`.
  const { code } = cause as { code?: unknown }
  // A JSON parse error quotes the text around its fault: a provider's answer that is not JSON (a
  // code or token in it) would reach the log in pieces (an outside tester's finding).
  const message = cause instanceof SyntaxError ? 'the text is not valid JSON (its message, which quotes the text, is left out)' : cause.message
  // The status of an HTTP answer the library did not want: oauth4webapi gives the answer as the
  // cause, or, for an OAuth error in its body, the status itself.
  const own = (cause as { status?: unknown }).status
  const status = cause.cause instanceof Response ? cause.cause.status : typeof own === 'number' ? own : undefined
  // A DOMException's `code` is its legacy number (23 for a TimeoutError), no library's error code.
  return { type: cause.name, message, errno: typeof code === 'string' ? code : undefined, status, cause: describeCause(cause.cause) }
}

/**
 * Messages used at more than one place, written once here. The provider name comes from the
 * address, so at most 64 characters of it are echoed.
 */
export const MESSAGES = {
  /** A sign-in's `state` that does not pass, in words a person reads; which check failed goes to the log (the cause). */
  staleSignIn: 'This sign-in link has expired or was already used; start again.',
  /** A sign-in's return without any `state` (someone opened the address itself): nothing expired. */
  noSignIn: 'This address finishes a sign-in, and works only when the sign-in provider sends you here; start again.',
  /** The same for a sign-out's return from a provider: the home page shows whether the person is still signed in. */
  staleSignOut: 'This sign-out link has expired or was already used; start again.',
  unknownProvider: (name: string) => `No provider named "${name.slice(0, 64)}" is configured.`,
} as const

/** 404 `unknown_provider`: the address names a provider the config does not. */
export function unknownProvider (name: string): GatewayError {
  return new GatewayError('unknown_provider', MESSAGES.unknownProvider(name))
}
