// Who may pass: `allow` and `deny` lists of rules (src/config/rule-lists.ts reads them), compiled once
// into one pure function of (identity, method, canonical path, client address, provider). A rule holds when every condition it
// gives holds; a list inside a condition matches any of its values. `deny` wins; no `allow` list
// lets any signed-in person in. Paths are matched by glob.ts, linearly in the path, never by a
// regular expression.
//
// What cannot be told (a method or path forward-auth was not given by a trusted proxy, a person
// without identity, a claim the session never read, an unverified e-mail address, a client address
// that is not an IP address, a provider not told) never holds in an `allow` rule and always holds in a `deny` rule: what
// cannot be judged is refused, never admitted. A `deny` rule's GET covers HEAD, and a `paths` glob
// `/admin/*` covers `/admin` itself.
//
// A `deny` glob also holds on the path as a case-insensitive application reads it (lower case, each
// segment without trailing dots and spaces and IIS's NTFS stream suffix: src/config/path-fold.ts,
// the edge's own fold), compared with the glob folded the same way: `/wiki/ADMIN./users` is
// `/wiki/admin/users` to Express or IIS.
// So does the path as common routers dispatch it (src/config/path-fold.ts routedForms): a script
// segment followed by more (`/app/index.php/admin/x`, PHP's PATH_INFO), a trailing `/` (Express's
// and Rails' loose routing) and a format suffix (`/admin.json`, Rails) taken away; the script such a
// path runs (`/app/xmlrpc.php/x` runs `/app/xmlrpc.php`); and a path a front controller takes from
// the query (`/index.php?/admin/x`, CodeIgniter). An `allow` glob matches only the exact path, and
// admits it only with the script it runs and the paths its query routes to: the other readings may
// refuse more, never admit more.
import type { Rule, RuleLists } from '../config/types.js'
import { routedForms } from '../config/path-fold.js'
import { foldDeniedEmail, foldDomain, foldEmail, foldName } from '../config/rule-lists.js'
import type { Identity, PersonField } from '../session/record.js'
import { deniedAddress, deniedNames, listedOrSubaddress } from './deny-forms.js'
import { addressSet, fromElsewhere, type AddressSet } from './address-sets.js'
import { globMatcher } from './glob.js'
import { networkTest, type NetworkTest } from './networks.js'
import { admitsWhatItRuns, denyFold, NO_READINGS, otherReadings, UNTOLD } from './path-readings.js'

/** The outcome, and the rule that decided it (`deny[0]`, `allow[1]`; undefined: no rule did). */
export interface Judgement {
  readonly admit: boolean
  readonly rule: string | undefined
  /**
   * On a refusal, what kind of rule refused, for the refusals metric (never a value): the refusing
   * `deny` rule's condition names joined by `+` (`networks`, `groups+paths`), or `no_allow_rule`.
   */
  readonly refusedBy?: string
  /**
   * On a refusal: another request of the route this person would pass (found among the route's own
   * path and one path per glob its rules name, in every common method), so that another account is
   * no remedy. Absent: none of those passes.
   */
  readonly partial?: { readonly method: string, readonly path: string }
  /**
   * On a refusal with no allow rule matched: an allow rule takes this request (its methods and paths)
   * from other networks, and none from this address, so no account would pass from here (the 403
   * offers none, and says the address refused).
   */
  readonly byAddress?: true
}

/**
 * Judges one request. `path` is the canonical target: a glob never sees its query, from the first
 * `?` (glob.ts). `method` is upper case.
 */
export type Judge = (identity: Identity | undefined, method: string | undefined, path: string | undefined, address: string | undefined, provider?: string) => Judgement

/**
 * One condition of a rule: true when it holds. What the gateway cannot vouch for (a method or path
 * not told, an unverified address, a person without identity, a claim not read) counts as a match
 * in a `deny` rule (`inDeny`) and as none in an `allow` rule: refused, never admitted. `readings`: the
 * other ways an application may read the path (see otherReadings), given to `deny` rules only.
 */
type Condition = (identity: Identity | undefined, method: string | undefined, path: string | undefined, address: string | undefined, provider: string | undefined, inDeny: boolean, readings: readonly string[]) => boolean

const ADMITTED: Judgement = Object.freeze({ admit: true, rule: undefined })
const NO_ALLOW: Judgement = Object.freeze({ admit: false, rule: undefined, refusedBy: 'no_allow_rule' })
const NO_ALLOW_FROM_HERE: Judgement = Object.freeze({ ...NO_ALLOW, byAddress: true })

/** The address a rule may match: in an `allow` rule, none when the provider marked it unverified. */
function ruleEmail (identity: Identity, inDeny: boolean): string | undefined {
  return identity.emailVerified === false && !inDeny ? undefined : identity.email
}

function domainOf (email: string): string | undefined {
  return foldDomain(email.slice(email.lastIndexOf('@') + 1))
}

/**
 * An `emails` or `domains` condition: the person's address, as `fold` reads it (the address, its
 * domain), is listed. One whose domain IDNA refuses cannot be told.
 */
function addressCondition (fold: (email: string) => string | undefined, listed: readonly string[]): Condition {
  return aboutField('email', (identity, deny) => {
    const email = ruleEmail(identity, deny)
    if (email === undefined) return false
    const folded = fold(email)
    if (folded === undefined) return deny
    return listed.includes(folded)
  })
}

/**
 * An `emails` or `domains` condition of a `deny` rule: the person's address as a deny folds it
 * (deny-forms.ts), or a subaddress of it, is listed (`emails`), or its domain is (`domains`); one
 * that cannot be told holds.
 */
function deniedAddressCondition (listed: readonly string[], part: 'address' | 'domain'): Condition {
  return aboutField('email', (identity) => {
    const folded = deniedAddress(identity)
    if (folded === null) return true
    if (folded === undefined) return false
    return part === 'address' ? listedOrSubaddress(listed, folded) : listed.includes(folded.slice(folded.lastIndexOf('@') + 1))
  })
}

/**
 * A condition about the person: with no identity (a provider that gave no user name) it cannot be
 * told, so it holds in a `deny` rule and fails in an `allow` rule.
 */
function aboutPerson (test: (identity: Identity, inDeny: boolean) => boolean): Condition {
  return (identity, _method, _path, _address, _provider, inDeny) => identity === undefined ? inDeny : test(identity, inDeny)
}

/**
 * A condition on a person field that a token may not carry (Identity.unknown): when it did not, the
 * field cannot be told, as a person without identity cannot.
 */
function aboutField (field: PersonField, test: (identity: Identity, inDeny: boolean) => boolean): Condition {
  return aboutPerson((identity, inDeny) => identity.unknown?.includes(field) === true ? inDeny : test(identity, inDeny))
}

/**
 * A `groups` condition of a `deny` rule: a group, or a word of one (groupWords), in any spelling
 * (foldName: case, compatibility forms, invisible characters), as a `users` or `claims` deny reads
 * its values (an outside tester's finding: a token's `Contractors`, `ｃｏｎｔｒａｃｔｏｒｓ` or
 * `contrac\u00adtors` passed a deny on `contractors`). An `allow` reads groups only as written.
 */
function deniedGroupsCondition (groups: readonly string[]): Condition {
  const denied = new Set(groups.flatMap(groupSpellings))
  // A session in 1.0's record form cannot tell its groups (Identity.untoldGroups: an outside
  // tester's run of a rolling upgrade): it meets the deny, as a `users` deny. A token marks what it
  // does not say in `unknown` (aboutField).
  return aboutField('groups', (identity) => identity.untoldGroups === true || foldedGroups(identity).some((spelling) => denied.has(spelling)))
}

/**
 * A group's spellings a deny compares: foldName's, and with every invisible character taken out
 * (foldName keeps a joiner in an address's domain, which IDNA refuses: a re-reading's finding, an
 * address-like group `contractors@co\u200drp.example` passed a deny on `contractors@corp.example`).
 */
function groupSpellings (group: string): string[] {
  const folded = foldName(group)
  // Folded in full once they are out: a joiner and a trailing dot together (a re-reading's finding).
  const bare = foldName(group.normalize('NFKC').replace(INVISIBLE, ''))
  return folded === bare ? [folded] : [folded, bare]
}

const INVISIBLE = /\p{Default_Ignorable_Code_Point}/gu

/**
 * An identity's groups and their words, each as groupSpellings reads it: folded once per identity
 * object (a session's is kept while it is cached), not per rule and request (a re-reading's finding: 2,000 address-like groups
 * and five deny rules cost 32 ms a request).
 */
function foldedGroups (identity: Identity): readonly string[] {
  let folded = FOLDED_GROUPS.get(identity)
  if (folded === undefined) FOLDED_GROUPS.set(identity, folded = [...identity.groups, ...identity.groupWords ?? []].flatMap(groupSpellings))
  return folded
}

const FOLDED_GROUPS = new WeakMap<Identity, readonly string[]>()

/**
 * A claim condition. A claim the session read at sign-in and did not find (kept as no values) does
 * not match; one the session never read (named by a rule added since) cannot be told. Own entries
 * only: a claim path such as `constructor` must not read what every object inherits.
 */
function claimCondition (path: string, values: readonly string[], inDeny: boolean): Condition {
  const accepted = new Set(values)
  // A deny reads values in any spelling, as a `users` deny does (foldName): an owner or a group a
  // provider spells `Evil-Corp` is the `evil-corp` the operator typed (an outside tester's finding).
  const denied = inDeny ? new Set(values.map(foldName)) : accepted
  return aboutPerson((identity, deny) => {
    const claims = identity.claims
    if (claims === undefined || !Object.hasOwn(claims, path)) return deny
    return deny ? claims[path]!.some((value) => denied.has(foldName(value))) : claims[path]!.some((value) => accepted.has(value))
  })
}

/**
 * A `users` condition. An entry names a person by the provider's stable subject (`sub`; GitHub: the
 * numeric id), or by the mapped user name only where no other account can come to hold it: when
 * it is the person's verified e-mail address (as an `emails` entry would). A reassignable name
 * (`preferred_username`, a GitHub `login`) never admits. In a `deny` rule either form holds, and so
 * does a session from before the subject was kept, or a token without `sub` or without the mapped
 * user name (who it is cannot be told).
 */
function usersCondition (users: readonly string[]): Condition {
  const listed = new Set(users)
  // A deny reads entries and names in any spelling (foldName, deny-forms.ts); an allow only as written.
  const denied = users.map(foldName)
  return aboutPerson((identity, inDeny) => {
    const nameTold = identity.unknown?.includes('user') !== true
    if (inDeny) return identity.subject === undefined || !nameTold || isDenied(denied, deniedNames(identity))
    if (identity.subject !== undefined && listed.has(identity.subject)) return true
    return nameTold && identity.emailVerified !== false && identity.email !== undefined && identity.sub.toLowerCase() === identity.email && listed.has(identity.sub)
  })
}

/** Whether a `users` deny's entries name one of a person's names (null: too long to tell, so they do). */
function isDenied (denied: readonly string[], names: readonly string[] | null): boolean {
  return names === null || names.some((name) => listedOrSubaddress(denied, name))
}

/** A `paths` glob: `/admin/*` covers `/admin` itself too, as a route's path `/admin/` does. */
function pathMatcher (glob: string): (path: string) => boolean {
  const matches = globMatcher(glob)
  if (!glob.endsWith('/*') || glob.length < 3) return matches
  const directory = globMatcher(glob.slice(0, -2))
  return (path) => matches(path) || directory(path)
}

/**
 * Each condition the rule gives, compiled. `inDeny`: a `deny` rule's GET covers HEAD (the same handler
 * answers both). `request` and `inNetworks`: its request conditions and its networks' test, compiled once for it.
 */
function conditions (rule: Rule, inDeny: boolean, request: readonly Condition[], inNetworks: NetworkTest | undefined): Condition[] {
  const list: Condition[] = []
  if (rule.users.length > 0) list.push(usersCondition(rule.users))
  if (rule.emails.length > 0) list.push(inDeny ? deniedAddressCondition(rule.emails.map((email) => foldDeniedEmail(email) ?? email), 'address') : addressCondition(foldEmail, rule.emails))
  if (rule.domains.length > 0) list.push(inDeny ? deniedAddressCondition(rule.domains, 'domain') : addressCondition(domainOf, rule.domains))
  if (rule.groups.length > 0) list.push(inDeny ? deniedGroupsCondition(rule.groups) : aboutField('groups', (identity) => identity.groups.some((group) => rule.groups.includes(group))))
  for (const claim of rule.claims) list.push(claimCondition(claim.path, claim.values, inDeny))
  list.push(...request)
  if (inNetworks !== undefined) list.push((_identity, _method, _path, address, _provider, deny) => inNetworks(address) ?? deny)
  if (rule.providers.length > 0) list.push((_identity, _method, _path, _address, provider, deny) => provider === undefined ? deny : rule.providers.includes(provider))
  return list
}

/** The conditions on the request itself (`methods`, `paths`): what no account and no network changes. */
function requestConditions (rule: Rule, inDeny: boolean): Condition[] {
  const list: Condition[] = []
  if (rule.methods.length > 0) {
    const methods = inDeny ? withSameActions(rule.methods) : rule.methods
    list.push((_identity, method, _path, _address, _provider, deny) => method === undefined ? deny : methods.includes(method))
  }
  if (rule.paths.length > 0) {
    const globs = rule.paths.map(pathMatcher)
    // A deny glob read as the path is: folded, and as routers dispatch it (`/app/index.php/admin` is `/app/admin`).
    const foldedGlobs = inDeny ? rule.paths.flatMap((glob) => [denyFold(glob), ...routedForms(denyFold(glob), true)]).map(pathMatcher) : []
    const admits = (path: string) => globs.some((glob) => glob(path))
    list.push((_identity, _method, path, _address, _provider, deny, readings) => path === undefined || readings === UNTOLD
      ? deny
      : deny
        ? admits(path) || readings.some((reading) => foldedGlobs.some((glob) => glob(reading)))
        // An allow glob admits the path only with the script it runs and every path its query routes to.
        : admits(path) && admitsWhatItRuns(path, admits))
  }
  return list
}

/**
 * Methods that routers send to the same action as one a `deny` names: HEAD to GET's (every
 * framework), PATCH and PUT to one `update` (Rails' resources; an outside tester's finding: a deny
 * on PUT let PATCH through). A deny on either holds on both.
 */
const SAME_ACTION: Readonly<Record<string, string>> = { GET: 'HEAD', PUT: 'PATCH', PATCH: 'PUT' }

function withSameActions (methods: readonly string[]): readonly string[] {
  const more = methods.flatMap((method) => Object.hasOwn(SAME_ACTION, method) && !methods.includes(SAME_ACTION[method]!) ? [SAME_ACTION[method]!] : [])
  return more.length === 0 ? methods : [...methods, ...new Set(more)]
}

interface CompiledRule {
  readonly name: string
  /** The condition names it gives, joined by `+`. */
  readonly kinds: string
  readonly holds: (identity: Identity | undefined, method: string | undefined, path: string | undefined, address: string | undefined, provider: string | undefined, readings?: readonly string[]) => boolean
  /**
   * Whether someone at `address` could meet it with this request: its `methods` and `paths` take
   * the request, and its `networks` (if any) the address. `undefined`: the request is not one it
   * takes, from anywhere.
   */
  readonly takesFrom: (method: string | undefined, path: string | undefined, address: string | undefined, readings?: readonly string[]) => boolean | undefined
  /** It names no condition on the person (users, emails, domains, groups, claims, providers): it holds for everyone alike. */
  readonly personless: boolean
  /** The addresses its `networks` take (every address without them). */
  readonly region: AddressSet
}

/** `inDeny`: the rule is a `deny` rule (see Condition). */
function compiled (rule: Rule, inDeny: boolean): CompiledRule {
  const request = requestConditions(rule, inDeny)
  const inNetworks = rule.networks.length > 0 ? networkTest(rule.networks) : undefined
  const list = conditions(rule, inDeny, request, inNetworks)
  return {
    name: rule.name,
    kinds: CONDITION_NAMES.filter((key) => rule[key].length > 0).join('+'),
    // A rule without conditions holds for nobody (the config refuses one).
    holds: (identity, method, path, address, provider, readings = NO_READINGS) => list.length > 0 && list.every((condition) => condition(identity, method, path, address, provider, inDeny, readings)),
    takesFrom: requestTest(request, inNetworks, inDeny),
    personless: PERSON_CONDITIONS.every((key) => rule[key].length === 0),
    region: addressSet(rule.networks),
  }
}

/** CompiledRule.takesFrom of a rule: an address that cannot be told is taken by no `networks`. */
function requestTest (request: readonly Condition[], inNetworks: NetworkTest | undefined, inDeny: boolean): CompiledRule['takesFrom'] {
  return (method, path, address, readings = NO_READINGS) => request.every((condition) => condition(undefined, method, path, address, undefined, inDeny, readings))
    ? inNetworks === undefined || inNetworks(address) === true
    : undefined
}

/** The methods a refused person is tried in for another request they would pass. */
const WITNESS_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']

/**
 * The requests that stand for "the rest of the route": its own path, and one path per glob its rules
 * name (each `*` as `x`: a path the glob matches), in every common method.
 */
function witnesses (lists: RuleLists, prefix: string | undefined): ReadonlyArray<readonly [string, string]> {
  const root = prefix === undefined || prefix === '/' ? '' : prefix.replace(/\/+$/, '')
  const paths = new Set([root === '' ? '/' : root, `${root}/`])
  for (const rule of [...(lists.allow ?? []), ...lists.deny]) {
    for (const glob of rule.paths) if (glob.startsWith('/') && !glob.includes('?')) paths.add(glob.replaceAll('*', 'x'))
  }
  return WITNESS_METHODS.flatMap((method) => [...paths].map((path) => [method, path] as const))
}

const CONDITION_NAMES = ['users', 'emails', 'domains', 'groups', 'claims', 'methods', 'paths', 'networks', 'providers'] as const
/** The conditions on the person: a rule with none holds for every account alike. */
export const PERSON_CONDITIONS = ['users', 'emails', 'domains', 'groups', 'claims', 'providers'] as const

/**
 * The judge of `lists`: refused by the first `deny` rule that holds, else admitted by the first
 * `allow` rule that holds, else (with an `allow` list) refused with no rule named. Without any rule,
 * everyone is admitted.
 */
export function compileRules (lists: RuleLists, prefix?: string): Judge {
  const deny = lists.deny.map((rule) => compiled(rule, true))
  const allow = lists.allow?.map((rule) => compiled(rule, false))
  if (allow === undefined && deny.length === 0) return () => ADMITTED
  // Only a list with a `deny` glob folds the path, and then once per request.
  const folds = lists.deny.some((rule) => rule.paths.length > 0)
  const judge: Judge = (identity, method, path, address, provider) => {
    const readings = folds ? otherReadings(path) : NO_READINGS
    for (const rule of deny) {
      if (rule.holds(identity, method, path, address, provider, readings)) return { admit: false, rule: rule.name, refusedBy: rule.kinds }
    }
    if (allow === undefined) return ADMITTED
    for (const rule of allow) {
      if (rule.holds(identity, method, path, address, provider)) return { admit: true, rule: rule.name }
    }
    return NO_ALLOW
  }
  const others = witnesses(lists, prefix)
  const elsewhere = allow === undefined ? () => false : fromElsewhere(allow, deny, folds)
  // A refusal (rare) tries the person on the rest of the route; an admission costs nothing more.
  return (identity, method, path, address, provider) => {
    const found = judge(identity, method, path, address, provider)
    if (found.admit) return found
    const judgement = found === NO_ALLOW && elsewhere(method, path, address) ? NO_ALLOW_FROM_HERE : found
    const passing = others.find(([otherMethod, otherPath]) => judge(identity, otherMethod, otherPath, address, provider).admit)
    return passing === undefined ? judgement : { ...judgement, partial: { method: passing[0], path: passing[1] } }
  }
}

/**
 * Several judges that must all admit (forward-auth: the query's rules and the host's): the first
 * refusal decides; when all admit, the rules that admitted are named together.
 */
export function allOf (judges: readonly Judge[]): Judge {
  if (judges.length === 1) return judges[0]!
  return (identity, method, path, address, provider) => {
    const names: string[] = []
    for (const judge of judges) {
      const judgement = judge(identity, method, path, address, provider)
      // Another judge may refuse this person everywhere: `partial` is not known of the whole.
      if (!judgement.admit) return { admit: false, rule: judgement.rule, refusedBy: judgement.refusedBy, ...(judgement.byAddress ? { byAddress: true } : {}) }
      if (judgement.rule !== undefined) names.push(judgement.rule)
    }
    return names.length === 0 ? ADMITTED : { admit: true, rule: names.join(', ') }
  }
}
