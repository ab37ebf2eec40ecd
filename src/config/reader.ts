// Typed readers over the parsed gateway.yaml: each value is checked where it is read, and every
// problem is collected with its key path and line (`routes[1].upstream: must be ... (line 12)`).

export type Path = ReadonlyArray<string | number>

export function formatPath (path: Path): string {
  let out = ''
  for (const part of path) out += typeof part === 'number' ? `[${part}]` : (out ? `.${part}` : part)
  return out || '(top level)'
}

/** Collects problems; each is reported as `key.path: message (line N)`. */
export class Issues {
  readonly list: string[] = []
  constructor (private readonly lines: Map<string, number>) {}

  /** The line of the key, or of its nearest ancestor when the key itself is missing. */
  add (path: Path, message: string): void {
    let line: number | undefined
    for (let n = path.length; n > 0 && line === undefined; n--) line = this.lines.get(formatPath(path.slice(0, n)))
    this.list.push(`${formatPath(path)}: ${message}${line ? ` (line ${line})` : ''}`)
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

export function isObject (value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** Typed readers over one mapping; each reports problems with the full key path. */
export class Section {
  constructor (
    readonly issues: Issues,
    readonly path: Path,
    readonly value: Record<string, unknown>
  ) {}

  static open (issues: Issues, path: Path, value: unknown, keys: readonly string[]): Section {
    if (value === undefined || value === null) return new Section(issues, path, {})
    if (!isObject(value)) {
      issues.add(path, `must be a mapping, got ${describe(value)}`)
      return new Section(issues, path, {})
    }
    for (const key of Object.keys(value)) {
      if (!keys.includes(key)) issues.add([...path, key], `unknown key (expected one of: ${keys.join(', ')})`)
    }
    return new Section(issues, path, value)
  }

  has (key: string): boolean {
    return this.value[key] !== undefined && this.value[key] !== null
  }

  string (key: string, options: { default?: string, required?: boolean, nonEmpty?: boolean } = {}): string | undefined {
    const value = this.value[key]
    if (value === undefined || value === null) {
      if (options.required) this.issues.add([...this.path, key], 'is required')
      return options.default
    }
    if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') {
      this.issues.add([...this.path, key], `must be a string, got ${describe(value)}`)
      return options.default
    }
    const text = String(value)
    if (options.nonEmpty && text.trim() === '') this.issues.add([...this.path, key], 'must not be empty')
    return text
  }

  integer (key: string, fallback: number, min: number, max: number): number {
    const value = this.value[key]
    if (value === undefined || value === null) return fallback
    const number = typeof value === 'string' && /^\d+$/.test(value.trim()) ? Number(value) : value
    if (typeof number !== 'number' || !Number.isInteger(number) || number < min || number > max) {
      this.issues.add([...this.path, key], `must be an integer from ${min} to ${max}, got ${describe(value)}`)
      return fallback
    }
    return number
  }

  boolean (key: string, fallback: boolean): boolean {
    const value = this.value[key]
    if (value === undefined || value === null) return fallback
    if (typeof value === 'boolean') return value
    if (value === 'true' || value === 'false') return value === 'true'
    this.issues.add([...this.path, key], `must be true or false, got ${describe(value)}`)
    return fallback
  }

  duration (key: string, fallback: string, minMs: number, maxMs: number): number {
    const value = this.value[key] ?? fallback
    const ms = parseDuration(value)
    if (ms === undefined) {
      this.issues.add([...this.path, key], `must be a duration such as 300, 300s, 5m or 8h, got ${describe(value)}`)
      return parseDuration(fallback)!
    }
    if (ms < minMs || ms > maxMs) {
      this.issues.add([...this.path, key], `must be between ${formatMs(minMs)} and ${formatMs(maxMs)}, got ${describe(value)}`)
    }
    return ms
  }

  oneOf<T extends string> (key: string, allowed: readonly T[], fallback: T): T {
    const value = this.value[key]
    if (value === undefined || value === null) return fallback
    if (typeof value === 'string' && (allowed as readonly string[]).includes(value)) return value as T
    this.issues.add([...this.path, key], `must be one of ${allowed.join(', ')}, got ${describe(value)}`)
    return fallback
  }

  url (key: string, protocols: readonly string[], options: { required?: boolean, default?: string } = {}): string | undefined {
    const text = this.string(key, { required: options.required, default: options.default })
    if (text === undefined) return undefined
    return checkUrl(this.issues, [...this.path, key], text, protocols)
  }
}

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

export function describe (value: unknown): string {
  if (value === null || value === undefined) return 'nothing'
  if (Array.isArray(value)) return 'a list'
  if (typeof value === 'object') return 'a mapping'
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value)
  return String(value)
}

function formatMs (ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`
  if (ms % 60_000 === 0) return `${ms / 60_000}m`
  if (ms % 1000 === 0) return `${ms / 1000}s`
  return `${ms}ms`
}
