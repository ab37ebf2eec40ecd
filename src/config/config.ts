// gateway.yaml: loading, and ${VAR} substitution on parsed scalars. The raw file's shape is
// schema.ts, the resolved config's types are types.ts; validation (schema-check.ts, then
// validate.ts) collects every problem with its key path and line. Loading a config has no side
// effects (no network, no store).
import { readFile } from 'node:fs/promises'
import { LineCounter, isAlias, isMap, isScalar, isSeq, parseDocument, visit, type Document, type Node } from 'yaml'
import { Issues, formatPath, formatProblem, isObject, type ConfigProblem, type Path } from './problems.js'
import { yamlSyntaxProblem } from './slips.js'
import type { GatewayConfig } from './types.js'
import { checkSchema } from './schema-check.js'
import { PLACEHOLDER, validate } from './validate.js'

export type { ConfigProblem } from './problems.js'

export { parseDuration, parseSize } from './units.js'
export { configWarnings, processWarnings } from './safety.js'
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
function substitute (text: string, env: Env, onMissing: (name: string, empty: boolean) => void, onGiven: (name: string, value: string) => void): string {
  return text.replace(VAR, (_match, name: string, fallback: string | undefined) => {
    const value = env[name]
    if (value !== undefined && value !== '') {
      onGiven(name, value)
      return value
    }
    if (fallback !== undefined) return fallback
    onMissing(name, value === '')
    return ''
  })
}

/** A variable that is not set, or set to nothing, where a value is needed. */
interface MissingVariable { path: Path, name: string, empty: boolean }

/** yaml's own default: how many values one alias may expand to, counted as yaml counts them. */
const MAX_ALIASES = 100

/** Key and variable names that hold a secret: `session.secret`, `clientSecret`, `${REDIS_PASSWORD}`. */
const SECRET_LIKE = /(secret|passw(or)?d|token|credentials?|key)s?$/i

/**
 * How to give the missing variable. A secret gets no `${VAR:-default}`: a default written in the
 * file is the same secret in every install that uses the file.
 */
function missingHint ({ path, name }: MissingVariable): string {
  if (SECRET_LIKE.test(keyName(path)) || SECRET_LIKE.test(name)) return `set ${name} in the environment; a default written in the file would be the same secret wherever the file is used`
  return `set it, or write \${${name}:-default} for a default`
}

/** What reading the YAML tree notes beside the plain values. */
interface Reading {
  /** Each key path's line. */
  lines: Map<string, number>
  missing: MissingVariable[]
  /** Values no problem may quote: a secret key's value, a secret variable's value. */
  secrets: string[]
}

/** The file's own shape is wrong (a key given twice, an alias inside its own anchor): one problem. */
class ShapeProblem extends Error {
  constructor (readonly line: number | undefined, message: string) {
    super(message)
  }
}

/** The last named key of a path: `clientSecret` for providers.demo.clientSecret, `previousSecrets` for its items. */
const keyName = (path: Path): string => [...path].reverse().find((part) => typeof part === 'string') ?? ''

/**
 * Turns the YAML tree into plain values, substituting variables and noting each key's line. Keys
 * given twice are found here with a set (yaml's own check compares each key with every key before
 * it), and an alias is expanded only where it does not hold itself.
 */
function toPlain (doc: Document, env: Env, lineCounter: LineCounter, reading: Reading): unknown {
  const lineOf = (node: Node | null | undefined): number | undefined =>
    node?.range ? lineCounter.linePos(node.range[0]).line : undefined
  // The collections being read, outermost first: an alias to one of them would never end.
  const open = new Set<unknown>()

  const walk = (node: unknown, path: Path): unknown => {
    if (isAlias(node)) {
      const target = node.resolve(doc)
      if (open.has(target)) throw new ShapeProblem(lineOf(node as unknown as Node), `the alias *${node.source} is inside its own anchor &${node.source}: its value would hold itself`)
      return walk(target, path)
    }
    if (isMap(node) || isSeq(node)) {
      open.add(node)
      try {
        if (isMap(node)) return mapping(node.items, path)
        return node.items.map((item, index) => {
          const line = lineOf(item as Node)
          if (line) reading.lines.set(formatPath([...path, index]), line)
          return walk(item, [...path, index])
        })
      } finally {
        open.delete(node)
      }
    }
    if (isScalar(node)) {
      if (typeof node.value === 'number' && isRuleClaimValue(path)) return node.source ?? String(node.value)
      if (typeof node.value !== 'string') return node.value
      const value = substitute(node.value, env, (name, empty) => reading.missing.push({ path, name, empty }), (name, given) => {
        if (SECRET_LIKE.test(name)) reading.secrets.push(given)
      })
      if (SECRET_LIKE.test(keyName(path))) reading.secrets.push(value)
      return value
    }
    return node ?? null
  }

  const mapping = (pairs: ReadonlyArray<{ key: unknown, value: unknown }>, path: Path): Record<string, unknown> => {
    const out: Record<string, unknown> = {}
    const seen = new Map<string, number | undefined>()
    for (const pair of pairs) {
      const key = String(isScalar(pair.key) ? pair.key.value : pair.key)
      const line = lineOf(pair.key as Node)
      if (seen.has(key)) {
        const first = seen.get(key)
        throw new ShapeProblem(line, `\`${key}\` is given twice in this mapping${first === undefined ? '' : ` (first on line ${first})`}`)
      }
      seen.set(key, line)
      if (line) reading.lines.set(formatPath([...path, key]), line)
      out[key] = walk(pair.value, [...path, key])
    }
    return out
  }
  return walk(doc.contents, [])
}

/**
 * Whether `path` is a value of an allow or deny rule's `claims` condition (`allow[0].claims.ref[1]`,
 * `deny.claims.project_id`). Such a value is compared as text with the token's claim, so a number is
 * kept as written: `ref: [1.10]` is the tag "1.10", not the number 1.1, and `2.0` is "2.0" (an
 * outside tester's finding: the rule meant for one ref admitted another, and a deny never held).
 */
function isRuleClaimValue (path: Path): boolean {
  const at = path.lastIndexOf('claims')
  if (at < 1 || !(path.length === at + 2 || (path.length === at + 3 && typeof path[at + 2] === 'number'))) return false
  const list = typeof path[at - 1] === 'number' ? path[at - 2] : path[at - 1]
  return list === 'allow' || list === 'deny'
}

/**
 * The paths of the keys the schema does not know in `plain` (read on a copy: the error path only),
 * as paths, not text: a key may hold dots (a host name), and `app` then names no part of
 * `app.example.com` (an attacker's finding).
 */
function unknownKeys (plain: unknown): Path[] {
  const found: Path[] = []
  const probe = new (class extends Issues {
    override add (path: Path, message: string, hint?: string): void {
      if (message.startsWith('unknown key')) found.push(path)
      super.add(path, message, hint)
    }
  })(new Map())
  checkSchema(probe, structuredClone(plain))
  return found
}

/** Removes the value at `path` (a value whose variable is missing: it has been reported). */
function removeAt (plain: unknown, path: Path): void {
  let parent = plain
  for (const key of path.slice(0, -1)) parent = isObject(parent) || Array.isArray(parent) ? (parent as Record<string | number, unknown>)[key] : undefined
  const last = path[path.length - 1]
  if (last !== undefined && (isObject(parent) || Array.isArray(parent))) delete (parent as Record<string | number, unknown>)[last]
}

/**
 * Where the first node with a YAML tag starts, if any. gateway.yaml uses none, and a value written
 * with a bare `!` is one: `!10.8.0.0/16` (an excluded network) is an unknown tag that yaml drops
 * with its text, read as nothing (an operator's finding), `! 10.8.0.0/16` the non-specific tag,
 * read as the network itself, an exclusion turned into its opposite (an outside tester's), and
 * `!!str`, `!!binary` or a `%TAG` directive change what a value is read as. Quoting says it plainly.
 */
function taggedNode (doc: Document): number | undefined {
  let at: number | undefined
  visit(doc, (_key, node) => {
    if ((isScalar(node) || isMap(node) || isSeq(node)) && node.tag !== undefined) {
      at = node.range?.[0] ?? 0
      return visit.BREAK
    }
    return undefined
  })
  return at
}

/** Where the first alias that names no anchor set before it starts, if any (yaml's toJS would throw a ReferenceError without a place). */
function unresolvedAlias (doc: Document): number | undefined {
  let at: number | undefined
  visit(doc, {
    Alias (_key, node) {
      if (node.resolve(doc) !== undefined) return undefined
      at = node.range?.[0] ?? 0
      return visit.BREAK
    },
  })
  return at
}

/**
 * Parses and validates config text. Throws a {@link ConfigError} listing every problem.
 * @param source the file name used in messages
 */
export function parseConfig (text: string, env: Env = process.env, source = 'gateway.yaml'): GatewayConfig {
  const lineCounter = new LineCounter()
  // Keys given twice are found while reading (toPlain), in linear time.
  const doc = parseDocument(text, { lineCounter, prettyErrors: true, uniqueKeys: false })
  const first = doc.errors[0]
  if (first) {
    const message = first.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '')
    throw new ConfigError(source, [yamlSyntaxProblem(text, { code: first.code, line: first.linePos?.[0]?.line, message })])
  }
  const unresolved = unresolvedAlias(doc)
  if (unresolved !== undefined) {
    // Not echoed either: `clientSecret: *x...` is a secret that starts with `*` as often as an alias.
    const message = 'a value that starts with * is read as a YAML alias, and no anchor (&name) before it has its name: quote the value if the * is part of it'
    throw new ConfigError(source, [{ path: 'YAML syntax', line: lineCounter.linePos(unresolved).line, message }])
  }
  const tagAt = taggedNode(doc)
  if (tagAt !== undefined) {
    // The value is not echoed: it may be a secret that starts with `!`.
    const message = 'a value that starts with ! (`!10.8.0.0/16`, `! 10.8.0.0/16`, `!!str 5`) is read as a YAML tag, which changes or drops the value, and gateway.yaml uses none: quote the value, as in networks: ["!10.8.0.0/16"]'
    throw new ConfigError(source, [{ path: 'YAML syntax', line: lineCounter.linePos(tagAt).line, message }])
  }
  const reading: Reading = { lines: new Map(), missing: [], secrets: [] }
  let plain: unknown
  try {
    // An alias bomb (anchors of lists of aliases, a few hundred bytes for millions of values) is refused by yaml's own count first.
    doc.toJS({ maxAliasCount: MAX_ALIASES })
    plain = toPlain(doc, env, lineCounter, reading)
  } catch (error) {
    if (error instanceof ShapeProblem) throw new ConfigError(source, [{ path: 'YAML syntax', line: error.line, message: error.message }])
    if (error instanceof ReferenceError && /alias/i.test(error.message)) {
      throw new ConfigError(source, [{ path: 'YAML syntax', line: undefined, message: `its aliases expand to too many values (more than ${MAX_ALIASES} each): write the values out` }])
    }
    throw error
  }
  const { missing } = reading
  // The shipped placeholder is no secret, and the problem that refuses it names it.
  const issues = new Issues(reading.lines, reading.secrets.filter((value) => !value.includes(PLACEHOLDER)))
  const misspelt = missing.length === 0 ? [] : unknownKeys(plain)
  for (const variable of missing) {
    // A key the schema does not know is named as such ("unknown key; did you mean"), as it is once
    // the variable is set, not as a missing variable beside the real key missing (a newcomer's finding).
    if (misspelt.some((key) => key.every((part, i) => variable.path[i] === part))) continue
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
