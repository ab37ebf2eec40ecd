// The building blocks of gateway.yaml's schema (schema.ts): durations, sizes, flags, lists and
// patterns, each carrying the `expected` phrase --check uses and the default ajv fills in.
import Type, { type TSchema } from 'typebox'

/** `300` (seconds), `300s`, `5m`, `8h`, `1d`, `250ms`. */
export const DURATION_PATTERN = '^\\s*\\d+(?:\\.\\d+)?\\s*(?:ms|s|m|h|d)?\\s*$'
export const DURATION_EXPECTED = 'a duration such as 300, 300s, 5m or 8h'

/** A schema node with a `default`, which ajv fills in where the key is missing (see `Filled`). */
export interface Defaulted {
  default: unknown
}

/** Marks a node that has a `default` for the type checker (`Filled`); throws when it has none. */
export function filled<T extends TSchema> (node: T): T & Defaulted {
  if (!('default' in node)) throw new Error('schema.ts: filled() is given a node without a default')
  return node as T & Defaulted
}

/** A duration (a number of seconds or a string with a unit); its range is checked in validate.ts. */
export function Duration (description: string, fallback: string) {
  return filled(Type.Optional(Type.Unsafe<string | number>({
    type: ['string', 'number'], pattern: DURATION_PATTERN, minimum: 0, default: fallback, description, expected: DURATION_EXPECTED,
  })))
}

/** `1048576` (bytes), `64KiB`, `1MiB`, `1.5MB`: see units.ts's parseSize. */
export const SIZE_PATTERN = '^[ \\t]*\\d{1,16}(?:\\.\\d{1,16})?[ \\t]*(?:[KkMmGg][Ii]?[Bb]|[Bb])?[ \\t]*$'
export const SIZE_EXPECTED = 'a size such as 65536, 64KiB or 1MiB'

/** A size (a number of bytes or a string with a unit); its range is checked in validate.ts. */
export function Size (description: string, fallback: string) {
  return filled(Type.Optional(Type.Unsafe<string | number>({
    type: ['string', 'integer'], pattern: SIZE_PATTERN, minimum: 0, default: fallback, description, expected: SIZE_EXPECTED,
  })))
}

export function Text (description: string, options: Record<string, unknown> = {}) {
  return Type.Optional(Type.String({ description, ...options }))
}

export function Flag (description: string, fallback: boolean) {
  return filled(Type.Optional(Type.Boolean({ description, default: fallback })))
}

export function Strings (description: string, options: Record<string, unknown> = {}, item = Type.String({ minLength: 1 })) {
  return Type.Optional(Type.Array(item, { description, expected: 'a list of strings', ...options }))
}

/**
 * A string that must match `pattern` (ECMAScript syntax, as JSON Schema's `pattern`), phrased as
 * "must be <expected>" by --check; an editor validating against gateway.schema.json reports the
 * same values.
 */
export function Matching (pattern: string, expected: string, options: Record<string, unknown> = {}) {
  return Type.String({ pattern, expected, ...options })
}

/** `GET` in any case, as a pattern (JSON Schema patterns take no flags). */
export function anyCase (word: string): string {
  return [...word].map((c) => `[${c.toUpperCase()}${c.toLowerCase()}]`).join('')
}

/**
 * A header the gateway fills with who the user is (identity, claim and assertion headers): letters,
 * digits and `-` only. CGI, WSGI and PHP read `_` and `.` as `-`, so a client's `X-App-User` would
 * reach such an application as the same variable as a configured `X_App_User` (the gateway drops a
 * client's other spellings of `-` names).
 */
export const FILLED_HEADER = { pattern: '^[A-Za-z0-9-]+$', expected: 'a header name of letters, digits and "-" only (CGI, WSGI and PHP read "_" and "." as "-", so a client could send the same header in another spelling)' }

/** A `public` entry: `"METHOD /path/glob"` or `"METHOD *"`, METHOD a known one or `*`, in any case. */
export const PUBLIC_RULE = `^\\s*(?:\\*|${['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'].map(anyCase).join('|')})\\s+(?:\\*|/\\S*)\\s*$`

export function Section<T extends Record<string, TSchema>> (properties: T, description: string) {
  return filled(Type.Object(properties, { additionalProperties: false, description, default: {} }))
}
