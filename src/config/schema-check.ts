// The schema pass over gateway.yaml: scalars from `${VAR}` made the type the schema asks for, ajv
// (allErrors) run against schema.ts (its validators compiled ahead of time, in
// schema.generated.ts), and its errors turned into one problem per root cause:
// anyOf/oneOf branches collapse into one message, an unknown key gets "did you mean" (and the key
// it was meant to be is not also reported missing), a value outside a list of choices gets the
// nearest choice. Values with a problem are removed, so later checks see only valid values or
// defaults and report nothing that follows from a problem already reported.
import type { ErrorObject } from 'ajv'
import type { FilledYaml } from './schema.js'
import { check, fill, schema } from './schema.generated.js'
import { describe, isObject, type Issues, type Path } from './problems.js'
import { closest, didYouMean } from './did-you-mean.js'
import { reportSlips, sectionsHolding } from './slips.js'

/** A JSON Schema node, read loosely (this file only reads the keywords schema.ts uses). */
interface SchemaNode {
  type?: string | string[]
  properties?: Record<string, SchemaNode>
  patternProperties?: Record<string, SchemaNode>
  items?: SchemaNode
  required?: string[]
  anyOf?: SchemaNode[]
  const?: unknown
  minimum?: number
  maximum?: number
  minLength?: number
  expected?: string
}

const types = (node: SchemaNode): string[] => node.type === undefined ? [] : Array.isArray(node.type) ? node.type : [node.type]

/**
 * A scalar as YAML would have typed it, where the schema asks for a number or boolean and the text
 * came from a variable (`port: ${PORT}` gives "8080"); numbers and booleans become text where text
 * is asked for (`clientId: 12345`). An empty mapping key (`server:`) is an empty section.
 */
function coerce (node: SchemaNode | undefined, value: unknown): unknown {
  if (node === undefined) return value
  if (node.anyOf) {
    // Only text from a variable is retyped for a union: a number stays a number (`trustProxy: 5`).
    for (const branch of typeof value === 'string' ? node.anyOf : []) {
      const converted = coerceScalar(branch, value)
      if (converted !== value) return converted
    }
    const shaped = node.anyOf.find((branch) => (types(branch).includes('array') && Array.isArray(value)) || (types(branch).includes('object') && isObject(value)))
    return shaped ? coerce(shaped, value) : value
  }
  if (isObject(value) && types(node).includes('object')) {
    const out: Record<string, unknown> = {}
    for (const [key, item] of Object.entries(value)) {
      const child = node.properties?.[key] ?? Object.values(node.patternProperties ?? {})[0]
      if (item === null && child !== undefined) {
        // `key:` with nothing after it: an absent value, or an empty section.
        if (types(child).includes('object')) out[key] = {}
        continue
      }
      out[key] = coerce(child, item)
    }
    return out
  }
  // List items are written in the file (a variable cannot make a list): only mappings in them are walked.
  if (Array.isArray(value) && types(node).includes('array')) return value.map((item) => isObject(item) ? coerce(node.items, item) : item)
  return coerceScalar(node, value)
}

function coerceScalar (node: SchemaNode, value: unknown): unknown {
  const [type, more] = types(node)
  if (more !== undefined) return value
  if ((type === 'integer' || type === 'number') && typeof value === 'string' && /^\s*-?\d+(?:\.\d+)?\s*$/.test(value)) return Number(value)
  if (type === 'boolean' && (value === 'true' || value === 'false')) return value === 'true'
  if (type === 'string' && node.const === undefined && (typeof value === 'number' || typeof value === 'boolean')) return String(value)
  return value
}

/** The key path of a JSON pointer into `data` (array indexes as numbers). */
function pathOf (pointer: string, data: unknown): Path {
  const path: Array<string | number> = []
  let here = data
  for (const raw of pointer.split('/').slice(1)) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~')
    const key = Array.isArray(here) ? Number(part) : part
    path.push(key)
    here = isObject(here) || Array.isArray(here) ? (here as Record<string | number, unknown>)[key] : undefined
  }
  return path
}

function valueAt (data: unknown, path: Path): unknown {
  let here = data
  for (const key of path) here = isObject(here) || Array.isArray(here) ? (here as Record<string | number, unknown>)[key] : undefined
  return here
}

function remove (data: unknown, path: Path): void {
  const parent = valueAt(data, path.slice(0, -1))
  const key = path[path.length - 1]
  if (key !== undefined && (isObject(parent) || Array.isArray(parent))) delete (parent as Record<string | number, unknown>)[key]
}

/** The choices of an anyOf made of constants (`memory | redis`), else undefined. */
function choices (node: SchemaNode): string[] | undefined {
  if (!node.anyOf || !node.anyOf.every((branch) => branch.const !== undefined)) return undefined
  return node.anyOf.map((branch) => String(branch.const))
}

/** "must be <this>, got ...": the schema's own phrase, or one made from its keywords. */
function expectation (node: SchemaNode): string {
  if (node.expected) return node.expected
  const options = choices(node)
  if (options) return `one of ${options.join(', ')}`
  const type = types(node)[0]
  if (type === 'integer') return node.minimum !== undefined && node.maximum !== undefined ? `an integer from ${node.minimum} to ${node.maximum}` : 'an integer'
  if (type === 'boolean') return 'true or false'
  if (type === 'object') return 'a mapping'
  if (type === 'array') return 'a list'
  if (type === 'number') return 'a number'
  return 'a string'
}

/** How close a branch came: 0 when the value has its shape (the problem is inside), else 1. */
function branchMismatch (errors: ErrorObject[], at: string): number {
  return errors.some((e) => e.instancePath === at && ['type', 'const', 'enum'].includes(e.keyword)) ? 1 : 0
}

/**
 * anyOf errors: when exactly one branch has the value's shape (a list where a list is allowed), that
 * branch's errors stand (with the anyOf's phrase for its own level); otherwise the branches' errors
 * make one "must be <one of the branches>" at the anyOf.
 */
function collapseBranches (errors: ErrorObject[]): { kept: ErrorObject[], phrases: Map<string, SchemaNode> } {
  const dropped = new Set<ErrorObject>()
  const phrases = new Map<string, SchemaNode>()
  for (const error of errors) {
    if (error.keyword !== 'anyOf' && error.keyword !== 'oneOf') continue
    const prefix = `${error.schemaPath}/`
    const branches = new Map<string, ErrorObject[]>()
    for (const other of errors) {
      if (!other.schemaPath.startsWith(prefix)) continue
      const index = other.schemaPath.slice(prefix.length).split('/')[0]!
      branches.set(index, [...(branches.get(index) ?? []), other])
      dropped.add(other)
    }
    const shaped = [...branches.values()].filter((list) => branchMismatch(list, error.instancePath) === 0)
    if (shaped.length === 1) {
      dropped.add(error)
      for (const kept of shaped[0]!) dropped.delete(kept)
      phrases.set(error.instancePath, error.parentSchema as SchemaNode)
    }
  }
  return { kept: errors.filter((e) => !dropped.has(e)), phrases }
}

/** Keys allowed where `node` is (for "did you mean"). */
function keysOf (node: SchemaNode | undefined): string[] {
  return Object.keys(node?.properties ?? {})
}

/**
 * Runs the schema over `plain` (already substituted), reports each root cause once in `issues`, and
 * returns the data with the reported values removed. No defaults yet: presets fill keys first.
 */
export function checkSchema (issues: Issues, plain: unknown): Record<string, unknown> {
  const coerced = coerce(schema as SchemaNode, plain)
  const data = isObject(coerced) ? coerced : {}
  if (!isObject(coerced) && coerced !== undefined && coerced !== null) {
    issues.add([], `must be a mapping of sections (server, session, providers, routes, ...), got ${describe(coerced)}`)
    return data
  }
  // Indentation slips first: one problem each, and their keys out of the way of the schema.
  const slipped = reportSlips(issues, schema as SchemaNode, data)
  if (check(data)) return data
  const { kept, phrases } = collapseBranches(check.errors ?? [])

  // Unknown keys next: the key each was meant to be is then "present", not missing.
  const meant = reportUnknownKeys(issues, kept, data, slipped)
  const removals = reportValueProblems(issues, kept, phrases, meant, plain, data)
  // Deepest first, so that removing a list item does not shift another removal's index.
  for (const path of removals.sort((a, b) => b.length - a.length)) remove(data, path)
  return data
}

/**
 * Keys other tools take that have no place in gateway.yaml, by their name without case, `-` or `_`:
 * what the gateway does instead (a newcomer's finding: `redirectUri:` got only the list of keys).
 */
const FOREIGN_KEYS: ReadonlyMap<string, (parent: Path) => string> = new Map(['redirecturi', 'redirecturl', 'callbackurl', 'callbackuri', 'callback'].map((name) => [name,
  (parent) => `the callback address is not configured: it is \`{server.baseUrl}/oauth/authorized/${parent[0] === 'providers' && typeof parent[1] === 'string' ? parent[1] : '<provider>'}/\` (register that at the provider; set server.baseUrl to the address browsers use)`]))

/** The one required key the mapping `value` (of schema `node`) lacks, when exactly one is missing. */
function soleMissing (node: SchemaNode, value: unknown): string | undefined {
  if (!isObject(value)) return undefined
  const missing = (node.required ?? []).filter((key) => !(key in value))
  return missing.length === 1 ? missing[0] : undefined
}

/**
 * One "unknown key" per key the schema does not allow, with the nearest allowed key as a hint; the
 * key removed from `data`. A mapping's only unknown key, in a mapping that lacks only one required
 * key, is taken as meant to be that key (`target:` for `upstream:`): one problem, not two. Returns
 * the pointers of the keys they were meant to be.
 */
function reportUnknownKeys (issues: Issues, errors: ErrorObject[], data: Record<string, unknown>, slipped: Set<string>): Set<string> {
  const meant = new Set(slipped)
  const unknownAt = new Map<string, number>()
  for (const error of errors) if (error.keyword === 'additionalProperties') unknownAt.set(error.instancePath, (unknownAt.get(error.instancePath) ?? 0) + 1)
  for (const error of errors) {
    if (error.keyword !== 'additionalProperties') continue
    const parent = pathOf(error.instancePath, data)
    const key = String((error.params as { additionalProperty: string }).additionalProperty)
    const node = error.parentSchema as SchemaNode
    const allowed = keysOf(node)
    const foreign = FOREIGN_KEYS.get(key.toLowerCase().replace(/[-_]/g, ''))?.(parent)
    const near = foreign === undefined ? closest(key, allowed) : undefined
    const missing = foreign === undefined && near === undefined && unknownAt.get(error.instancePath) === 1 ? soleMissing(node, valueAt(data, parent)) : undefined
    const match = near ?? missing
    // A key of a section written without its section (`port:` at the top level) says where it goes.
    const holders = match === undefined && foreign === undefined ? sectionsHolding(node, key).slice(0, 3) : []
    if (foreign !== undefined) issues.add([...parent, key], 'unknown key', foreign)
    else if (match !== undefined) issues.add([...parent, key], 'unknown key', missing === undefined ? `did you mean \`${match}\`?` : `\`${match}\` is required here and not given: is this it?`)
    else if (holders.length > 0) issues.add([...parent, key], `unknown key here: it is a key of ${holders.join(' or ')}`, holders.length === 1 ? `write it under \`${holders[0]!}\`` : 'write it under the one it belongs to')
    else issues.add([...parent, key], `unknown key (expected one of: ${allowed.join(', ')})`)
    if (match !== undefined) {
      meant.add(`${error.instancePath}/${match}`)
      issues.touch([...parent, match])
    }
    remove(data, [...parent, key])
  }
  return meant
}

/**
 * The other errors: "is required" (unless a misspelt key was meant to be it), else "must be <this>,
 * got <the value as written>". Returns the paths of the values to remove.
 */
function reportValueProblems (
  issues: Issues, errors: ErrorObject[], phrases: Map<string, SchemaNode>, meant: Set<string>, plain: unknown, data: Record<string, unknown>
): Path[] {
  const removals: Path[] = []
  for (const error of errors) {
    if (error.keyword === 'additionalProperties' || error.keyword === 'propertyNames') continue
    const path = pathOf(error.instancePath, data)
    if (error.propertyName !== undefined) {
      // A key that breaks the mapping's `propertyNames` (a provider name): reported at the key, and
      // kept, so that what refers to it (a route's provider) is not reported as missing too.
      issues.add([...path, error.propertyName], `must be ${expectation(error.parentSchema as SchemaNode)}, got ${describe(error.propertyName)}`)
      continue
    }
    if (error.keyword === 'required') {
      const key = String((error.params as { missingProperty: string }).missingProperty)
      if (!meant.has(`${error.instancePath}/${key}`)) issues.add([...path, key], 'is required')
      continue
    }
    const node = (phrases.get(error.instancePath) ?? error.parentSchema) as SchemaNode
    const original = valueAt(plain, path)
    if (error.keyword === 'minLength' && node.minLength === 1 && !node.expected) {
      issues.add(path, 'must not be empty')
    } else {
      const options = choices(node)
      const hint = options && typeof original === 'string' ? didYouMean(original, options) : shapeHint(node, original)
      issues.add(path, `must be ${expectation(node)}, got ${describe(original)}`, hint)
    }
    removals.push(path)
  }
  return removals
}

/** A key or name as a hint may quote it: plain, short, one line; anything else is left out. */
const QUOTABLE = /^[\w./@-]{1,64}$/

/**
 * How to write a list written as a mapping (`routes:` with `/app/:` under it), or a mapping of
 * names written as a list (`providers:` with `- name: demo`): the first entry in the right form,
 * from its own key or name (a newcomer's slip: "must be a list" alone did not say how).
 */
function shapeHint (node: SchemaNode, original: unknown): string | undefined {
  if (types(node).includes('array') && isObject(original)) {
    const key = node.items?.required?.[0]
    const first = Object.keys(original)[0]
    if (key !== undefined && first !== undefined && QUOTABLE.test(first)) return `write each as an item of a list: \`- ${key}: ${first}\`, its other keys indented under it`
  }
  if (types(node).includes('object') && Array.isArray(original)) {
    const name: unknown = original.find(isObject)?.name
    if (typeof name === 'string' && QUOTABLE.test(name)) return `write each under its name: \`${name}:\`, its keys indented under it (not \`- name: ${name}\`)`
  }
  return undefined
}

/**
 * The schema's defaults filled in (a second pass whose problems, all reported already, are ignored):
 * every key with a `default` in schema.ts is present, so validate.ts writes no default of its own.
 */
export function withDefaults (data: Record<string, unknown>): FilledYaml {
  fill(data)
  // The schema pass removed every value with a problem, and fill has put each default back; what
  // is left has the schema's shape, except for required keys that are missing (reported already):
  // validate.ts reads those defensively.
  return data as FilledYaml
}
