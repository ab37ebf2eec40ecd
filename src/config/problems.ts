// Problems of a config file, each with its key path, line and an optional hint
// (`routes[1].upstream: must be ... (line 12)`); how a value is quoted in one (credentials, a URL's
// query values and secrets masked); and the two checks every section uses, a mapping and a URL.

export type Path = ReadonlyArray<string | number>

export function formatPath (path: Path): string {
  let out = ''
  for (const part of path) out += typeof part === 'number' ? `[${part}]` : (out ? `.${part}` : part)
  return out || '(top level)'
}

/** One problem: where (key path and line), what, and how to fix it when that is not obvious. */
export interface ConfigProblem {
  path: string
  line: number | undefined
  message: string
  hint?: string
}

/** `routes[0].provider: names no configured provider; did you mean `demo`? (line 12)` */
export function formatProblem (problem: ConfigProblem): string {
  return `${problem.path}: ${problem.message}${problem.hint ? `; ${problem.hint}` : ''}${problem.line ? ` (line ${problem.line})` : ''}`
}

/**
 * Collects problems, one per key path: the first one said about a key is its root cause, and a key
 * with a problem (or one assumed present because a misspelt key was found next to it) is "touched",
 * which later checks consult so that they do not report its consequences.
 */
export class Issues {
  readonly problems: ConfigProblem[] = []
  private readonly problemPaths = new Set<string>()
  private readonly touchedPaths = new Set<string>()
  /**
   * @param secrets values no problem may quote (a secret key's value, a secret variable's value):
   *   whatever check quotes a value it was handed, they are masked here, at the one way out.
   */
  constructor (private readonly lines: Map<string, number>, private readonly secrets: readonly string[] = []) {}

  /** The line of the key, or of its nearest ancestor when the key itself is missing. */
  lineOf (path: Path): number | undefined {
    let line: number | undefined
    for (let n = path.length; n > 0 && line === undefined; n--) line = this.lines.get(formatPath(path.slice(0, n)))
    return line
  }

  add (path: Path, message: string, hint?: string): void {
    const key = formatPath(path)
    this.touch(path)
    if (this.problemPaths.has(key)) return
    this.problemPaths.add(key)
    this.problems.push({ path: key, line: this.lineOf(path), message: this.masked(message), ...(hint ? { hint: this.masked(hint) } : {}) })
  }

  /** `text` with every secret, or the start of one that `describe` cut short, replaced by `***`. */
  private masked (text: string): string {
    let out = text
    for (const secret of this.secrets) {
      for (const form of [secret, JSON.stringify(secret).slice(1, -1)]) out = maskRuns(out, form)
    }
    return out
  }

  /** Marks a key as dealt with: later checks of it or of what depends on it stay silent. */
  touch (path: Path): void {
    this.touchedPaths.add(formatPath(path))
  }

  /** A problem was reported at this key or inside it, or the key was assumed present. */
  touched (path: Path): boolean {
    const key = formatPath(path)
    for (const seen of this.touchedPaths) {
      if (seen === key || seen.startsWith(`${key}.`) || seen.startsWith(`${key}[`)) return true
    }
    return false
  }

  /**
   * The key itself or a key around it was touched: a section assumed present but unreadable (a
   * misspelt `provider:` meant to be `providers:`) may hold whatever is looked up in it.
   */
  assumed (path: Path): boolean {
    for (let n = path.length; n > 0; n--) if (this.touchedPaths.has(formatPath(path.slice(0, n)))) return true
    return false
  }

  /** In file order (problems without a line last; on one line, by key path). */
  sorted (): ConfigProblem[] {
    return [...this.problems].sort((a, b) => (a.line ?? Infinity) - (b.line ?? Infinity) || a.path.localeCompare(b.path, 'en', { numeric: true }))
  }
}

/** A YAML mapping (not a list, not null). */
export function isObject (value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** `text` when it is a URL with one of `protocols`, else undefined (and a problem at `path`). */
export function checkUrl (issues: Issues, path: Path, text: string, protocols: readonly string[]): string | undefined {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    issues.add(path, `must be a URL, got ${describe(text)}`, schemeHint(text, protocols))
    return undefined
  }
  if (!protocols.includes(url.protocol.slice(0, -1))) {
    issues.add(path, `must be a ${protocols.join(' or ')} URL, got ${describe(text)}`, schemeHint(text, protocols))
    return undefined
  }
  return text
}

/** A host and port written without a scheme: `127.0.0.1:9100`, `localhost:9100`, `[::1]:9100`. */
const HOST_PORT = /^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):\d{1,5}(?:\/[^\s@]*)?$/

/** "did you mean `http://127.0.0.1:9100`?" for a host and port written without a scheme (a newcomer's finding: no hint said what was missing). */
function schemeHint (text: string, protocols: readonly string[]): string | undefined {
  return HOST_PORT.test(text) ? `did you mean \`${protocols[0]!}://${text}\`?` : undefined
}

/**
 * `user:password@` at the start of a value: after a scheme, up to the value's last `@` (a Redis URL
 * whose password holds a `/`, as `openssl rand -base64` writes half the time, is no URL, and its
 * password must still not show); without one, a sentinel node's `user:password@host`. A password is
 * never repeated in a problem, which may be logged.
 */
const CREDENTIALS = /^([a-z][a-z0-9+.-]*:\/\/)([^\s/@:]*):\S*@/i
const BARE_CREDENTIALS = /^([^\s/@:]*):[^\s/@]*@/

/** Shorter values are not masked: they would mask ordinary words of a message, and say little. */
const MASKED_MIN = 6

/** Replaces each run of `text` that starts like `secret` (its first characters, at least MASKED_MIN of them) with `***`. */
function maskRuns (text: string, secret: string): string {
  if (secret.length < MASKED_MIN) return text
  const start = secret.slice(0, MASKED_MIN)
  let out = ''
  let from = 0
  for (let at = text.indexOf(start); at !== -1; at = text.indexOf(start, from)) {
    let end = at + MASKED_MIN
    while (end < text.length && end - at < secret.length && text[end] === secret[end - at]) end++
    out += `${text.slice(from, at)}***`
    from = end
  }
  return out + text.slice(from)
}

/** `?a=1&b=2` in a URL as `?a=***&b=***`: a query may carry a token. */
function maskQueryValues (text: string): string {
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) return text
  const query = text.indexOf('?')
  if (query === -1) return text
  const hash = text.indexOf('#', query)
  const end = hash === -1 ? text.length : hash
  const masked = text.slice(query + 1, end).split('&').map((part) => part.includes('=') ? `${part.slice(0, part.indexOf('='))}=***` : part).join('&')
  return `${text.slice(0, query + 1)}${masked}${hash === -1 ? '' : '#***'}`
}

export function describe (value: unknown): string {
  if (value === null || value === undefined) return 'nothing'
  if (Array.isArray(value)) return value.length === 0 ? 'an empty list' : 'a list'
  if (typeof value === 'object') return 'a mapping'
  if (typeof value === 'string') {
    const shown = maskQueryValues(CREDENTIALS.test(value) ? value.replace(CREDENTIALS, '$1$2:***@') : value.replace(BARE_CREDENTIALS, '$1:***@'))
    return JSON.stringify(shown.length > 60 ? `${shown.slice(0, 57)}...` : shown)
  }
  return String(value)
}
