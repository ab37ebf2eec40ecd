// Method overrides: the `_method` field that Rails (Rack::MethodOverride), Laravel and Symfony read
// to treat a POST as the method it names, so that a rule judged on the POST also holds for the method
// the application acts on. Found in the query (`?_method=`: Laravel and Symfony read it), in a form
// body (urlencoded, or any `multipart/*`, whose parts are found by a linear scan, never a regular
// expression over the body, and named by Content-Disposition `name` or by Content-ID, as Rack does),
// in a POST without a Content-Type (Rack parses it as a form), and at the top level of a JSON body
// (Laravel reads its JSON input as the form whenever the whole Content-Type header, parameters
// included, names JSON: `text/plain; x=/json` too, and a form whose header does is read both ways).
// A field name counts in every spelling PHP reads as `_method` (cut at a NUL, a leading space
// dropped, `.` and ` ` read as `_`, and `_method[...]`; percent-decoded as PHP does, each `%XX` on
// its own) and Rack 2.2 does (`[_method]`, `_method]`). A body is read without a leading UTF-8
// byte order mark, as Express's body-parser reads it; one in a character set that could spell
// `_method` in other bytes is not read at all (the hook refuses it).
// Every value found is judged, as the upper case the frameworks compare; a value that is no method
// token is a method that cannot be told, which `allow` rules refuse (rules.ts).
import type { Identity } from '../session/record.js'
import type { RuleLists } from '../config/types.js'
import { phpDecode } from '../config/path-fold.js'
import { multipartBoundary } from './multipart-boundary.js'
import type { Judge, Judgement } from './rules.js'

/** The body kinds that may carry a `_method` field. */
export type FormKind = 'urlencoded' | 'multipart' | 'json'

const FIELD = '_method'
const TOKEN = /^[A-Z]+$/

/** Whether any `allow` or `deny` rule of `lists` names methods: only such routes look for overrides. */
export function namesMethods (lists: RuleLists): boolean {
  return [...(lists.allow ?? []), ...lists.deny].some((rule) => rule.methods.length > 0)
}

/** The media type of a Content-Type value: lower case, without parameters. */
function mediaType (contentType: string): string {
  const semicolon = contentType.indexOf(';')
  return (semicolon === -1 ? contentType : contentType.slice(0, semicolon)).trim().toLowerCase()
}

/** Laravel's isJson(): the whole Content-Type header, parameters included, contains `/json` or `+json`. */
function namesJson (contentType: string | undefined): boolean {
  const header = contentType?.toLowerCase() ?? ''
  return header.includes('/json') || header.includes('+json')
}

/**
 * The kind of a POST body an application may read `_method` from, or undefined when none reads it
 * (the body then streams on unread). No Content-Type at all is a form to Rack.
 */
export function formKind (contentType: string | undefined): FormKind | undefined {
  if (contentType === undefined || contentType.trim() === '') return 'urlencoded'
  const type = mediaType(contentType)
  if (type === 'application/x-www-form-urlencoded') return 'urlencoded'
  if (type.startsWith('multipart/')) return 'multipart'
  if (namesJson(contentType)) return 'json'
  return undefined
}

/** Whether a form field name is read as `_method` by one of the frameworks (see the header). */
export function isOverrideField (name: string): boolean {
  // PHP reads a name as a C string: what follows a NUL is not part of it.
  let folded = name.split('\0', 1)[0]!.replace(/^ +/, '')
  const bracket = folded.indexOf('[')
  if (bracket !== -1) folded = folded.slice(0, bracket)
  return folded.replace(/[. ]/g, '_') === FIELD || rackKey(name) === FIELD || qsKey(name) === FIELD
}

/**
 * The key qs (Express's `urlencoded({ extended: true })`, body-parser 1's default) stores a field
 * under when its name starts with a bracket: the first `[...]` segment's content, whatever follows
 * (`[_method]x` and `[_method][]` are `_method` there, a string or a list whose first value
 * method-override takes).
 */
function qsKey (name: string): string | undefined {
  if (name[0] !== '[') return undefined
  const close = name.indexOf(']')
  return close === -1 ? undefined : name.slice(1, close)
}

/**
 * The key Rack 2.2 stores a field named `name` under when it names no nested or list value
 * (query_parser.rb normalize_params: `\A[\[\]]*([^\[\]]+)\]*` and nothing after the match): leading
 * brackets and trailing `]` dropped, so `[_method]`, `_method]` and `]_method` are `_method` there.
 * A scan, not that expression.
 */
function rackKey (name: string): string | undefined {
  let start = 0
  while (name[start] === '[' || name[start] === ']') start++
  let end = start
  while (end < name.length && name[end] !== '[' && name[end] !== ']') end++
  for (let at = end; at < name.length; at++) if (name[at] !== ']') return undefined
  return end > start ? name.slice(start, end) : undefined
}

/** The method a `_method` value names: upper case, or undefined (cannot be told) when it is no method token. */
export function overrideMethod (value: string): string | undefined {
  const method = value.toUpperCase()
  return TOKEN.test(method) ? method : undefined
}

/** Percent-decoding as form parsers do (`+` is a space); text that is not valid percent-encoding stays as it is. */
function formDecode (text: string): string {
  const spaced = text.replaceAll('+', ' ')
  try {
    return decodeURIComponent(spaced)
  } catch {
    return spaced
  }
}

/**
 * The values of `_method` fields in urlencoded text (a query, or a body), split at `&` and at `;`
 * (Rack 2 splits at both). Empty values name nothing, as in every framework.
 */
function urlencodedValues (text: string): string[] {
  const values: string[] = []
  for (const pair of text.split(/[&;]/)) {
    const equals = pair.indexOf('=')
    const name = pair.slice(0, equals)
    if (equals === -1 || !(isOverrideField(formDecode(name)) || isOverrideField(phpDecode(name)))) continue
    const value = formDecode(pair.slice(equals + 1))
    if (value !== '') values.push(value)
  }
  return values
}

/** The methods named by `?_method=` in a canonical request target (undefined: a value that is no method). */
export function queryOverrides (target: string): Array<string | undefined> {
  const query = target.indexOf('?')
  return query === -1 ? [] : urlencodedValues(target.slice(query + 1)).map(overrideMethod)
}

/** How far an RFC 5987 `name*` value is read: no real field name is longer. */
const EXTENDED_MAX = 256
/** The parts of a multipart body looked at: Rack's own limit (multipart_total_part_limit). */
const PARTS_MAX = 4096
/** What ends an RFC 5987 value (its charset and language are set off by `'`: not an end). */
const EXTENDED_END = new Set(['"', '[', ';', ' ', '\t', '\r', '\n'])
/** What may follow `_method` in a name a framework reads as `_method` (PHP cuts at a NUL). */
const NAME_END = new Set([...EXTENDED_END, ']', '\'', '\v', '\f', '\0'])
/** What PHP's multipart parser skips around a parameter's `=` and value (C's isspace): a folded line too. */
const BLANK = new Set([' ', '\t', '\r', '\n', '\v', '\f'])

/** The index of the first character at or after `at` that is not a space or tab. */
function skipSpaces (text: string, at: number): number {
  while (text[at] === ' ' || text[at] === '\t') at++
  return at
}

/** The index of the first character at or after `at` that is not {@link BLANK}. */
function skipBlank (text: string, at: number): number {
  while (BLANK.has(text[at] ?? '')) at++
  return at
}

/** Where an RFC 5987 value starting at `at` ends (`;`, white space, or {@link EXTENDED_MAX} on). */
function extendedEnd (headers: string, at: number): number {
  const limit = Math.min(headers.length, at + EXTENDED_MAX)
  let end = at
  while (end < limit && !EXTENDED_END.has(headers[end]!)) end++
  return end
}

/**
 * Whether the parameter whose name ends at `at` (just after `name`) is `=` a value a framework reads
 * as `_method`: in double or single quotes or none (PHP takes either), white space of any kind
 * around `=` and the value (PHP skips it, a folded line too), `.` or ` ` for `_`, then its end, `[`
 * or a NUL (PHP cuts the name there); `name*` (RFC 5987) decoded. `next`: where the scan for the next parameter goes on (past an RFC 5987
 * value, so that no stretch is read twice: the scan of a header block stays linear).
 */
function overrideAt (headers: string, at: number): { found: boolean, next: number } {
  const extended = headers[at] === '*'
  let index = skipBlank(headers, extended ? at + 1 : at)
  if (headers[index] !== '=') return { found: false, next: at }
  index = skipBlank(headers, index + 1)
  if (extended) {
    const end = extendedEnd(headers, index)
    const value = headers.slice(index, end)
    return { found: isOverrideField(formDecode(value.slice(value.lastIndexOf("'") + 1))), next: end }
  }
  // Rack unescapes a quoted name's quoted-pairs (`"\\_method"` is `_method` to it): read so too.
  if (headers[index] === '"' && quotedIsOverride(headers, index + 1)) return { found: true, next: at }
  if (headers[index] === '"' || headers[index] === '\'') index = skipBlank(headers, index + 1)
  // Rack 2.2 drops a name's leading brackets (rackKey).
  while (headers[index] === '[' || headers[index] === ']') index++
  const word = headers.slice(index, index + FIELD.length)
  const after = headers[index + FIELD.length]
  return { found: word.replace(/[. ]/g, '_') === FIELD && (after === undefined || NAME_END.has(after)), next: at }
}

/**
 * Whether the quoted string from `at` (just after its `"`), its quoted-pairs unescaped as Rack
 * does (`\\x` is `x`), names `_method`: read to its closing quote, its line's end or
 * {@link EXTENDED_MAX} characters on.
 */
function quotedIsOverride (headers: string, at: number): boolean {
  const limit = Math.min(headers.length, at + EXTENDED_MAX)
  let name = ''
  for (let index = at; index < limit; index++) {
    const char = headers[index]!
    if (char === '"' || char === '\r' || char === '\n') break
    if (char === '\\' && index + 1 < limit) name += headers[++index]
    else name += char
  }
  return isOverrideField(name)
}

/** Whether the Content-ID value from `at` (white space skipped, to its line's end) is `_method`, with or without `<>`. */
function idIsOverride (headers: string, at: number): boolean {
  while (/\s/.test(headers[at] ?? '')) at++
  const end = headers.indexOf('\n', at)
  let value = headers.slice(at, end === -1 ? headers.length : end).trim()
  if (value.startsWith('<') && value.endsWith('>')) value = value.slice(1, -1).trim()
  return isOverrideField(value)
}

/**
 * Whether a part's Content-ID names it `_method`: Rack names a part without a Content-Disposition
 * `name` by it (its first `Content-ID:` anywhere in the block); a Content-ID header on any line
 * counts too. Each line is read at most twice: linear.
 */
function idNamesOverride (headers: string, lower: string): boolean {
  const first = lower.indexOf('content-id:')
  if (first !== -1 && idIsOverride(headers, first + 'content-id:'.length)) return true
  for (let line = 0; line !== -1;) {
    const at = skipSpaces(lower, line)
    const newline = lower.indexOf('\n', line)
    line = newline === -1 ? -1 : newline + 1
    if (!lower.startsWith('content-id', at)) continue
    const colon = skipSpaces(lower, at + 'content-id'.length)
    if (lower[colon] === ':' && idIsOverride(headers, colon + 1)) return true
  }
  return false
}

/**
 * Whether a part's header block names it `_method`: its Content-ID ({@link idNamesOverride}), or
 * any `name` parameter in it, in any header and whatever stands before it (a `filename="x; name=y"`
 * cannot hide the real one), but a `filename`.
 */
function namesOverride (headers: string): boolean {
  const lower = headers.toLowerCase()
  if (idNamesOverride(headers, lower)) return true
  for (let at = lower.indexOf('name'); at !== -1;) {
    // `filename` (and any other parameter ending in `name`) is not the field's name.
    const { found, next } = /[a-z0-9_-]/.test(lower[at - 1] ?? ' ') ? { found: false, next: at + 4 } : overrideAt(headers, at + 4)
    if (found) return true
    at = lower.indexOf('name', Math.max(next, at + 4))
  }
  return false
}

/**
 * The value of a multipart part (its bytes after the boundary) if its header block names it
 * `_method`, read both where PHP ends the block, at the first empty line (`\n\n`, or `\n\r\n`:
 * in `\r\n\r\n`, and alone), and where Rack does, at the first `\r\n\r\n` only (a bare `\n\n`
 * before it is inside Rack's block). At most two values; each reading is one pass.
 */
function partValues (part: Buffer): string[] {
  const lf = part.indexOf('\n\n')
  const crlf = part.indexOf('\n\r\n')
  const php = lf !== -1 && (crlf === -1 || lf < crlf) ? { end: lf, skip: 2 } : { end: crlf, skip: 3 }
  const at = part.indexOf('\r\n\r\n')
  // In `\r\n\r\n`, PHP's empty line is its `\n\r\n`, a byte on: the same block and value as Rack's.
  const readings = at === -1 || at + 1 === php.end ? [php] : [php, { end: at, skip: 4 }]
  return readings.filter(({ end }) => end !== -1 && namesOverride(part.subarray(0, end).toString('latin1')))
    .map(({ end, skip }) => part.subarray(end + skip).toString('utf8').replace(/\r?\n$/, ''))
}

/**
 * The values of `_method` parts of a multipart body, with the one boundary every parser reads (a
 * Content-Type they read differently is refused: multipart-boundary.ts). Every `--boundary` starts a
 * part wherever it stands (more parts than a strict parser finds only means more is judged); a part's
 * headers end at its first empty line. Buffer.indexOf over a boundary of bounded length: linear in the body.
 */
function multipartValues (body: Buffer, contentType: string): Array<string | undefined> {
  const boundary = multipartBoundary(contentType)
  if (boundary === undefined) return []
  const delimiter = Buffer.from(`--${boundary}`, 'latin1')
  const values: Array<string | undefined> = []
  let parts = 0
  for (let at = body.indexOf(delimiter); at !== -1;) {
    // Rack refuses a body of more parts (multipart_total_part_limit): past it, what an application reads cannot be told.
    if (++parts > PARTS_MAX) return [...values, undefined]
    const start = at + delimiter.length
    const next = body.indexOf(delimiter, start)
    const part = body.subarray(start, next === -1 ? body.length : next)
    values.push(...partValues(part))
    at = next
  }
  return values
}

/** A JSON body's top-level `_method`, when it is an object that has one: a value that is no string names no method that can be told. */
function jsonOverrides (body: Buffer): Array<string | undefined> {
  let parsed: unknown
  try {
    parsed = JSON.parse(withoutBom(body).toString('utf8'))
  } catch {
    return []
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed) || !Object.hasOwn(parsed, FIELD)) return []
  const value = (parsed as Record<string, unknown>)[FIELD]
  if (value === '' || value === null) return []
  return [typeof value === 'string' ? overrideMethod(value) : undefined]
}

const BOM = Buffer.from([0xef, 0xbb, 0xbf])

/** `body` without a leading UTF-8 byte order mark, which Express's body-parser drops before it parses (iconv-lite). */
function withoutBom (body: Buffer): Buffer {
  return body.subarray(0, 3).equals(BOM) ? body.subarray(3) : body
}

/** The character sets in which `_method` is the same bytes as in UTF-8 (body-parser reads urlencoded bodies in the first and last only). */
const ASCII_CHARSETS = new Set(['utf-8', 'utf8', 'us-ascii', 'ascii', 'iso-8859-1', 'latin1'])

/**
 * The `charset` a form or JSON body's Content-Type names, when it is one in which an application
 * could read `_method` from other bytes than the gateway does (Express's body-parser decodes a JSON
 * body in any UTF: `{"+AF8-method":"DELETE"}` in UTF-7 is `{"_method":"DELETE"}` to it); undefined
 * when it names none or one of {@link ASCII_CHARSETS}.
 */
export function unreadCharset (contentType: string | undefined): string | undefined {
  for (const parameter of (contentType ?? '').split(';').slice(1)) {
    const equals = parameter.indexOf('=')
    if (equals === -1 || parameter.slice(0, equals).trim().toLowerCase() !== 'charset') continue
    const charset = parameter.slice(equals + 1).trim().replace(/^"(.*)"$/, '$1').toLowerCase()
    if (!ASCII_CHARSETS.has(charset)) return charset
  }
  return undefined
}

/** The methods a POST body of `kind` names in `_method` fields (undefined: a value that is no method). */
export function bodyOverrides (kind: FormKind, body: Buffer, contentType: string | undefined): Array<string | undefined> {
  if (kind === 'json') return jsonOverrides(body)
  const values = kind === 'urlencoded' ? urlencodedValues(withoutBom(body).toString('utf8')) : multipartValues(body, contentType ?? '')
  const named = values.filter((value) => value !== '').map((value) => value === undefined ? undefined : overrideMethod(value))
  // A form whose header also names JSON (`; x=+json`): Laravel reads it as JSON.
  return namesJson(contentType) ? [...named, ...jsonOverrides(body)] : named
}

/**
 * The first refusal of `judge` for any of the override `methods` on `target` from `address` (signed in at `provider`), or undefined when the
 * rules admit each of them (the request's own method was judged before).
 */
export function forbiddenOverride (judge: Judge, identity: Identity | undefined, target: string, address: string | undefined, methods: ReadonlyArray<string | undefined>, provider?: string): (Judgement & { readonly method: string | undefined }) | undefined {
  for (const method of new Set(methods)) {
    const judgement = judge(identity, method, target, address, provider)
    if (!judgement.admit) return { ...judgement, method }
  }
  return undefined
}
