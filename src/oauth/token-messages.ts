// What a refused bearer token is told, in one place: each message a `bearer:` route (or a
// forward-auth host's block) gives in its 401's `error_description` and JSON `message`, or its 403
// `insufficient_scope`. docs/machine-clients.md's troubleshooting table lists each of them with its
// cause and its fix, and test/docs/token-messages.test.ts holds the two together. `{name}` in a
// message is filled in by {@link tokenMessage}.

export const TOKEN_MESSAGES = {
  noToken: 'No token was sent: the header says "Bearer" and nothing after it.',
  placeholder: 'No token was sent: the header carries "{word}" where a token belongs, what a client sends when its token request failed.',
  malformed: 'The request names the Bearer scheme but carries no single well-formed token (Bearer <token>).',
  notWellFormed: 'The token is not a well-formed JWT.',
  claimNotValid: 'The token\'s {claim} claim is not valid.',
  notJwt: 'The token is not a JWT, and tokens are not introspected here.',
  noIntrospection: 'The token is not a JWT, and no issuer of this route advertises an introspection endpoint.',
  algorithm: 'The token\'s signing algorithm is not accepted.',
  asymmetricOnly: 'The token\'s signing algorithm is not accepted (public-key signatures only).',
  idToken: 'An ID token is not an access token.',
  securityEvent: 'A logout token (a security event) is not an access token.',
  refreshToken: 'A refresh token is not an access token.',
  senderConstrained: 'The token is bound to a key (cnf): it is only good with a proof of that key, which the Bearer scheme does not carry.',
  unknownIssuer: 'The token is not from an issuer this route accepts.',
  unknownKey: 'The token is signed with a key the issuer does not publish.',
  tooManyKeys: 'The token names no key the gateway can tell among the issuer\'s: it fits more of them than the gateway tries (4). Sign it with a kid naming one key.',
  badSignature: 'The token\'s signature does not verify.',
  noExpiry: 'The token has no expiry (exp).',
  expired: 'The token has expired.',
  notYetValid: 'The token is not valid yet (nbf).',
  inactive: 'The token is not active at its issuer.',
  userinfoRefused: 'The token is not accepted at its issuer\'s userinfo endpoint.',
  wrongSubject: 'The issuer\'s answer about the token names another subject than the token.',
  wrongAudience: 'The token is not issued for this resource (aud).',
  insufficientScope: 'The token lacks a scope this resource requires: {scopes}.',
  noSubject: 'The token names no subject the gateway can tell apart (its sub or client_id is missing, or has white space at an end).',
} as const

export type TokenMessage = keyof typeof TOKEN_MESSAGES

/** The words a client sends in place of a token it did not get (`Bearer null`: a variable never set). */
const PLACEHOLDERS = new Set(['null', 'undefined', 'None', 'nil', 'NULL', 'false'])
/** The longest of them: a real token (hundreds of characters) is never hashed for the lookup. */
const LONGEST_PLACEHOLDER = Math.max(...[...PLACEHOLDERS].map((word) => word.length))

/** `TOKEN_MESSAGES[id]` with each `{name}` replaced by `values[name]`. */
export function tokenMessage (id: TokenMessage, values: Readonly<Record<string, string>> = {}): string {
  return TOKEN_MESSAGES[id].replace(/\{(\w+)\}/g, (whole, name: string) => values[name] ?? whole)
}

/**
 * What to tell a request whose bearer credential is no token at all: the scheme alone (`token`
 * empty) or a placeholder word; undefined for anything else.
 */
export function noTokenMessage (token: string): string | undefined {
  if (token === '') return TOKEN_MESSAGES.noToken
  return token.length <= LONGEST_PLACEHOLDER && PLACEHOLDERS.has(token) ? tokenMessage('placeholder', { word: token }) : undefined
}
