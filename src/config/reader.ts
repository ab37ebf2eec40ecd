// Problems of a config file, each with its key path, line and an optional hint
// (`routes[1].upstream: must be ... (line 12)`), and the small readers they share: durations,
// URLs, how a value is shown in a message, did-you-mean.

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

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }

/** Parses `300`, `300s`, `5m`, `8h`, `250ms`, `1d` into milliseconds; a bare number is seconds. */
export function parseDuration (value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) && value >= 0 ? value * 1000 : undefined
  if (typeof value !== 'string') return undefined
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(value)
  if (!match) return undefined
  return Math.round(Number(match[1]) * UNITS[match[2] ?? 's']!)
}

const SIZE_UNITS: Record<string, number> = { '': 1, b: 1, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3, kb: 1000, mb: 1000 ** 2, gb: 1000 ** 3 }

/** Sizes are held to this (1 TiB): anything larger is a typo, and stays an exact integer. */
const MAX_SIZE = 1024 ** 4

/**
 * Parses a size into bytes: a whole number of bytes (`1048576`), or a string such as `64KiB`,
 * `1MiB`, `1.5MB`, `512 B` (units in any case; KiB/MiB/GiB are powers of 1024, KB/MB/GB of 1000).
 * Undefined for anything else, fractions of a byte and values above 1 TiB included. The pattern
 * has no nested repetition, so it runs in linear time on any input.
 */
export function parseSize (value: unknown): number | undefined {
  let bytes: number
  if (typeof value === 'number') {
    bytes = value
  } else if (typeof value === 'string') {
    const match = /^[ \t]*(\d{1,16}(?:\.\d{1,16})?)[ \t]*([kmg]i?b|b)?[ \t]*$/i.exec(value)
    if (!match) return undefined
    bytes = Number(match[1]) * SIZE_UNITS[(match[2] ?? '').toLowerCase()]!
  } else {
    return undefined
  }
  return Number.isSafeInteger(bytes) && bytes >= 0 && bytes <= MAX_SIZE ? bytes : undefined
}

/** `1048576` → `1MiB`, `65536` → `64KiB`, `1000` → `1000B`: the largest binary unit that divides it. */
export function formatSize (bytes: number): string {
  for (const [unit, size] of [['GiB', 1024 ** 3], ['MiB', 1024 ** 2], ['KiB', 1024]] as const) {
    if (bytes >= size && bytes % size === 0) return `${bytes / size}${unit}`
  }
  return `${bytes}B`
}

export function formatMs (ms: number): string {
  // Whole days past one day, as the docs write the ranges (30d, not 720h).
  if (ms > 86_400_000 && ms % 86_400_000 === 0) return `${ms / 86_400_000}d`
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`
  if (ms % 60_000 === 0) return `${ms / 60_000}m`
  if (ms % 1000 === 0) return `${ms / 1000}s`
  return `${ms}ms`
}

export function isObject (value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** `text` when it is a URL with one of `protocols`, else undefined (and a problem at `path`). */
export function checkUrl (issues: Issues, path: Path, text: string, protocols: readonly string[]): string | undefined {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    issues.add(path, `must be a URL, got ${describe(text)}`)
    return undefined
  }
  if (!protocols.includes(url.protocol.slice(0, -1))) {
    issues.add(path, `must be a ${protocols.join(' or ')} URL, got ${describe(text)}`)
    return undefined
  }
  return text
}

/**
 * `user:password@` at the start of a value (after a scheme, if any): a Redis URL or a sentinel node
 * written with credentials. Its password is never repeated in a problem, which may be logged.
 */
const CREDENTIALS = /^([a-z][a-z0-9+.-]*:\/\/)?([^\s/@:]*):[^\s/@]*@/i

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
    const shown = maskQueryValues(value.replace(CREDENTIALS, '$1$2:***@'))
    return JSON.stringify(shown.length > 60 ? `${shown.slice(0, 57)}...` : shown)
  }
  return String(value)
}

/** Optimal string alignment distance (Levenshtein with adjacent transpositions), case-insensitive. */
export function editDistance (a: string, b: string): number {
  const s = a.toLowerCase()
  const t = b.toLowerCase()
  const d: number[][] = Array.from({ length: s.length + 1 }, (_, i) => [i, ...new Array<number>(t.length).fill(0)])
  for (let j = 1; j <= t.length; j++) d[0]![j] = j
  for (let i = 1; i <= s.length; i++) {
    for (let j = 1; j <= t.length; j++) {
      const cost = s[i - 1] === t[j - 1] ? 0 : 1
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost)
      if (i > 1 && j > 1 && s[i - 1] === t[j - 2] && s[i - 2] === t[j - 1]) best = Math.min(best, d[i - 2]![j - 2]! + 1)
      d[i]![j] = best
    }
  }
  return d[s.length]![t.length]!
}

/** The closest of `candidates` to `word`, when it is close enough to be a typo of it. */
export function closest (word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined
  let bestDistance = Infinity
  for (const candidate of candidates) {
    const distance = editDistance(word, candidate)
    if (distance < bestDistance) [best, bestDistance] = [candidate, distance]
  }
  const allowed = Math.max(1, Math.min(3, Math.floor(Math.max(word.length, best?.length ?? 0) / 3)))
  return bestDistance <= allowed ? best : undefined
}

/** "did you mean `x`?" for a value or key that is close to one of `candidates`. */
export function didYouMean (word: string, candidates: readonly string[]): string | undefined {
  const match = closest(word, candidates)
  return match === undefined ? undefined : `did you mean \`${match}\`?`
}
