// Indentation slips. A key written too far left lands in the mapping above the section it belongs
// to (`clientSecret` at the top level, after `providers:`); a key written too far right lands
// inside a section that does not know it (`providers` under `session:`). YAML reads both as a valid
// tree, and the schema then sees an unknown key and the section's required keys missing: several
// problems for one slip. This pass finds the slips first, by one rule (a key that is not a key of
// the mapping it is in, but is an absent key of the section just above it, or of a mapping around
// it), reports each run of them once, and takes them out of the data; the keys they were meant to
// be count as present, so nothing reports their absence.
import { formatPath, isObject, type ConfigProblem, type Issues, type Path } from './problems.js'

/** A JSON Schema node, read loosely: only what the walk needs. */
export interface ShapeNode {
  type?: string | string[]
  properties?: Record<string, ShapeNode>
  patternProperties?: Record<string, ShapeNode>
  items?: ShapeNode
  anyOf?: ShapeNode[]
}

/** A key found where it does not belong, and where it was meant to be. */
interface Slip {
  keys: Path[]
  target: Path
  direction: 'left' | 'right'
  /** A key of the target to line the misplaced keys up with (left), or the one they sit in (right). */
  alignWith: Path
  /**
   * A section's header indented too far with its keys left where they were: those keys, read as
   * keys of the mapping the header landed in, belong to the header's section.
   */
  followers: Path[]
}

/** A mapping or list on the way down, with its schema. */
interface Level {
  path: Path
  node: ShapeNode
  value: unknown
}

/** The branch of a union that has the value's shape (a mapping for a mapping, a list for a list). */
function shaped (node: ShapeNode | undefined, value: unknown): ShapeNode | undefined {
  if (!node?.anyOf) return node
  const wanted = Array.isArray(value) ? 'array' : isObject(value) ? 'object' : undefined
  return node.anyOf.find((branch) => wanted !== undefined && (branch.type === wanted || (Array.isArray(branch.type) && branch.type.includes(wanted))))
}

/** The schema of `key` inside `node`: a named key, else the pattern every name follows. */
function childNode (node: ShapeNode, key: string): { child: ShapeNode | undefined, named: boolean } {
  const known = node.properties?.[key]
  if (known) return { child: known, named: false }
  const pattern = Object.values(node.patternProperties ?? {})[0]
  return { child: pattern, named: pattern !== undefined }
}

/** `key` may be written in this mapping and is not: a misplaced key could have been meant here. */
function lacks (level: Level, key: string): boolean {
  return isObject(level.value) && level.node.properties?.[key] !== undefined && level.value[key] === undefined
}

/** The last entry of a mapping or list, one level down: where the next line of the file would continue it. */
function lastChild (level: Level): Level | undefined {
  const { node, value } = level
  if (Array.isArray(value)) {
    const items = shaped(node.items, value[value.length - 1])
    return value.length > 0 && items ? { path: [...level.path, value.length - 1], node: items, value: value[value.length - 1] } : undefined
  }
  if (!isObject(value)) return undefined
  const last = Object.keys(value).at(-1)
  if (last === undefined) return undefined
  const child = shaped(childNode(node, last).child, value[last])
  return child ? { path: [...level.path, last], node: child, value: value[last] } : undefined
}

/** The deepest mapping at the end of `anchor` (the section written just above) that lacks `key`. */
function dedentTarget (anchor: Level, key: string): Level | undefined {
  let found: Level | undefined
  for (let level: Level | undefined = anchor; level; level = lastChild(level)) {
    if (lacks(level, key)) found = level
  }
  return found
}

/** A mapping around the key's own that lacks it: the key was indented too far. */
function indentTarget (outer: Level[], key: string): Level | undefined {
  return [...outer].reverse().find((level) => lacks(level, key))
}

/** A named entry (a provider's name) whose value is a scalar but whose name is a key of such an entry. */
function looksLikeKey (child: ShapeNode | undefined, key: string, value: unknown): boolean {
  return child?.properties?.[key] !== undefined && value !== null && typeof value !== 'object'
}

/** Adds a slip, or extends the previous one when this key continues the same run. */
function note (slips: Slip[], key: Path, target: Level, direction: Slip['direction'], alignWith: Path): void {
  const last = slips.at(-1)
  if (last && last.direction === direction && formatPath(last.target) === formatPath(target.path) && formatPath(last.keys[0]!.slice(0, -1)) === formatPath(key.slice(0, -1))) {
    last.keys.push(key)
    return
  }
  slips.push({ keys: [key], target: target.path, direction, alignWith, followers: [] })
}

/**
 * The section a header slipped too far right opens, when its content did not come with it (the
 * header's value is empty): the keys after it in the same mapping may be that section's.
 */
function openedSection (target: Level, key: string, value: unknown): ShapeNode | undefined {
  if (value !== null && value !== undefined) return undefined
  const node = target.node.properties?.[key]
  return shaped(node, {}) ?? node
}

/** The first key of a mapping, to line others up with; the mapping's own key when it has none. */
function firstKey (level: Level): Path {
  const first = isObject(level.value) ? Object.keys(level.value)[0] : undefined
  return first === undefined ? level.path : [...level.path, first]
}

function walk (level: Level, outer: Level[], slips: Slip[]): void {
  const { node, value, path } = level
  if (Array.isArray(value)) {
    value.forEach((item, i) => {
      const items = shaped(node.items, item)
      if (items && (isObject(item) || Array.isArray(item))) walk({ path: [...path, i], node: items, value: item }, [...outer, level], slips)
    })
    return
  }
  if (!isObject(value)) return
  // The last key of this mapping that is in its place: a misplaced key after it continues its section.
  let anchor: Level | undefined
  // A section header that slipped right with an empty value: the unknown keys after it are its own.
  let opened: ShapeNode | undefined
  for (const [key, item] of Object.entries(value)) {
    const { child, named } = childNode(node, key)
    const misplaced = child === undefined || (named && looksLikeKey(child, key, item))
    if (misplaced && opened && childNode(opened, key).child !== undefined) {
      slips.at(-1)!.followers.push([...path, key])
      continue
    }
    opened = undefined
    const left = misplaced && anchor ? dedentTarget(anchor, key) : undefined
    const right = misplaced && !left && !named ? indentTarget(outer, key) : undefined
    if (left) {
      note(slips, [...path, key], left, 'left', firstKey(left))
    } else if (right) {
      note(slips, [...path, key], right, 'right', path.slice(0, right.path.length + 1))
      opened = openedSection(right, key, item)
    } else if (child) {
      const inner = shaped(child, item)
      anchor = inner ? { path: [...path, key], node: inner, value: item } : undefined
      if (anchor) walk(anchor, [...outer, level], slips)
    }
  }
}

function where (path: Path): string {
  return path.length === 0 ? 'at the top level' : `in ${formatPath(path)}`
}

/** `issuer` and `scope`, `a, b and c`. */
function list (keys: Path[]): string {
  const names = keys.map((key) => `\`${String(key.at(-1))}\``)
  return names.length === 1 ? names[0]! : `${names.slice(0, -1).join(', ')} and ${names.at(-1)!}`
}

/** The one problem a slip gives, at its first key. */
function report (issues: Issues, slip: Slip): void {
  const [first, ...rest] = slip.keys
  const parent = first!.slice(0, -1)
  const also = rest.length > 0 ? ` (${rest.length === 1 ? 'as is' : 'as are'} ${list(rest)} after it)` : ''
  const line = issues.lineOf(slip.alignWith)
  const alignName = String(slip.alignWith.at(-1) ?? '')
  const pronoun = rest.length > 0 ? 'them' : 'it'
  const at = line ? ` on line ${line}` : ''
  const header = formatPath([...slip.target, String(first!.at(-1))])
  const content = slip.followers.length > 0 ? `; ${list(slip.followers)} after it belong${slip.followers.length === 1 ? 's' : ''} to ${header}` : ''
  const message = `is ${where(parent)}, but is a key of ${formatPath(slip.target) === '(top level)' ? 'the top level' : formatPath(slip.target)}${also}${content}`
  if (slip.direction === 'right') {
    issues.add(first!, message, `probably indented too far: line ${pronoun} up with \`${alignName}\`${at}`)
  } else if (slip.alignWith.length > slip.target.length) {
    issues.add(first!, message, `probably indented too little: line ${pronoun} up with \`${alignName}\`${at}`)
  } else {
    issues.add(first!, message, `probably indented too little: indent ${pronoun} under \`${alignName}:\`${at}`)
  }
}

/**
 * Finds the indentation slips in `data` (checked against `schema`), reports each once, removes the
 * misplaced keys from `data`, and returns the JSON pointers of the keys they were meant to be.
 */
export function reportSlips (issues: Issues, schema: ShapeNode, data: Record<string, unknown>): Set<string> {
  const slips: Slip[] = []
  walk({ path: [], node: schema, value: data }, [], slips)
  const meant = new Set<string>()
  for (const slip of slips) {
    report(issues, slip)
    const header = String(slip.keys[0]!.at(-1))
    const moves = [...slip.keys.map((key) => ({ key, meant: [...slip.target, String(key.at(-1))] })),
      ...slip.followers.map((key) => ({ key, meant: [...slip.target, header, String(key.at(-1))] }))]
    for (const { key, meant: to } of moves) {
      issues.touch(key)
      issues.touch(to)
      meant.add(pointer(to))
      const parent = valueAt(data, key.slice(0, -1))
      if (isObject(parent)) Reflect.deleteProperty(parent, String(key.at(-1)))
    }
  }
  return meant
}

function valueAt (data: unknown, path: Path): unknown {
  let here = data
  for (const key of path) here = isObject(here) || Array.isArray(here) ? (here as Record<string | number, unknown>)[key] : undefined
  return here
}

/** The JSON pointer ajv uses for a key path. */
function pointer (path: Path): string {
  return path.map((part) => `/${String(part).replace(/~/g, '~0').replace(/\//g, '~1')}`).join('')
}

/** A line's key and the column it starts at (1-based, after any `- `), when the line holds one. */
function keyOn (text: string | undefined): { key: string, column: number } | undefined {
  // No two neighbouring parts match the same characters: linear on any line.
  const match = text === undefined ? null : /^([ \t]*(?:-[ \t]+)*)([^\s:#'"-][^:#]*):(?:\s|$)/.exec(text)
  return match ? { key: match[2]!.trimEnd(), column: match[1]!.length + 1 } : undefined
}

/** The nearest line at or after (step 1) or before (step -1) `from` that holds something. */
function nextContentLine (lines: string[], from: number, step: 1 | -1): number | undefined {
  for (let n = from; n >= 1 && n <= lines.length; n += step) {
    if (!/^\s*(?:#.*)?$/.test(lines[n - 1]!)) return n
  }
  return undefined
}

/** The first error yaml reports, as yaml says it (its position dropped: the line is the problem's). */
export interface YamlError { code: string, line: number | undefined, message: string }

/** Errors whose line is the key before the slip: the next line is the one indented too far. */
const KEY_BEFORE_SLIP = new Set(['BLOCK_AS_IMPLICIT_KEY', 'MULTILINE_IMPLICIT_KEY'])

/**
 * `[${VAR}]`: in a flow list or mapping, `{` opens a mapping, and YAML's message says nothing of
 * what to write (a newcomer's finding, rotating a secret).
 */
function flowVariable (lines: string[], error: YamlError): ConfigProblem | undefined {
  // Quoted scalars and a comment taken out first: a variable there is not the cause (a re-reading's finding).
  const bare = (lines[(error.line ?? 0) - 1] ?? '').replace(/"(?:[^"\\]|\\.)*"|'(?:[^']|'')*'/g, '""').replace(/(^|\s)#.*$/, '')
  const variable = error.line === undefined ? undefined : /[[{,]\s*(\$\{[A-Za-z_][A-Za-z0-9_]*\})/.exec(bare)?.[1]
  if (variable === undefined) return undefined
  return { path: 'YAML syntax', line: error.line, message: `${error.message}: ${variable} inside [ ] or { } reads as a mapping`, hint: `quote it ("${variable}"), or write the list one item a line (- ${variable})` }
}

/**
 * One problem for a YAML syntax error: the first one yaml reports (the others on the lines after
 * it follow from it, as yaml reads the rest of the mapping differently), and when a line's key
 * starts at another column than the key above it, which two.
 */
export function yamlSyntaxProblem (text: string, error: YamlError): ConfigProblem {
  const lines = text.split(/\r?\n/)
  const start = error.line === undefined ? undefined : KEY_BEFORE_SLIP.has(error.code) ? error.line + 1 : error.line
  const slipLine = start === undefined ? undefined : nextContentLine(lines, start, 1)
  const aboveLine = slipLine === undefined ? undefined : nextContentLine(lines, slipLine - 1, -1)
  // A tab in the indentation: its column is not the one an editor shows (a newcomer's finding).
  const tabbed = [error.line, slipLine].find((n) => n !== undefined && /^ *\t/.test(lines[n - 1] ?? ''))
  if (tabbed !== undefined) return { path: 'YAML syntax', line: tabbed, message: `line ${tabbed} is indented with a tab, and YAML indents with spaces only`, hint: 'indent it with spaces, lined up with the key it belongs beside' }
  const flow = flowVariable(lines, error)
  if (flow !== undefined) return flow
  const slip = slipLine === undefined ? undefined : keyOn(lines[slipLine - 1])
  const above = aboveLine === undefined ? undefined : keyOn(lines[aboveLine - 1])
  if (!slip || !above || slip.column === above.column) return { path: 'YAML syntax', line: error.line, message: error.message }
  const deeper = slip.column > above.column
  // The key above is the one out of line when the key before it starts where the slip does.
  const beforeLine = deeper ? nextContentLine(lines, aboveLine! - 1, -1) : undefined
  const before = beforeLine === undefined ? undefined : keyOn(lines[beforeLine - 1])
  if (before && before.column === slip.column) {
    return {
      path: 'YAML syntax',
      line: aboveLine,
      message: `\`${above.key}\` starts at column ${above.column}, left of \`${before.key}\` on line ${beforeLine!} and \`${slip.key}\` on line ${slipLine!} (column ${slip.column})`,
      hint: `line it up with \`${before.key}\` and \`${slip.key}\``,
    }
  }
  return {
    path: 'YAML syntax',
    line: slipLine,
    message: `\`${slip.key}\` starts at column ${slip.column}, ${deeper ? 'right of' : 'left of'} \`${above.key}\` on line ${aboveLine!} (column ${above.column})`,
    hint: deeper
      ? `a key under \`${above.key}\` needs \`${above.key}:\` to end its line; if it is another key of the same mapping, line it up with \`${above.key}\``
      : `line it up with \`${above.key}\`, or with the key of the mapping it belongs to`,
  }
}

/**
 * Where below `node` a key named `key` may be written (`server`, `providers.<name>`, `routes[]`),
 * nearest first, at most `depth` levels down: for a key written in a file with its section left out.
 */
export function sectionsHolding (node: ShapeNode, key: string, depth = 2, at = ''): string[] {
  if (depth === 0) return []
  const found: string[] = []
  const deeper: string[] = []
  const children: Array<[string, ShapeNode | undefined]> = [
    ...Object.entries(node.properties ?? {}).map(([name, child]): [string, ShapeNode] => [at ? `${at}.${name}` : name, child]),
    ...Object.values(node.patternProperties ?? {}).map((child): [string, ShapeNode] => [`${at}.<name>`, child]),
  ]
  for (const [path, child] of children) {
    const inner = child?.items ?? shaped(child, {}) ?? child
    const where = child?.items ? `${path}[]` : path
    if (inner?.properties?.[key] !== undefined) found.push(where)
    else if (inner) deeper.push(...sectionsHolding(inner, key, depth - 1, where))
  }
  return [...found, ...deeper]
}
