// The one canonical request target (in config/ so that the edge, the rules and the config's check
// of path globs all spell paths by it). The gateway parses the request line's target once, before
// routing, and everything after (route match, `public` rules, `allow` rules, rewritePrefix, the
// path sent upstream, the `next` of a sign-in) reads that one string. Dot segments are removed
// (RFC 3986 §5.2.4) after percent-encoded `pchar` characters are decoded (unreserved, §6.2.2.2, and
// the sub-delims but `+`, `:` and `@`, which a path carries as they are), so `%2e%2e` is `..` and
// `Special%3AVersion` is `Special:Version`, as the application that decodes the path reads it; `//`
// is merged; characters outside `pchar` are percent-encoded with upper-case hex. Each character
// thus has one spelling: a rule written with one cannot be gone around with the other. `%2B` stays
// (an application that reads `+` in a path as a space, PHP's urldecode, tells the two apart): a
// `deny` glob holds on both (access/rules.ts). What an
// upstream might read as another path, and what cannot be made canonical without guessing, is
// refused instead: encoded `/`, `\`, `%` or `;`, a raw `\`, `;` segment parameters, `#`, control
// characters (raw or encoded), invalid percent-encoding or UTF-8, climbing above `/`, a target that is not a
// path, a segment that begins or ends with `..`. The result is a fixed point of WHATWG URL parsing, so the proxy's `new URL()` sends it as is.
// @see https://www.rfc-editor.org/rfc/rfc3986#section-5.2.4

/** A target that was made canonical, or why it cannot be. */
export type CanonicalTarget = { ok: true, url: string } | { ok: false, reason: string }

const enum Kind {
  /** Copied as is: unreserved and the sub-delims, `:`, `@` (RFC 3986 `pchar`) and `/`. */
  Keep,
  /** Printable ASCII outside `pchar` that browsers send raw (`"`, `<`, `|`, `{`...): percent-encoded. */
  Encode,
  /** Refused wherever it appears in the path. */
  Refuse,
}

/** How each ASCII character of a path is treated; anything above 0x7E is refused (Node already refuses raw non-ASCII). */
const PATH_KIND: Kind[] = []
for (let code = 0; code < 128; code++) {
  const c = String.fromCharCode(code)
  if (/[A-Za-z0-9\-._~!$&'()*+,=:@/]/.test(c)) PATH_KIND[code] = Kind.Keep
  else if (code > 0x20 && code < 0x7f && !'\\;#%?'.includes(c)) PATH_KIND[code] = Kind.Encode
  else PATH_KIND[code] = Kind.Refuse
}

/**
 * Whether each ASCII character is decoded when percent-encoded: `pchar` but `/` and `+` (RFC 3986's
 * unreserved, sub-delims, `:` and `@`), the characters the path keeps as they are. A table, so no
 * pattern runs per byte.
 */
const DECODED: boolean[] = []
for (let code = 0; code < 128; code++) DECODED[code] = code !== 47 && code !== 43 && PATH_KIND[code] === Kind.Keep

/** Characters WHATWG's query state percent-encodes for http(s) URLs; encoded here so the query is stable too. */
const QUERY_ENCODE = new Set(['"', '<', '>', '\'', ' ', '`'])

const HEX = '0123456789ABCDEF'

function hexValue (code: number): number {
  if (code >= 48 && code <= 57) return code - 48
  if (code >= 65 && code <= 70) return code - 55
  if (code >= 97 && code <= 102) return code - 87
  return -1
}

function encodeByte (byte: number): string {
  return `%${HEX[byte >> 4]!}${HEX[byte & 15]!}`
}

const refuse = (reason: string): CanonicalTarget => ({ ok: false, reason })

/**
 * The canonical form of a request target (origin-form: path and query), or why it is refused.
 * The path decides access and is what the upstream receives; the query is kept, with invalid
 * percent-encoding and control characters refused and WHATWG's query characters encoded.
 */
export function canonicalTarget (raw: string): CanonicalTarget {
  if (raw.charCodeAt(0) !== 47 /* / */) return refuse('the request target must be a path starting with /')
  const queryStart = raw.indexOf('?')
  const rawPath = queryStart === -1 ? raw : raw.slice(0, queryStart)
  const path = canonicalPath(rawPath)
  if (typeof path !== 'string') return path
  if (queryStart === -1) return { ok: true, url: path }
  const query = canonicalQuery(raw.slice(queryStart + 1))
  if (typeof query !== 'string') return query
  return { ok: true, url: `${path}?${query}` }
}

/**
 * A route's `path` (or a prefix of it) in the edge's spelling: the canonical request path it
 * matches (`/café` is `/caf%C3%A9`, `/a"b` is `/a%22b`); the path as written when it has none.
 */
export function requestSpelling (path: string): string {
  if (path === '' || path === '/') return path
  const target = configuredTarget(path)
  return target.ok ? target.url : path
}

/** canonicalTarget of a path written in the config, whose non-ASCII characters are written as they are (`/café`). */
export function configuredTarget (path: string): CanonicalTarget {
  return canonicalTarget(path.replace(/[^\p{ASCII}]+/gu, encodeURIComponent))
}

/** The path's segments decoded where safe, then dot segments removed and empty segments merged. */
function canonicalPath (raw: string): string | CanonicalTarget {
  let text = ''
  // Fast path: nothing to decode, encode, merge or remove — the common case on the hot path.
  let plain = true
  let nonAscii = false
  for (let i = 0; i < raw.length; i++) {
    const code = raw.charCodeAt(i)
    const kind = code < 128 ? PATH_KIND[code] : Kind.Refuse
    if (code === 37 /* % */) {
      const byte = encodedByte(raw, i)
      if (typeof byte !== 'number') return byte
      if (byte >= 0x80) nonAscii = true
      text += byte < 128 && DECODED[byte] === true ? String.fromCharCode(byte) : encodeByte(byte)
      plain = false
      i += 2
    } else if (kind === Kind.Keep) {
      text += raw[i]
      // A `.` right after a `/`, or `//`, may start a dot segment or an empty one.
      if ((code === 46 /* . */ || code === 47 /* / */) && raw.charCodeAt(i - 1) === 47) plain = false
    } else if (kind === Kind.Encode) {
      text += encodeByte(code)
      plain = false
    } else {
      return refusedCharacter(code)
    }
  }
  // Encoded bytes above 0x7F must spell UTF-8: the router decodes the path and fails on anything else.
  if (nonAscii && !isUtf8(text)) return refuse('the path has an encoding that is not UTF-8')
  const path = plain ? text : removeDotSegments(text)
  // `...` or `x../y`: a name, not a dot segment, but the proxy (and some servers) read `/..` and
  // `../` anywhere as a climb; refusing them keeps the edge and the proxy in agreement.
  if (typeof path === 'string' && (path.includes('/..') || path.includes('../'))) return refuse('the path has a segment that begins or ends with ..')
  return path
}

/** The byte the `%XX` at `i` encodes, or the refusal of a malformed one or of a byte the path may not carry encoded. */
function encodedByte (raw: string, i: number): number | CanonicalTarget {
  const high = hexValue(raw.charCodeAt(i + 1))
  const low = hexValue(raw.charCodeAt(i + 2))
  if (high === -1 || low === -1) return refuse('the path has an invalid percent-encoding')
  const byte = high * 16 + low
  if (byte === 0x2f || byte === 0x5c) return refuse('the path has an encoded / or \\')
  if (byte < 0x20 || byte === 0x7f) return refuse('the path has an encoded control character')
  // As Spring Security's firewall does: `%25` is how double-encoded traversals start, and
  // `%3B` is a `;` to any upstream that decodes before it strips segment parameters.
  if (byte === 0x25) return refuse('the path has an encoded % (double encoding)')
  if (byte === 0x3b) return refuse('the path has an encoded ;')
  return byte
}

/** The refusal of a character the path may not carry as it is. */
function refusedCharacter (code: number): CanonicalTarget {
  if (code === 92 /* \ */) return refuse('the path has a \\ (some servers read it as /)')
  if (code === 59 /* ; */) return refuse('the path has a ; (some servers drop what follows it in a segment)')
  if (code === 35 /* # */) return refuse('the request target has a #')
  return refuse('the path has a control or non-ASCII character')
}

function isUtf8 (path: string): boolean {
  try {
    decodeURIComponent(path)
    return true
  } catch {
    return false
  }
}

/** RFC 3986 §5.2.4 on an absolute path, with `//` merged; refuses climbing above `/`. */
function removeDotSegments (path: string): string | CanonicalTarget {
  const segments = path.split('/')
  const out: string[] = []
  // segments[0] is the empty string before the leading `/`.
  for (let i = 1; i < segments.length; i++) {
    const segment = segments[i]!
    const last = i === segments.length - 1
    if (segment === '..') {
      if (out.length === 0) return refuse('the path climbs above /')
      out.pop()
      if (last) out.push('')
    } else if (segment === '.' || segment === '') {
      if (last) out.push('')
    } else {
      out.push(segment)
    }
  }
  // A trailing empty segment stands for a trailing slash: `/a/.` and `/a/b/..` end as `/a/`.
  return `/${out.join('/')}`
}

/** The query with its percent-encoding checked; characters WHATWG would encode are encoded now. */
function canonicalQuery (raw: string): string | CanonicalTarget {
  let text = ''
  for (let i = 0; i < raw.length; i++) {
    const code = raw.charCodeAt(i)
    if (code < 0x21 || code > 0x7e) return refuse('the query has a control or non-ASCII character')
    if (code === 35 /* # */) return refuse('the request target has a #')
    if (code === 37 /* % */) {
      if (hexValue(raw.charCodeAt(i + 1)) === -1 || hexValue(raw.charCodeAt(i + 2)) === -1) {
        return refuse('the query has an invalid percent-encoding')
      }
    }
    const c = raw[i]!
    text += QUERY_ENCODE.has(c) ? encodeByte(code) : c
  }
  return text
}
