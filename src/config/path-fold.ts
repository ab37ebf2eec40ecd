// A canonical path as a case-insensitive application reads it (IIS always, ASP.NET, Express and Koa
// routers by default): lower case, each segment without its trailing dots and spaces and IIS's NTFS
// stream suffix, so `/wiki/ADMIN./users`, `/wiki/admin%20/users` and `/wiki/admin::$INDEX_ALLOCATION/users`
// are `/wiki/admin/users` there. The edge refuses
// such spellings of a route's prefix (src/http/edge.ts) and a `deny` glob holds on them
// (src/access/rules.ts): one fold, so the two cannot disagree. Beside it, the readings of routers
// that dispatch a path to another action's (routedForms: PATH_INFO, a trailing `/`, a format suffix),
// which `deny` globs hold on and the edge refuses where they reach another route's prefix, and the
// paths front controllers take from a query (queryReadings). Scans of the path, linear in its length.
import { canonicalTarget } from './canonical.js'
import { resolvesSegments } from './raw-segments.js'

/** Where `segment`'s trailing run of dots and `%20`s starts (its length when it has none). */
function trimmedEnd (segment: string): number {
  let end = segment.length
  // Read from the right, each step is forced by the last character (`.` or the `0` of `%20`), so
  // one pass finds the whole run: no step is ever taken back.
  for (;;) {
    if (segment.charCodeAt(end - 1) === 46 /* . */) end -= 1
    else if (end >= 3 && segment.charCodeAt(end - 1) === 48 /* 0 */ && segment.charCodeAt(end - 2) === 50 /* 2 */ && segment.charCodeAt(end - 3) === 37 /* % */) end -= 3
    else return end
  }
}

/**
 * An NTFS stream suffix (`name:stream:$TYPE`, the stream's name possibly empty), as IIS on NTFS
 * reads it: `admin::$index_allocation` and `admin:$i30:$index_allocation` are the directory `admin`,
 * `page.aspx::$data` the file (an outside tester's finding: a deny on `/app/admin/*` did not hold).
 */
const NTFS_STREAM = /^([^:]*):[^:]*:\$[a-z0-9_]+$/

/** `segment` (in lower case) as NTFS names it: without a stream suffix, and without trailing dots and `%20`s on either side of it. */
function fileName (segment: string): string {
  const trimmed = segment.slice(0, trimmedEnd(segment))
  const name = NTFS_STREAM.exec(trimmed)?.[1] ?? trimmed
  return name.slice(0, trimmedEnd(name))
}

/** A lower-case hex digit of a byte above 0x7F's first digit (8-f). */
const highDigit = (code: number): boolean => (code >= 56 /* 8 */ && code <= 57 /* 9 */) || (code >= 97 /* a */ && code <= 102 /* f */)
/** A lower-case hex digit. */
const hexDigit = (code: number): boolean => (code >= 48 /* 0 */ && code <= 57 /* 9 */) || (code >= 97 /* a */ && code <= 102 /* f */)

/**
 * A letter as case-insensitive comparisons read it: lower case, by way of upper case where that is
 * one letter, so that `ı` and `ſ` are `i` and `s` (Java's equalsIgnoreCase, Python's IGNORECASE),
 * and `İ` is `i` (Spring's Character.toLowerCase; JavaScript gives `i` and a combining dot).
 */
function foldLetter (letter: string): string {
  if (letter === '\u0130') return 'i'
  const upper = letter.toUpperCase()
  return ([...upper].length === 1 ? upper : letter).toLowerCase()
}

/**
 * `lower` (a canonical path in lower case) with its non-ASCII letters in lower case too: `%c3%84`
 * (Ä) is `%c3%a4` (ä), as IIS and .NET compare paths. Each run of encoded bytes above 0x7F (UTF-8:
 * the edge refuses anything else) is decoded, lowered and encoded again, its escapes in lower case.
 */
function lowerNonAscii (lower: string): string {
  let out = ''
  let from = 0
  let at = lower.indexOf('%')
  while (at !== -1) {
    let end = at
    while (lower.charCodeAt(end) === 37 /* % */ && highDigit(lower.charCodeAt(end + 1)) && hexDigit(lower.charCodeAt(end + 2))) end += 3
    if (end > at) {
      const text = Buffer.from(lower.slice(at, end).replaceAll('%', ''), 'hex').toString('utf8')
      out += lower.slice(from, at) + encodeURIComponent([...text].map(foldLetter).join('')).toLowerCase()
      from = end
    }
    at = lower.indexOf('%', Math.max(end, at + 1))
  }
  return from === 0 ? lower : out + lower.slice(from)
}

/**
 * `lower` with `%2b` read as `+`: the edge keeps it encoded (an application may read a raw `+` as a
 * space), but most upstreams decode it, so `/c%2B%2B/x` is a route `/c++/`'s path to them.
 */
function plusDecoded (lower: string): string {
  return lower.includes('%2b') ? lower.replaceAll('%2b', '+') : lower
}

/**
 * `path` as a case-insensitive application reads it: lower case (non-ASCII letters too), `%2B` as
 * `+`, each segment without trailing dots and `%20`s, and without an NTFS stream suffix.
 */
export function folded (path: string): string {
  const lower = lowerNonAscii(plusDecoded(path.toLowerCase()))
  let out = ''
  let start = 0
  for (;;) {
    const slash = lower.indexOf('/', start)
    const segment = slash === -1 ? lower.slice(start) : lower.slice(start, slash)
    out += fileName(segment)
    if (slash === -1) return out
    out += '/'
    start = slash + 1
  }
}

/** Whether {@link folded} could change `path`: a capital letter, a segment ending in a dot or an encoded space, or a `:$` (an NTFS stream's type). */
export function foldable (path: string): boolean {
  for (let i = 0; i < path.length; i++) {
    const code = path.charCodeAt(i)
    if (code >= 65 && code <= 90) return true
    const next = path.charCodeAt(i + 1)
    if (code === 58 /* : */ && next === 36 /* $ */) return true
    // NaN past the end: a segment ends at a `/` or at the end of the path.
    const segmentEnd = next === 47 /* / */ || Number.isNaN(next)
    if (segmentEnd && (code === 46 /* . */ || (code === 48 /* 0 */ && i >= 2 && path.charCodeAt(i - 1) === 50 /* 2 */ && path.charCodeAt(i - 2) === 37 /* % */))) return true
  }
  return false
}

/**
 * Segments that name a script which routes the rest of the path itself (PHP's PATH_INFO:
 * `/app/index.php/admin/users` is Symfony's or Laravel's `/admin/users`; the older PHP suffixes and
 * `.phar` that Debian's and cPanel's handlers run; CGI, FastCGI (Django's `mysite.fcgi`), mod_wsgi,
 * classic ASP, ASP.NET handlers (ELMAH's `elmah.axd/download`), ISAPI extensions, and ColdFusion's
 * `index.cfm`, which ColdBox and FW/1 route by, alike).
 */
const SCRIPT_SUFFIXES = ['.php', '.phtml', '.pht', '.php3', '.php4', '.php5', '.php7', '.php8', '.phar', '.cgi', '.fcgi', '.wsgi', '.pl',
  '.asp', '.aspx', '.asmx', '.ashx', '.axd', '.svc', '.dll', '.exe', '.cfm']

function isScript (segment: string): boolean {
  return SCRIPT_SUFFIXES.some((suffix) => segment.length > suffix.length && segment.endsWith(suffix))
}

/**
 * The script a path runs where a script segment is followed by more: Apache's mod_php (its default
 * AcceptPathInfo), nginx's usual `fastcgi_split_path_info`, IIS for `.aspx`, CGI run
 * `/app/xmlrpc.php/x` as `/app/xmlrpc.php` with PATH_INFO `/x` (an outside tester's finding: a deny
 * on the script did not hold on it, and a public `*.css` made `/admin.php/x.css` public). The path
 * up to the first such segment, as spelled: each segment is judged as a case-insensitive server
 * names its file (`ADMIN.PHP.` is `admin.php`), and a glob compares the path as written (a public
 * `/Wiki/*` admits `/Wiki/index.php/Main_Page`: a re-reader's finding against the whole path
 * folded). Undefined without one. Linear in the path.
 */
export function scriptRun (path: string, script = isScript): string | undefined {
  if (!path.includes('.')) return undefined
  for (let start = 1, end = path.indexOf('/', 1); end !== -1; start = end + 1, end = path.indexOf('/', start)) {
    if (script(fileName(path.slice(start, end).toLowerCase()))) return path.slice(0, end)
  }
  return undefined
}

/**
 * A segment a public or allow glob must admit as a script: not `.pl`, which names Poland's domains
 * as directories more often than Perl scripts run with PATH_INFO behind a public glob (a Drupal
 * multisite's public `/sites/example.pl/files/*`: a re-reader's finding). A deny still reads it.
 */
export const admittedScript = (segment: string): boolean => !segment.endsWith('.pl') && isScript(segment)

/**
 * `segment` without a format suffix (`admin` of `admin` + `.json`: Rails' `(.:format)`, whose
 * format is any run of characters but `/`, `.` and `?`: `admin.a-b` is `admin` too, an outside
 * tester's finding against the letters and digits read before): a final `.` and what follows it.
 */
function withoutFormat (segment: string): string {
  const dot = segment.lastIndexOf('.')
  return dot <= 0 || dot === segment.length - 1 ? segment : segment.slice(0, dot)
}

const NO_FORMS: readonly string[] = Object.freeze([])

/**
 * The path a front controller takes from the query (CodeIgniter's `_parse_request_uri`, for servers
 * that pass the route in the query): when the path is a directory (`/app/`) or a script in one
 * (`/app/index.php`) and the query starts with `/`, the query up to a second `?`, under that
 * directory: `/app/index.php?/admin/users` is `/app/admin/users`. Undefined otherwise. Only `deny`
 * globs hold on it (src/access/rules.ts); the caller makes it canonical.
 */
export function queryRoutedPath (path: string, query: string): string | undefined {
  if (query.charCodeAt(0) !== 47 /* / */) return undefined
  const slash = path.lastIndexOf('/')
  const last = path.slice(slash + 1)
  if (last !== '' && !isScript(last.toLowerCase())) return undefined
  const end = query.indexOf('?')
  return `${path.slice(0, slash)}${end === -1 ? query : query.slice(0, end)}`
}

/**
 * The query parameters front controllers take the route from: Drupal 7's `q`
 * (`/index.php?q=admin/people`) and Yii's `r` (`/index.php?r=admin/users`).
 */
const ROUTE_PARAMETERS = new Set(['q', 'r'])

/**
 * Percent-decoding as PHP does it (php_url_decode): each valid `%XX` on its own, as one byte (here
 * one character, U+0000 to U+00FF), an invalid one left as it is, `+` a space: `%5Fmethod%00%FF` is
 * `_method` to PHP (the name cut at the NUL), though decodeURIComponent refuses the whole of it.
 */
export function phpDecode (text: string): string {
  let decoded = ''
  for (let at = 0; at < text.length; at++) {
    const char = text[at]!
    const hex = char === '%' ? text.slice(at + 1, at + 3) : ''
    if (hex.length === 2 && HEX.test(hex)) {
      decoded += String.fromCharCode(Number.parseInt(hex, 16))
      at += 2
    } else {
      decoded += char === '+' ? ' ' : char
    }
  }
  return decoded
}

const HEX = /^[0-9A-Fa-f]{2}$/

/**
 * A query parameter's name as PHP registers it (php_register_variable_ex): decoded byte by byte
 * (`%71` is `q`), read as a C string (cut at a NUL: `q%00x` is `q`), without the spaces it drops at
 * the start (only spaces: `%09q` is another name).
 */
function parameterName (raw: string): string {
  // Most names are written plainly: nothing to decode, no NUL, no space.
  if (!raw.includes('%') && !raw.includes('+')) return raw
  const name = phpDecode(raw)
  const nul = name.indexOf('\0')
  return (nul === -1 ? name : name.slice(0, nul)).replace(/^ +/, '')
}

/**
 * A route parameter's value as the application reads it (PHP's bytes, read as UTF-8), as a
 * canonical path's segments spell it: empty, `.` and `..` segments left out (a router matches no
 * route by them), each segment encoded.
 */
function parameterPath (raw: string): string {
  const value = Buffer.from(phpDecode(raw), 'latin1').toString('utf8')
  return value.split('/').filter((segment) => segment !== '' && segment !== '.' && segment !== '..').map(encodeURIComponent).join('/')
}

/**
 * PHP's `max_input_vars` (1000 by default): the pairs of a query it reads, the others dropped. A
 * query with more is not told (its route parameter may be one PHP reads and the last copy is not).
 * An installation may set it lower, and then reads the last copy among fewer pairs: every copy
 * within the first 1,000 is read (a copy in the 50th pair and another in the 150th are `q` to a
 * PHP that reads 100 and to one that reads 1,000).
 */
const PHP_INPUT_VARS = 1000

/**
 * The directories a front controller's base may be for `path` (each `/` of it, root first):
 * Drupal's route parameter is read on every path it serves, relative to where it is installed,
 * which the gateway does not know. Undefined past PARAMETER_BASES_MAX: not told.
 */
function parameterBases (path: string): string[] | undefined {
  const bases: string[] = []
  for (let at = path.indexOf('/'); at !== -1; at = path.indexOf('/', at + 1)) {
    if (bases.length === PARAMETER_BASES_MAX) return undefined
    bases.push(path.slice(0, at))
  }
  return bases
}

/** The different values of the route parameters a query may give, at most (each is read under every directory); past it the query is not told. */
const PARAMETER_VALUES_MAX = 8

/** The directories of a path a route parameter is read under, at most (its readings grow with them). */
const PARAMETER_BASES_MAX = 32

/** The characters a route parameter's readings may hold together; past it the query is not told. */
const READINGS_BUDGET = 32 * 1024

/**
 * The paths a front controller may take from the query of `path`: `routed`, {@link queryRoutedPath}'s,
 * as sent, for a directory or a script in one; and with `parameters`, every value of each route
 * parameter (ROUTE_PARAMETERS, named in any spelling PHP reads as it; PHP reads the last copy
 * within its max_input_vars, which may be lower than PHP_INPUT_VARS),
 * on any path (Drupal 7 reads `q` first wherever its front controller serves: `/app/node?q=admin`
 * is `admin`), under each directory of the path (where the application is installed is not known),
 * decoded and spelled again (`?q=admin%2Fusers` is `admin/users`). Raw paths for the caller to make
 * canonical; none for most requests. `parameters` undefined: not told. Outside testers' findings:
 * only CodeIgniter's `?/` was read, then every copy of `q` was (a request's cost grew with the
 * copies times its path), then `%71=` was not, then `q` only under a directory or a script.
 */
export function queryRoutedPaths (path: string, query: string, parameters = true): { routed: string | undefined, parameters: string[] | undefined } {
  if (query === '') return { routed: undefined, parameters: [] }
  const slash = path.lastIndexOf('/')
  const last = path.slice(slash + 1)
  const routed = last === '' || isScript(last.toLowerCase()) ? queryRoutedPath(path, query) : undefined
  if (!parameters) return { routed, parameters: [] }
  const values = new Set<string>()
  // PHP splits a query at `&`, and at `;` too where arg_separator.input says so (";&"): which it
  // does is not known, so both readings are judged (an outside reader's finding: `?x=1;q=admin` was
  // not read, and a deny on `admin` did not hold).
  if (!routeValues(query, '&', values) || (query.includes(';') && !routeValues(query, BOTH_SEPARATORS, values))) return { routed, parameters: undefined }
  if (values.size === 0) return { routed, parameters: [] }
  const bases = parameterBases(path)
  // The readings' whole length (each value under each directory), bounded: a long path of many
  // directories with long values, or many copies, would cost milliseconds a request to read (a
  // re-reader's measure: 10 ms for 8 KiB and 32 directories).
  const spelled = [...values].reduce((sum, value) => sum + value.length, 0)
  if (bases === undefined || bases.length * (values.size * path.length + spelled) > READINGS_BUDGET) return { routed, parameters: undefined }
  const found: string[] = []
  for (const value of values) {
    const routedPath = parameterPath(value)
    if (routedPath !== '') for (const base of bases) found.push(`${base}/${routedPath}`)
  }
  return { routed, parameters: found }
}

/** `&` and `;`: PHP's arg_separator.input set to ";&". */
const BOTH_SEPARATORS = /[&;]/

/**
 * Adds to `values` the values of the parameters `names` (ROUTE_PARAMETERS) of `query` split at
 * `separator`; false when the query is not told: more pairs than `maxPairs` (PHP's max_input_vars),
 * or more different values than PARAMETER_VALUES_MAX.
 */
export function routeValues (query: string, separator: string | RegExp, values: Set<string>, names: ReadonlySet<string> = ROUTE_PARAMETERS, maxPairs = PHP_INPUT_VARS): boolean {
  let pairs = 0
  for (const pair of query.split(separator)) {
    // PHP skips empty pairs, and counts the others up to max_input_vars.
    if (pair === '') continue
    if (++pairs > maxPairs) return false
    const equals = pair.indexOf('=')
    const name = equals > 0 ? parameterName(pair.slice(0, equals)) : undefined
    if (name !== undefined && names.has(name) && values.add(pair.slice(equals + 1)).size > PARAMETER_VALUES_MAX) return false
  }
  return true
}

/** A query whose route parameters are not told (more different values than PARAMETER_VALUES_MAX): a `deny` on a path holds on it. */
export const UNTOLD_ROUTE_QUERY = Array.from({ length: PARAMETER_VALUES_MAX + 1 }, (_, i) => `r=${i}`).join('&')

/**
 * A folded path as common routers dispatch it, the readings that differ from it: every script
 * segment followed by more segments taken away (PATH_INFO) and a trailing `/` taken away (Express
 * without `strict`, Rails: `/admin/` is `/admin`); and that with the last segment's format suffix
 * taken away too (Rails: `/admin.json` is `/admin`). Only ever widens what a `deny` glob holds on
 * (src/access/rules.ts), which reads its glob the same way (`glob`: a last segment holding `*` keeps
 * its suffix, or `/api/*.json` would deny all of `/api/`); linear in the path.
 */
export function routedForms (path: string, glob = false): readonly string[] {
  // Without a dot there is no script segment and no format suffix, and without a trailing `/` nothing
  // to take away: most paths, and no array or string is made for them.
  if (!path.includes('.') && !path.endsWith('/')) return NO_FORMS
  const segments = path.split('/')
  if (segments.length > 2 && segments[segments.length - 1] === '') segments.pop()
  const last = segments.length - 1
  const kept = segments.filter((segment, i) => i === last || !isScript(segment))
  const dispatched = kept.join('/')
  const final = kept[kept.length - 1]!
  const bare = glob && final.includes('*') ? final : withoutFormat(final)
  const forms = dispatched === path ? [] : [dispatched]
  if (bare !== final) forms.push(`${dispatched.slice(0, dispatched.length - final.length)}${bare}`)
  return forms
}

/**
 * The paths a front controller takes from `target`'s query (queryRoutedPaths: CodeIgniter's `?/`,
 * Drupal's `q`, Yii's `r`), each made canonical as the edge makes a path, without its own query;
 * undefined when one cannot be (an encoded `/` or NUL), or when its dot or empty segments the
 * application reads its own way (CodeIgniter drops `..` where the edge climbs). None for most.
 * A `deny` glob holds on each (and on the untold). A `public` or `allow` glob admits, and the edge
 * lets a path past another route's prefix, only when each path a query starting with `/` routes to
 * (`parameters` false) is admitted too: `GET /app/` public does not make `/app/?/admin/users`
 * public. Not `?q=` and `?r=`: a search box's `?q=admin` is no route to most applications.
 */
export function queryReadings (target: string, parameters = true): readonly string[] | undefined {
  const queryAt = target.indexOf('?')
  if (queryAt === -1) return NO_FORMS
  const { routed, parameters: found } = queryRoutedPaths(target.slice(0, queryAt), target.slice(queryAt + 1), parameters)
  if (found === undefined) return undefined
  if (routed === undefined && found.length === 0) return NO_FORMS
  const paths: string[] = []
  if (routed !== undefined) {
    // CodeIgniter reads a `?/` path its own way (it drops `..` where the edge climbs): one the edge would move is not told.
    const canonical = resolvesSegments(routed) ? undefined : canonicalTarget(routed)
    if (canonical?.ok !== true) return undefined
    paths.push(pathOnly(canonical.url))
  }
  // A route parameter's path is spelled from its decoded segments, each encoded: one the edge would
  // not take as a path (an encoded `%`, `;` or NUL: a search box's `?q=100%`) is compared as spelled,
  // so that a deny glob holds on what it names (`admin/users/x%00`), and a search naming no denied
  // path passes (an attacker's findings: it was skipped, then every such search was refused).
  for (const path of found) {
    const canonical = canonicalTarget(path)
    paths.push(canonical.ok ? pathOnly(canonical.url) : path)
  }
  return paths
}

function pathOnly (url: string): string {
  const end = url.indexOf('?')
  return end === -1 ? url : url.slice(0, end)
}
