// The rules of `allow` and `deny` (a route's, a forward-auth host's) and forward-auth's query rules,
// from what gateway.yaml or the query gives to the one form the gate compares (src/access/rules.ts):
// trimmed, lower-case e-mails and domains, upper-case methods, claim values as text. What could
// silently admit everyone, or match nothing, is a problem at its key path: a rule without
// conditions, an empty list, a claim path or path glob that no canonical request can meet.
import { domainToASCII } from 'node:url'
import { canonicalTarget, requestSpelling } from './canonical.js'
import { describe, type Issues, type Path } from './problems.js'
import type { ClaimCondition, Network, Rule, RuleLists } from './types.js'
import { parseNetwork } from './networks.js'

/** One rule as gateway.yaml writes it (the schema pass has checked the types and keys). */
export interface RuleYaml {
  users?: string[]
  emails?: string[]
  domains?: string[]
  groups?: string[]
  claims?: Record<string, Array<string | number | boolean>>
  methods?: string[]
  paths?: string[]
  networks?: string[]
  providers?: string[]
}

type RuleListYaml = RuleYaml | RuleYaml[] | undefined

/** The conditions the object form of a route's `allow` had before rule lists: any of them admitted. */
const ANY_OF = ['emails', 'domains', 'groups'] as const

/**
 * A claim path: dotted (`realm_access.roles`, steps of letters, digits, `_`, `-`, `:`, `$`, `@`) or a
 * JSON pointer (`/https:~1~1example.com~1roles` for a claim whose name has dots).
 */
export const CLAIM_PATH = /^(?:[\w$:@-]+(?:\.[\w$:@-]+)*|(?:\/[^/\s]*)+)$/

function texts (list: readonly string[] | undefined, form: (value: string) => string): string[] {
  return (list ?? []).map((value) => form(value.trim())).filter((value) => value !== '')
}

/**
 * A mail domain as rules compare it, one spelling per DNS name: lower case, an internationalised
 * name in IDNA's ASCII form (`Bücher.example` and `xn--bcher-kva.example` are one; IDNA maps other
 * full stops, `。．｡`, to `.` and drops soft hyphens), then without the root's trailing dot, however
 * often it is written (`example.com.` and `example.com..` are `example.com`, as to a mail server
 * or resolver that drops them). Undefined for a name IDNA refuses (a joiner inside a label):
 * which domain it is cannot be told. The rules and the identity they judge are both read through it.
 */
export function foldDomain (domain: string): string | undefined {
  const lower = domain.toLowerCase()
  // ASCII is IDNA's own form already (an address's domain literal, `[192.0.2.1]`, is kept as written).
  const ascii = ASCII_NAME.test(lower) ? lower : domainToASCII(lower)
  let end = ascii.length
  while (end > 0 && ascii[end - 1] === '.') end--
  return end === 0 ? undefined : ascii.slice(0, end)
}

/**
 * An e-mail address as rules compare it: its local part in Unicode's composed form (NFC: `josé`
 * typed with a combining accent is `josé`) and lower case, and without quotes that change nothing
 * (`"mallory"@` is `mallory@`, the same mailbox: RFC 5321 §4.1.2); its domain folded (foldDomain).
 * Undefined when the domain cannot be.
 */
export function foldEmail (email: string): string | undefined {
  const at = email.lastIndexOf('@')
  const domain = foldDomain(email.slice(at + 1))
  if (domain === undefined) return undefined
  const local = email.slice(0, Math.max(at, 0)).normalize('NFC').toLowerCase()
  const quoted = /^"([^"\\\s]*)"$/.exec(local)
  const bare = quoted !== null && DOT_ATOM.test(quoted[1]!) ? quoted[1]! : local
  return at < 0 ? domain : `${bare}@${domain}`
}

/** A local part that needs no quotes (RFC 5322 dot-atom, and any non-ASCII letter, RFC 6531). */
const DOT_ATOM = /^[^\s"(),.:;<>@[\\\]]+(?:\.[^\s"(),.:;<>@[\\\]]+)*$/u

/**
 * A name or address as a `deny` compares it, before foldEmail or lower case: in Unicode's
 * compatibility form (NFKC: `ｍａｌｌｏｒｙ` is `mallory`, a combining accent is composed), without
 * default-ignorable code points in a name or an address's local part (a soft hyphen, a zero-width
 * space: `mal\u00adlory` shows as `mallory`), and an address without its comments and its quoted local part's escapes
 * (`mallory(x)@`, `"mal\\lory"@` are `mallory@`: RFC 5322 §3.2.2, §3.4.1). A deny folds more than an
 * allow may: it refuses more, never less.
 */
function loosened (name: string): string {
  const plain = name.normalize('NFKC')
  if (!plain.includes('@')) return plain.replace(IGNORABLE, '')
  const bare = withoutComments(plain)
  const at = bare.lastIndexOf('@')
  // The domain keeps them: IDNA refuses a joiner inside a label, and such a domain cannot be told.
  const local = bare.slice(0, at).replace(IGNORABLE, '')
  return `${/^".*"$/s.test(local) ? local.replace(/\\(.)/gs, '$1') : local}${bare.slice(at)}`
}

/** Code points that show as nothing (a soft hyphen, a zero-width space or joiner). */
const IGNORABLE = /\p{Default_Ignorable_Code_Point}/gu

/** `address` without its comments, nested ones too (`a(b(c))@x` is `a@x`), in one pass; an unmatched `)` is kept. */
function withoutComments (address: string): string {
  if (!address.includes('(')) return address
  let depth = 0
  let out = ''
  for (const char of address) {
    if (char === '(') depth++
    else if (char === ')' && depth > 0) depth--
    else if (depth === 0) out += char
  }
  return out
}

/** An address as a `deny` on `emails` compares it: loosened, then as foldEmail. */
export function foldDeniedEmail (email: string): string | undefined {
  return foldEmail(loosened(email))
}

/**
 * A user name or subject as a `deny` entry compares it: loosened, in lower case, and one that is
 * an address folded as `emails` fold it. A name's case is how the provider displays it (GitHub lets
 * a person rename `mallory` to `Mallory`; an Azure UPN keeps the case it was typed in), so a deny
 * written in another case must still hold.
 */
export function foldName (name: string): string {
  const plain = loosened(name)
  return (plain.includes('@') ? foldEmail(plain) : undefined) ?? plain.toLowerCase()
}

/** A name of printable ASCII: what IDNA would change only by case, which foldDomain has done. */
const ASCII_NAME = /^[\x21-\x7e]*$/

/** A rule in the form the gate compares; `name` says where it is written. */
export function normalisedRule (name: string, raw: RuleYaml): Rule {
  return {
    name,
    users: texts(raw.users, (user) => user),
    // One IDNA refuses matches no address (none folds to it); a deny on it holds on the addresses that cannot be told.
    emails: texts(raw.emails, (email) => foldEmail(email) ?? email.toLowerCase()),
    domains: texts(raw.domains, (domain) => foldDomain(domain.replace(/^@/, '')) ?? domain.toLowerCase()),
    groups: texts(raw.groups, (group) => group),
    claims: Object.entries(raw.claims ?? {}).map(([path, values]): ClaimCondition => ({ path: path.trim(), values: values.map(String) })),
    methods: texts(raw.methods, (method) => method.toUpperCase()),
    paths: texts(raw.paths, (path) => path),
    // One that does not parse is left out here and reported by checkRule (the config is then refused).
    networks: (raw.networks ?? []).map(parseNetwork).filter((network): network is Network => typeof network !== 'string'),
    providers: texts(raw.providers, (provider) => provider),
  }
}

/** How many conditions a rule gives. */
export function conditionCount (rule: Rule): number {
  return [rule.users, rule.emails, rule.domains, rule.groups, rule.claims, rule.methods, rule.paths, rule.networks, rule.providers].filter((list) => list.length > 0).length
}

/**
 * Why a path glob can never meet a canonical path (or could be read two ways), or undefined. The
 * canonical path has no empty, `.` or `..` segment, no `\`, and never the query or fragment; it is
 * spelled as the edge spells it (canonical.ts), which a glob must be too (see spellingProblem).
 */
export function globProblem (glob: string): string | undefined {
  if (glob === '*') return undefined
  if (!glob.startsWith('/')) return 'must start with / (or be * for any path)'
  // eslint-disable-next-line no-control-regex -- control characters are what is looked for
  if (/[\s\\?#\u0000-\u001f\u007f]/.test(glob)) return 'may not hold spaces, control characters, \\, ? or # (the query is never part of the path)'
  if (/\/\//.test(glob)) return 'has an empty segment (//), which no canonical path has'
  if (/(?:^|\/)\.{1,2}(?:\/|$)/.test(glob)) return 'has a . or .. segment, which no canonical path has'
  return spellingProblem(glob)
}

/**
 * Why a glob is not spelled as the edge spells every path (`*` is a character it keeps): a
 * non-ASCII character, lower-case `%xx`, an encoded byte the edge decodes (`%61`, `%3A`), a character the edge
 * encodes (`{`, `"`, `|`) or refuses (`;`, `%2F`). Such a glob matches no request, so a `deny` would
 * silently never hold: refused, with the spelling to write. Non-ASCII is read as its UTF-8 bytes,
 * as a browser sends it.
 */
function spellingProblem (glob: string): string | undefined {
  let text: string
  try {
    text = glob.replace(/\P{ASCII}+/gu, (run) => encodeURIComponent(run))
  } catch {
    return 'never matches a request: it is not valid Unicode'
  }
  const canonical = canonicalTarget(text)
  if (!canonical.ok) return `never matches a request: the edge refuses such a path (${canonical.reason})`
  return canonical.url === glob ? undefined : `never matches a request: the edge spells such a path ${describe(canonical.url)} (write that)`
}

/**
 * Problems of one rule's values, at their key paths: what no request could ever meet. `routePath`:
 * the route's path, which every path it judges is under (rules see the gateway's path, before
 * `rewritePrefix`); undefined for a forward-auth host.
 */
function checkRule (issues: Issues, at: Path, rule: Rule, raw: RuleYaml, routePath: string | undefined): void {
  for (const path of Object.keys(raw.claims ?? {})) {
    if (!CLAIM_PATH.test(path.trim())) issues.add([...at, 'claims', path], `must be a dotted claim path such as realm_access.roles (or a JSON pointer such as /roles/0), got ${describe(path)}`)
  }
  raw.networks?.forEach((entry, i) => {
    const network = parseNetwork(entry)
    if (typeof network === 'string') issues.add([...at, 'networks', i], `must be ${network}`)
  })
  // After its values' own problems: a rule whose only condition is a bad network gives one message, at the network.
  if (conditionCount(rule) === 0 && !issues.touched(at)) {
    issues.add(at, 'gives no condition: give users, emails, domains, groups, claims, methods, paths, networks or providers')
  }
  rule.paths.forEach((glob, i) => {
    const problem = globProblem(glob) ?? outsideRoute(glob, routePath)
    if (problem !== undefined) issues.add([...at, 'paths', i], `${problem}, got ${describe(glob)}`)
  })
}

/** Why a glob can match no path of the route (`/admin/*` on a route `/app/`), or undefined. */
function outsideRoute (glob: string, routePath: string | undefined): string | undefined {
  // Globs are in the request's spelling: on a route `/café`, `/caf%C3%A9/admin/*`.
  if (routePath === undefined || routePath === '/' || glob === '*' || glob.startsWith(requestSpelling(routePath))) return undefined
  return `is outside the route's path ${routePath}/: every request this route judges is under it (rules see the gateway's path, before rewritePrefix)`
}

/** A list (or one rule object) as rules named `<key>[i]` (or `<key>`), each checked. */
function ruleList (issues: Issues, at: Path, key: string, raw: RuleListYaml, routePath: string | undefined): Rule[] | undefined {
  if (raw === undefined) return undefined
  const entries = Array.isArray(raw) ? raw.map((rule, i) => [`${key}[${i}]`, [...at, i], rule] as const) : [[key, at, raw] as const]
  return entries.map(([name, path, yaml]) => {
    const rule = normalisedRule(name, yaml)
    checkRule(issues, path, rule, yaml, routePath)
    return rule
  })
}

/**
 * A route's `allow` object as it was written before rule lists: two or more of emails, domains and
 * groups and nothing else, which admitted on any of them. It keeps that meaning, as one rule per
 * condition (`allow.emails`, `allow.groups`): read as one rule it would silently need all of them.
 */
function anyOfRules (issues: Issues, at: Path, raw: RuleListYaml): Rule[] | undefined {
  if (raw === undefined || Array.isArray(raw)) return undefined
  const given = Object.keys(raw).filter((key) => raw[key as keyof RuleYaml] !== undefined)
  const anyOf = ANY_OF.filter((key) => given.includes(key))
  if (anyOf.length < 2) return undefined
  if (anyOf.length !== given.length) {
    issues.add(at, `names ${anyOf.join(' and ')} with other conditions: this object form once admitted any of ${anyOf.join(', ')}; ` +
      'write a list of rules instead: [{ emails: [...], methods: [GET] }, { groups: [...], methods: [GET] }] for any of them, or [{ emails: [...], groups: [...], methods: [GET] }] for all (each rule needs all of its conditions)')
    return []
  }
  return anyOf.map((key) => {
    const rule = normalisedRule(`allow.${key}`, { [key]: raw[key] })
    checkRule(issues, [...at, key], rule, {}, undefined)
    return rule
  })
}

/** Where a rule list is written: a route (its path; its `allow` object may be in the earlier any-of form, see anyOfRules), or a forward-auth host. */
export type RuleSite = { route: string } | { host: string }

/**
 * `allow` and `deny` at `at`: a route's, or a forward-auth host's (whose rules are then named after
 * it: `hosts.payroll.example.com.deny[0]`).
 */
export function ruleLists (issues: Issues, at: Path, raw: { allow?: RuleListYaml, deny?: RuleListYaml }, site: RuleSite): RuleLists {
  const routePath = 'route' in site ? site.route : undefined
  const prefix = 'host' in site ? `hosts.${site.host}.` : ''
  const allow = (routePath !== undefined ? anyOfRules(issues, [...at, 'allow'], raw.allow) : undefined) ?? ruleList(issues, [...at, 'allow'], `${prefix}allow`, raw.allow, routePath)
  if (allow?.length === 0 && !issues.touched([...at, 'allow'])) {
    issues.add([...at, 'allow'], 'allows nobody: give a rule (or remove allow to let any signed-in person in)')
  }
  return { allow, deny: ruleList(issues, [...at, 'deny'], `${prefix}deny`, raw.deny, routePath) ?? [] }
}

/** The claim paths rules name. */
export function claimPaths (lists: RuleLists): string[] {
  return [...(lists.allow ?? []), ...lists.deny].flatMap((rule) => rule.claims.map((claim) => claim.path))
}

/**
 * Each rule's `providers` names a provider whose people or tokens reach where the rule is written
 * (`names`: a route's providers and bearer issuers; any configured one at a forward-auth host): one
 * that cannot would silently never hold.
 */
export function checkRuleProviders (issues: Issues, at: Path, lists: RuleLists, names: readonly string[]): void {
  const rules = [...(lists.allow ?? []).map((rule, i) => [rule, 'allow', i] as const), ...lists.deny.map((rule, i) => [rule, 'deny', i] as const)]
  for (const [rule, list, i] of rules) {
    rule.providers.forEach((name, j) => {
      if (!names.includes(name)) issues.add([...at, list, ...(rule.name.endsWith(']') ? [i] : []), 'providers', j], `names ${describe(name)}, whose people and tokens never reach here: the rule could never hold`, `known here: ${names.join(', ') || 'none'}`)
    })
  }
}
