// The boundary of a multipart body, as every common parser reads it from the Content-Type: the
// `_method` scan (method-override.ts) must find each part the application finds, and parsers do not
// agree on a boundary the client spelled oddly. The readings: RFC 2046/7578's (a token, or a quoted
// string, that is the whole value of a `boundary` parameter; the first and the last such parameter, as parsers that keep the
// first or overwrite with a later one read them), a lenient split at `;` with the quotes dropped
// (Python's email parser, the gateway's old reading), Rack 2.2's
// (`/\Amultipart\/.*boundary=\"?([^\";,]+)\"?/ni`: the last `boundary=` anywhere, cut at `"`, `;`
// or `,`) and PHP 8's (the first `boundary` anywhere, its next `=`, then up to the closing quote or a
// `,` or `;`). When they name more than one boundary, the request is refused rather than guessed at.
// Every reading is a single pass over the value: no regular expression runs on it.
import { GatewayError } from '../errors.js'

/** RFC 9110 tchar: what an unquoted parameter value is made of. */
const TCHAR = /^[!#$%&'*+.^_`|~0-9A-Za-z-]$/

/** The raw text of each `boundary` parameter (split at `;`, name trimmed and case-folded). */
function boundaryParameters (contentType: string): string[] {
  const values: string[] = []
  for (const part of contentType.split(';').slice(1)) {
    const equals = part.indexOf('=')
    if (equals !== -1 && part.slice(0, equals).trim().toLowerCase() === 'boundary') values.push(part.slice(equals + 1).trim())
  }
  return values
}

/**
 * A parameter value as RFC 9110 reads it: a token, or a quoted string, and nothing after it (a
 * strict parser, as Go's or busboy's, reads no boundary from anything else: undefined).
 */
function strictValue (raw: string): string | undefined {
  if (!raw.startsWith('"')) {
    for (const char of raw) if (!TCHAR.test(char)) return undefined
    return raw
  }
  let value = ''
  for (let at = 1; at < raw.length; at++) {
    if (raw[at] === '"') return at === raw.length - 1 ? value : undefined
    if (raw[at] === '\\') at++
    value += raw[at] ?? ''
  }
  return undefined
}

/** A parameter value with one pair of surrounding quotes dropped, as a lenient parser reads it. */
function lenientValue (raw: string): string {
  return raw.length > 1 && raw.startsWith('"') && raw.endsWith('"') ? raw.slice(1, -1) : raw
}

/** Rack 2.2's boundary: the last `boundary=` (after `multipart/`) followed by an optional quote and text up to `"`, `;` or `,`. */
function rackBoundary (contentType: string): string | undefined {
  const lower = contentType.toLowerCase()
  if (!lower.startsWith('multipart/')) return undefined
  // Each `boundary=` that fails does so at its first character: the walk back stays linear.
  for (let at = lower.lastIndexOf('boundary='); at >= 'multipart/'.length; at = at === 0 ? -1 : lower.lastIndexOf('boundary=', at - 1)) {
    let start = at + 'boundary='.length
    if (contentType[start] === '"') start++
    let end = start
    while (end < contentType.length && !'";,'.includes(contentType[end]!)) end++
    if (end > start) return contentType.slice(start, end)
  }
  return undefined
}

/** PHP 8's boundary (main/rfc1867.c): the first `boundary` (exact case first), its next `=`, then a quoted value or text up to `,` or `;`. */
function phpBoundary (contentType: string): string | undefined {
  const exact = contentType.indexOf('boundary')
  const at = exact !== -1 ? exact : contentType.toLowerCase().indexOf('boundary')
  const equals = at === -1 ? -1 : contentType.indexOf('=', at)
  if (equals === -1) return undefined
  const value = contentType.slice(equals + 1)
  if (value.startsWith('"')) {
    const close = value.indexOf('"', 1)
    return close === -1 ? undefined : value.slice(1, close)
  }
  const cut = value.search(/[,;]/)
  return cut === -1 ? value : value.slice(0, cut)
}

/** Every boundary a common parser could read from `contentType` (empty ones, which no parser uses, left out). */
export function boundaryReadings (contentType: string): Set<string> {
  const parameters = boundaryParameters(contentType)
  const ends = parameters.length === 0 ? [] : [parameters[0]!, parameters.at(-1)!]
  const readings = [...ends.map(strictValue), ...ends.map(lenientValue), rackBoundary(contentType), phpBoundary(contentType)]
  return new Set(readings.filter((reading): reading is string => reading !== undefined && reading !== ''))
}

/**
 * The one boundary every common parser reads from a multipart Content-Type, or undefined when none
 * reads any. Throws 400 `invalid_request` when they read more than one.
 */
export function multipartBoundary (contentType: string): string | undefined {
  const readings = boundaryReadings(contentType)
  if (readings.size > 1) {
    throw new GatewayError('invalid_request', 'The request cannot be served: the multipart boundary is ambiguous (its Content-Type names a boundary that parsers read differently); send one `boundary` parameter, a token or a quoted string.')
  }
  return readings.values().next().value
}
