// gateway.yaml: loading, and ${VAR} substitution on parsed scalars. The raw file's shape is
// schema.ts, the resolved config's types are types.ts; validation (schema-check.ts, then
// validate.ts) collects every problem with its key path and line. Loading a config has no side
// effects (no network, no store).
import { readFile } from 'node:fs/promises'
import { LineCounter, isAlias, isMap, isScalar, isSeq, parseDocument, type Document, type Node } from 'yaml'
import { Issues, formatPath, formatProblem, isObject, type ConfigProblem, type Path } from './reader.js'
import { yamlSyntaxProblem } from './slips.js'
import type { GatewayConfig } from './types.js'
import { validate } from './validate.js'

export type { ConfigProblem } from './reader.js'

export { parseDuration, parseSize } from './reader.js'
export { configWarnings } from './safety.js'
export { containerWarnings, inContainer } from './container.js'

/** Every problem found in a config file, each naming its key path. */
export class ConfigError extends Error {
  /** Each problem as one line: `key.path: message; hint (line N)`. */
  readonly issues: string[]
  constructor (readonly source: string, readonly problems: ConfigProblem[]) {
    const issues = problems.map(formatProblem)
    super(`${source}: ${issues.length} problem${issues.length === 1 ? '' : 's'}\n  ${issues.join('\n  ')}`)
    this.name = 'ConfigError'
    this.issues = issues
  }
}

const problem = (message: string): ConfigProblem => ({ path: '(file)', line: undefined, message })

type Env = Record<string, string | undefined>

const VAR = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g

/**
 * Replaces `${VAR}` and `${VAR:-default}` inside one scalar. Done on parsed scalars, so a value
 * containing `#` or `: ` cannot change the file's structure.
 */
function substitute (text: string, env: Env, onMissing: (name: string, empty: boolean) => void): string {
  return text.replace(VAR, (_match, name: string, fallback: string | undefined) => {
    const value = env[name]
    if (value !== undefined && value !== '') return value
    if (fallback !== undefined) return fallback
    onMissing(name, value === '')
    return ''
  })
}

/** A variable that is not set, or set to nothing, where a value is needed. */
interface MissingVariable { path: Path, name: string, empty: boolean }

/** Key and variable names that hold a secret: `session.secret`, `clientSecret`, `${REDIS_PASSWORD}`. */
const SECRET_LIKE = /(secret|passw(or)?d|token|credentials?|key)s?$/i

/**
 * How to give the missing variable. A secret gets no `${VAR:-default}`: a default written in the
 * file is the same secret in every install that uses the file.
 */
function missingHint ({ path, name }: MissingVariable): string {
  const key = [...path].reverse().find((part) => typeof part === 'string') ?? ''
  if (SECRET_LIKE.test(key) || SECRET_LIKE.test(name)) return `set ${name} in the environment; a default written in the file would be the same secret wherever the file is used`
  return `set it, or write \${${name}:-default} for a default`
}

/** Turns the YAML tree into plain values, substituting variables and noting each key's line. */
function toPlain (doc: Document, env: Env, lineCounter: LineCounter, lines: Map<string, number>, missing: MissingVariable[]): unknown {
  const lineOf = (node: Node | null | undefined): number | undefined =>
    node?.range ? lineCounter.linePos(node.range[0]).line : undefined

  const walk = (node: unknown, path: Path): unknown => {
    if (isAlias(node)) return walk(node.resolve(doc), path)
    if (isMap(node)) {
      const out: Record<string, unknown> = {}
      for (const pair of node.items) {
        const key = String(isScalar(pair.key) ? pair.key.value : pair.key)
        const line = lineOf(pair.key as Node)
        if (line) lines.set(formatPath([...path, key]), line)
        out[key] = walk(pair.value, [...path, key])
      }
      return out
    }
    if (isSeq(node)) {
      return node.items.map((item, index) => {
        const line = lineOf(item as Node)
        if (line) lines.set(formatPath([...path, index]), line)
        return walk(item, [...path, index])
      })
    }
    if (isScalar(node)) {
      if (typeof node.value !== 'string') return node.value
      return substitute(node.value, env, (name, empty) => missing.push({ path, name, empty }))
    }
    return node ?? null
  }
  return walk(doc.contents, [])
}

/** Removes the value at `path` (a value whose variable is missing: it has been reported). */
function removeAt (plain: unknown, path: Path): void {
  let parent = plain
  for (const key of path.slice(0, -1)) parent = isObject(parent) || Array.isArray(parent) ? (parent as Record<string | number, unknown>)[key] : undefined
  const last = path[path.length - 1]
  if (last !== undefined && (isObject(parent) || Array.isArray(parent))) delete (parent as Record<string | number, unknown>)[last]
}

/**
 * Parses and validates config text. Throws a {@link ConfigError} listing every problem.
 * @param source the file name used in messages
 */
export function parseConfig (text: string, env: Env = process.env, source = 'gateway.yaml'): GatewayConfig {
  const lineCounter = new LineCounter()
  const doc = parseDocument(text, { lineCounter, prettyErrors: true, uniqueKeys: true })
  const first = doc.errors[0]
  if (first) {
    const message = first.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '')
    throw new ConfigError(source, [yamlSyntaxProblem(text, { code: first.code, line: first.linePos?.[0]?.line, message })])
  }
  const lines = new Map<string, number>()
  const missing: MissingVariable[] = []
  const plain = toPlain(doc, env, lineCounter, lines, missing)
  const issues = new Issues(lines)
  for (const variable of missing) {
    issues.add(variable.path, `environment variable ${variable.name} ${variable.empty ? 'is empty' : 'is not set'}`, missingHint(variable))
    removeAt(plain, variable.path)
  }
  const config = validate(issues, plain ?? {})
  if (issues.problems.length > 0) throw new ConfigError(source, issues.sorted())
  return config
}

/** How the CLI is told which file to read, for a message about one it could not read. */
const GIVE_ONE = 'give the config file with --config PATH or the GATEWAY_CONFIG environment variable'

/** Why a config file could not be read, in one sentence: a missing file is the usual first-run slip. */
function unreadable (error: NodeJS.ErrnoException): string {
  switch (error.code ?? '') {
    case 'ENOENT': return `no such file; ${GIVE_ONE}`
    case 'EACCES':
    case 'EPERM': return 'cannot be read by this user (permission denied); make it readable, or give another file'
    case 'EISDIR': return `is a directory, not a config file; ${GIVE_ONE}`
    default: return `cannot read the file (${error.code ?? error.message})`
  }
}

/** A config file that could not be read: one line, `<path>: <why>`. */
export class ConfigFileError extends ConfigError {
  constructor (source: string, error: NodeJS.ErrnoException) {
    const reason = unreadable(error)
    super(source, [problem(reason)])
    this.message = `${source}: ${reason}`
  }
}

/** Reads and validates a config file. */
export async function loadConfig (file: string, env: Env = process.env): Promise<GatewayConfig> {
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (error) {
    throw new ConfigFileError(file, error as NodeJS.ErrnoException)
  }
  return parseConfig(text, env, file)
}
