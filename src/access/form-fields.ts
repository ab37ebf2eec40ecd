// Form fields as frameworks read them: a field's name in every spelling PHP, Rack 2.2 and qs
// (Express's extended urlencoded parser) read as that name, and the values of the parts of a
// multipart body named so, found by a linear scan, never a regular expression over the body, and
// named by Content-Disposition `name` or by Content-ID, as Rack does. Method overrides read
// `_method` so (method-override.ts), and a front controller's route field, Yii's `r`, so
// (routes/method-override-hook.ts).
import { multipartBoundary } from './multipart-boundary.js'
import { phpPartValues } from './php-multipart.js'

/** Percent-decoding as form parsers do (`+` is a space); text that is not valid percent-encoding stays as it is. */
export function formDecode (text: string): string {
  const spaced = text.replaceAll('+', ' ')
  try {
    return decodeURIComponent(spaced)
  } catch {
    return spaced
  }
}

/**
 * Whether a form field named `name` is read as `field` by PHP (cut at a NUL, a leading space
 * dropped, `.` and ` ` read as `_`, and `field[...]`), Rack 2.2 (`[field]`, `field]`) or qs
 * (`[field]x`).
 */
export function isField (name: string, field: string): boolean {
  // PHP reads a name as a C string: what follows a NUL is not part of it.
  let folded = name.split('\0', 1)[0]!.replace(/^ +/, '')
  const bracket = folded.indexOf('[')
  if (bracket !== -1) folded = folded.slice(0, bracket)
  return folded.replace(/[. ]/g, '_') === field || rackKey(name) === field || qsKey(name) === field
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

/** How far an RFC 5987 `name*` value is read: no real field name is longer. */
const EXTENDED_MAX = 256
/** The parts of a multipart body looked at: Rack's own limit (multipart_total_part_limit). */
const PARTS_MAX = 4096
/** What ends an RFC 5987 value (its charset and language are set off by `'`: not an end). */
const EXTENDED_END = new Set(['"', '[', ';', ' ', '\t', '\r', '\n'])
/** What may follow a field's name in a name a framework reads as that field (PHP cuts at a NUL). */
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
 * as `field`: in double or single quotes or none (PHP takes either), white space of any kind
 * around `=` and the value (PHP skips it, a folded line too), `.` or ` ` for `_`, then its end, `[`
 * or a NUL (PHP cuts the name there); `name*` (RFC 5987) decoded. `next`: where the scan for the next parameter goes on (past an RFC 5987
 * value, so that no stretch is read twice: the scan of a header block stays linear).
 */
function fieldAt (headers: string, at: number, field: string): { found: boolean, next: number } {
  const extended = headers[at] === '*'
  let index = skipBlank(headers, extended ? at + 1 : at)
  if (headers[index] !== '=') return { found: false, next: at }
  index = skipBlank(headers, index + 1)
  if (extended) {
    const end = extendedEnd(headers, index)
    const value = headers.slice(index, end)
    return { found: isField(formDecode(value.slice(value.lastIndexOf("'") + 1)), field), next: end }
  }
  // Rack unescapes a quoted name's quoted-pairs (`"\\_method"` is `_method` to it): read so too.
  if (headers[index] === '"' && quotedIsField(headers, index + 1, field)) return { found: true, next: at }
  if (headers[index] === '"' || headers[index] === '\'') index = skipBlank(headers, index + 1)
  // Rack 2.2 drops a name's leading brackets (rackKey).
  while (headers[index] === '[' || headers[index] === ']') index++
  const word = headers.slice(index, index + field.length)
  const after = headers[index + field.length]
  return { found: word.replace(/[. ]/g, '_') === field && (after === undefined || NAME_END.has(after)), next: at }
}

/**
 * Whether the quoted string from `at` (just after its `"`), its quoted-pairs unescaped as Rack
 * does (`\\x` is `x`), names `field`: read to its closing quote, its line's end or
 * {@link EXTENDED_MAX} characters on.
 */
function quotedIsField (headers: string, at: number, field: string): boolean {
  const limit = Math.min(headers.length, at + EXTENDED_MAX)
  let name = ''
  for (let index = at; index < limit; index++) {
    const char = headers[index]!
    if (char === '"' || char === '\r' || char === '\n') break
    if (char === '\\' && index + 1 < limit) name += headers[++index]
    else name += char
  }
  return isField(name, field)
}

/** Whether the Content-ID value from `at` (white space skipped, to its line's end) is `field`, with or without `<>`. */
function idIsField (headers: string, at: number, field: string): boolean {
  while (/\s/.test(headers[at] ?? '')) at++
  const end = headers.indexOf('\n', at)
  let value = headers.slice(at, end === -1 ? headers.length : end).trim()
  if (value.startsWith('<') && value.endsWith('>')) value = value.slice(1, -1).trim()
  return isField(value, field)
}

/**
 * Whether a part's Content-ID names it `field`: Rack names a part without a Content-Disposition
 * `name` by it (its first `Content-ID:` anywhere in the block); a Content-ID header on any line
 * counts too. Each line is read at most twice: linear.
 */
function idNamesField (headers: string, lower: string, field: string): boolean {
  const first = lower.indexOf('content-id:')
  if (first !== -1 && idIsField(headers, first + 'content-id:'.length, field)) return true
  for (let line = 0; line !== -1;) {
    const at = skipSpaces(lower, line)
    const newline = lower.indexOf('\n', line)
    line = newline === -1 ? -1 : newline + 1
    if (!lower.startsWith('content-id', at)) continue
    const colon = skipSpaces(lower, at + 'content-id'.length)
    if (lower[colon] === ':' && idIsField(headers, colon + 1, field)) return true
  }
  return false
}

/**
 * Whether a part's header block names it `field`: its Content-ID ({@link idNamesField}), or
 * any `name` parameter in it, in any header and whatever stands before it (a `filename="x; name=y"`
 * cannot hide the real one), but a `filename`.
 */
function namesField (headers: string, field: string): boolean {
  const lower = headers.toLowerCase()
  if (idNamesField(headers, lower, field)) return true
  for (let at = lower.indexOf('name'); at !== -1;) {
    // `filename` (and any other parameter ending in `name`) is not the field's name.
    const { found, next } = /[a-z0-9_-]/.test(lower[at - 1] ?? ' ') ? { found: false, next: at + 4 } : fieldAt(headers, at + 4, field)
    if (found) return true
    at = lower.indexOf('name', Math.max(next, at + 4))
  }
  return false
}

/**
 * The value of a multipart part (its bytes after the boundary) if its header block names it
 * `field`, read both where PHP ends the block, at the first empty line (`\n\n`, or `\n\r\n`:
 * in `\r\n\r\n`, and alone), and where Rack does, at the first `\r\n\r\n` only (a bare `\n\n`
 * before it is inside Rack's block). At most two values; each reading is one pass.
 */
function partValues (part: Buffer, field: string): string[] {
  const lf = part.indexOf('\n\n')
  const crlf = part.indexOf('\n\r\n')
  const php = lf !== -1 && (crlf === -1 || lf < crlf) ? { end: lf, skip: 2 } : { end: crlf, skip: 3 }
  const at = part.indexOf('\r\n\r\n')
  // In `\r\n\r\n`, PHP's empty line is its `\n\r\n`, a byte on: the same block and value as Rack's.
  const readings = at === -1 || at + 1 === php.end ? [php] : [php, { end: at, skip: 4 }]
  return readings.filter(({ end }) => end !== -1 && namesField(part.subarray(0, end).toString('latin1'), field))
    .map(({ end, skip }) => part.subarray(end + skip).toString('utf8').replace(/\r?\n$/, ''))
}

/**
 * The values of the parts named `field` of a multipart body, with the one boundary every parser reads (a
 * Content-Type they read differently is refused: multipart-boundary.ts). Every `--boundary` starts a
 * part wherever it stands (more parts than a strict parser finds only means more is judged); a part's
 * headers end at its first empty line. Then, besides, the values PHP reads, which it parts otherwise
 * (php-multipart.ts). Buffer.indexOf over a boundary of bounded length: linear in the body.
 */
export function multipartValues (body: Buffer, contentType: string, field: string): Array<string | undefined> {
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
    values.push(...partValues(part, field))
    at = next
  }
  // Each value once: both readings find most.
  return [...new Set([...values, ...phpPartValues(body, boundary, (headers) => namesField(headers, field), PARTS_MAX)])]
}
