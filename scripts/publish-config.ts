// What src/config/schema.ts publishes: gateway.schema.json (for editors, through a
// yaml-language-server modeline) and the reference table of docs/configuration.md. `npm run
// docs:config` writes both; test/config/publish.test.ts fails when one is stale. (The gateway's own
// validators are compiled at every build: scripts/compile-validators.ts.) A build-time tool: the
// gateway never imports it (nor TypeBox, which only src/config/schema.ts and the scripts use).
import { readFile, writeFile } from 'node:fs/promises'
import { pathToFileURL } from 'node:url'
import { GatewayYamlSchema } from '../src/config/schema.js'

interface Node {
  type?: string | string[]
  description?: string
  default?: unknown
  defaultText?: string
  examples?: unknown[]
  properties?: Record<string, Node>
  patternProperties?: Record<string, Node>
  items?: Node
  anyOf?: Node[]
  const?: unknown
  enum?: unknown[]
  pattern?: string
  minimum?: number
  maximum?: number
  required?: string[]
  [keyword: string]: unknown
}

/**
 * A value that is one `${VAR}` or `${VAR:-default}` reference, as a whole: allowed wherever a scalar
 * is, since it is replaced before validation. Only the whole value: a reference inside a value with
 * a pattern (`/oauth/${X}`) would otherwise pass the editor whatever the rest of it says.
 */
const VARIABLE = { type: 'string', pattern: '^\\$\\{[A-Za-z_][A-Za-z0-9_]*(:-[^}]*)?\\}$', description: 'Replaced from the environment before validation.' }

const types = (node: Node): string[] => node.type === undefined ? [] : Array.isArray(node.type) ? node.type : [node.type]

/** Takes any string as it is (so a `${VAR}` there is already fine). */
function takesAnyString (node: Node): boolean {
  return types(node).includes('string') && node.pattern === undefined && node.const === undefined && node.enum === undefined
}

/** The schema for editors: our own annotations dropped, `${VAR}` accepted wherever a scalar is. */
function forEditors (node: Node, branch = false): Node {
  const out: Node = {}
  for (const [key, value] of Object.entries(node)) {
    if (key === 'expected' || key === 'defaultText') continue
    if (key === 'properties' || key === 'patternProperties') {
      out[key] = Object.fromEntries(Object.entries(value as Record<string, Node>).map(([name, child]) => [name, forEditors(child)]))
    } else if (key === 'items') {
      out[key] = forEditors(value as Node)
    } else if (key === 'propertyNames') {
      out[key] = forEditors(value as Node, true)
    } else if (key === 'anyOf') {
      out[key] = (value as Node[]).map((child) => forEditors(child, true))
    } else {
      out[key] = value
    }
  }
  if (branch || types(node).includes('object') || types(node).includes('array') || takesAnyString(node)) return out
  if (out.anyOf) return (node.anyOf ?? []).some(takesAnyString) ? out : { ...out, anyOf: [...out.anyOf, VARIABLE] }
  // A number, boolean or patterned string: the value itself, or a variable.
  const { description, default: fallback, examples, ...rest } = out
  return { ...(description !== undefined ? { description } : {}), ...(fallback !== undefined ? { default: fallback } : {}), ...(examples ? { examples } : {}), anyOf: [rest, VARIABLE] }
}

/** gateway.schema.json's text. */
export function publishedSchema (): string {
  const schema = {
    $schema: 'http://json-schema.org/draft-07/schema#',
    ...forEditors(structuredClone(GatewayYamlSchema) as unknown as Node),
  }
  return `${JSON.stringify(schema, null, 2)}\n`
}

/** `string`, `integer 0-65535`, `duration`, `redis \| memory`, `list of string`... */
function typeText (node: Node): string {
  if (node.anyOf) {
    if (node.anyOf.every((branch) => branch.const !== undefined)) return node.anyOf.map((branch) => `\`${String(branch.const)}\``).join(' \\| ')
    return node.anyOf.map(typeText).join(' or ')
  }
  if (node.const !== undefined) return `\`${String(node.const)}\``
  if (node.pattern?.includes('ms|s|m|h|d')) return 'duration'
  const [type] = types(node)
  if (type === 'integer' && node.minimum !== undefined && node.maximum !== undefined) return `integer ${node.minimum}-${node.maximum}`
  if (type === 'array') return `list of ${typeText(node.items ?? {})}`
  if (type === 'object') return 'mapping'
  return type ?? 'any'
}

function code (value: unknown): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value)
  return `\`${text.replace(/\|/g, '\\|')}\``
}

function defaultText (node: Node, required: boolean): string {
  if (required) return 'required'
  if (node.defaultText) return String(node.defaultText).replace(/\|/g, '\\|')
  if (node.default === undefined || (typeof node.default === 'object' && node.default !== null && !Array.isArray(node.default))) return '—'
  return code(node.default)
}

function row (path: string, node: Node, required: boolean): string {
  const example = node.examples?.[0] === undefined ? '' : code(node.examples[0])
  const meaning = (node.description ?? '').replace(/\|/g, '\\|').replace(/\n/g, ' ')
  return `| \`${path}\` | ${typeText(node)} | ${defaultText(node, required)} | ${meaning} | ${example} |`
}

/** Every key of the schema, depth first, as table rows. */
function rows (node: Node, path: string, out: string[]): void {
  const children: Array<[string, Node, boolean]> = []
  for (const [key, child] of Object.entries(node.properties ?? {})) children.push([path ? `${path}.${key}` : key, child, node.required?.includes(key) ?? false])
  for (const child of Object.values(node.patternProperties ?? {})) children.push([`${path}.<name>`, child, false])
  for (const [childPath, child, required] of children) {
    const nested = child.items && types(child.items).includes('object') ? child.items : child
    const nestedPath = nested === child ? childPath : `${childPath}[]`
    const isSection = types(nested).includes('object') && (nested.properties !== undefined || nested.patternProperties !== undefined)
    // A rule or a list of rules (`allow`, `deny`): the rule's keys are listed under the key itself.
    const objectBranch = child.anyOf?.find((branch) => branch.properties !== undefined)
    if (isSection) {
      if (path !== '') out.push(row(nestedPath, child, required))
      rows(nested, nestedPath, out)
    } else {
      out.push(row(childPath, child, required))
      if (objectBranch !== undefined) rows(objectBranch, childPath, out)
    }
  }
}

export const BEGIN = '<!-- BEGIN GENERATED: config reference (npm run docs:config) -->'
export const END = '<!-- END GENERATED: config reference -->'

/** The generated part of docs/configuration.md, markers included. */
export function referenceTable (): string {
  const lines: string[] = []
  for (const [section, node] of Object.entries((GatewayYamlSchema as unknown as Node).properties ?? {})) {
    lines.push(`### \`${section}\``, '', node.description ?? '', '', '| Key | Type | Default | Meaning | Example |', '|---|---|---|---|---|')
    const section_: string[] = []
    const nested = node.items ?? node
    if (nested.properties === undefined && nested.patternProperties === undefined) section_.push(row(section, node, false))
    rows(nested, node.items ? `${section}[]` : section, section_)
    lines.push(...section_, '')
  }
  return `${BEGIN}\n${lines.join('\n')}${END}`
}

/** `text` with the part between the markers replaced by the current reference. */
export function withReference (text: string): string {
  const start = text.indexOf(BEGIN)
  const end = text.indexOf(END)
  if (start === -1 || end === -1) throw new Error(`docs/configuration.md has no ${BEGIN} ... ${END} markers`)
  return `${text.slice(0, start)}${referenceTable()}${text.slice(end + END.length)}`
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await writeFile('gateway.schema.json', publishedSchema())
  await writeFile('docs/configuration.md', withReference(await readFile('docs/configuration.md', 'utf8')))
  process.stdout.write('wrote gateway.schema.json and docs/configuration.md\n')
}
