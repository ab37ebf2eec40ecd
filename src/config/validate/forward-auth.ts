// The `forwardAuth` section: the hosts a sign-in may return to, and each host's rules and bearer
// block.
import { isIP } from 'node:net'
import type { BearerConfig, ForwardAuthConfig, RuleLists } from '../types.js'
import { Issues, describe, type Path } from '../problems.js'
import { bearerSection } from '../bearer-section.js'
import { ruleLists } from '../rule-lists.js'
import { isPublicSuffix, secretProblem, shippedSecretProblem } from '../safety.js'
import { type Sections, LABEL, previousSecrets } from './values.js'

/** `host`, `.domain` or either with `:port`: see ForwardAuthConfig. */
const REDIRECT_HOST = new RegExp(`^(\\.)?(${LABEL}(?:\\.${LABEL})*)(?::(\\d{1,5}))?$`)

export function validateForwardAuth (issues: Issues, raw: Sections['forwardAuth'], loopbackOnly: boolean): ForwardAuthConfig {
  const path = ['forwardAuth', 'allowedRedirectHosts']
  const allowedRedirectHosts = raw.allowedRedirectHosts.flatMap((entry, i) => {
    const lower = entry.trim().toLowerCase()
    if (/[^\x21-\x7e]/.test(lower)) {
      issues.add([...path, i], `must be written in ASCII (punycode, such as xn--bcher-kva.example), got ${describe(entry)}`)
      return []
    }
    const match = REDIRECT_HOST.exec(lower)
    if (!match || (match[3] !== undefined && (Number(match[3]) < 1 || Number(match[3]) > 65535))) {
      issues.add([...path, i], `must be a host name, optionally with a leading dot (and its subdomains) or a :port, such as .example.com or app.example.org:8443, got ${describe(entry)}`)
      return []
    }
    if (match[1] && !match[2]!.includes('.')) {
      issues.add([...path, i], `${describe(entry)} would allow every host under a top-level domain: name your own domain, such as .example.com`)
      return []
    }
    if (isPublicSuffix(match[2]!)) {
      issues.add([...path, i], `${describe(entry)} is a public suffix (in the Public Suffix List): strangers own hosts under it; name your own domain, such as .example.com`)
      return []
    }
    // The port as a number spells it (`:08443` is 8443, as a URL's port is read).
    return [`${match[1] ?? ''}${match[2]!}${match[3] === undefined ? '' : `:${Number(match[3])}`}`]
  })
  const hosts = validateHosts(issues, raw.hosts)
  return { allowedRedirectHosts, hosts: new Map([...hosts].map(([host, policy]) => [host, policy.rules])), bearer: hostBearers(hosts), ...proxySecrets(issues, raw, loopbackOnly) }
}

/** What forwardAuth needs of the rest of the file: a trusted proxy, and secrets of its own (not `others`). */
export function checkForwardAuthAgainst (issues: Issues, forwardAuth: ForwardAuthConfig, trustProxy: boolean | string[], others: Array<string | undefined>): void {
  if (!issues.touched(['server', 'trustProxy'])) checkForwardAuthTrust(issues, forwardAuth, trustProxy)
  checkProxySecretOwn(issues, forwardAuth, others)
}

/**
 * A forwardAuth.proxySecret (or a previous one) that is another of the file's secrets
 * (session.secret, one of session.previousSecrets, a provider's clientSecret, a store password): refused, since the
 * proxy's configuration holds it, and whoever reads that would hold the other too (an outside
 * tester's finding: session.secret keys the stored sessions).
 */
function checkProxySecretOwn (issues: Issues, { proxySecret, previousProxySecrets }: Pick<ForwardAuthConfig, 'proxySecret' | 'previousProxySecrets'>, others: Array<string | undefined>): void {
  const refuse = (path: Path, value: string | undefined) => {
    if (value !== undefined && others.includes(value)) issues.add(path, 'is another secret of this file (session.secret, a previous one, a provider\'s clientSecret or a store password): the proxy\'s configuration holds it, so make one of its own (openssl rand -base64 32)')
  }
  refuse(['forwardAuth', 'proxySecret'], proxySecret)
  // forEach: an entry the schema refused is a hole in the list.
  previousProxySecrets.forEach((value, i) => { refuse(['forwardAuth', 'previousProxySecrets', i], value) })
}

/**
 * forwardAuth.hosts and proxySecret need a proxy that server.trustProxy admits: the host whose rules
 * apply is read only from a trusted proxy (a stranger's request is refused while hosts has rules),
 * and a secret sent by an untrusted one would open nothing.
 */
function checkForwardAuthTrust (issues: Issues, forwardAuth: Pick<ForwardAuthConfig, 'hosts' | 'proxySecret'>, trustProxy: boolean | string[]): void {
  if (trustProxy === true || (Array.isArray(trustProxy) && trustProxy.length > 0)) return
  const why = 'needs server.trustProxy to admit the proxy in front: only a trusted proxy\'s X-Forwarded-Host names the host whose rules apply, and every other caller is refused'
  if (forwardAuth.hosts.size > 0) issues.add(['forwardAuth', 'hosts'], why)
  if (forwardAuth.proxySecret !== undefined) issues.add(['forwardAuth', 'proxySecret'], 'needs server.trustProxy to admit the proxy in front that sends it: forward-auth reads the original request only from a trusted proxy')
}

/** forwardAuth.proxySecret and its previous values: held to session.secret's rules (a guessable one would open what it closes). */
function proxySecrets (issues: Issues, raw: Sections['forwardAuth'], loopbackOnly: boolean): Pick<ForwardAuthConfig, 'proxySecret' | 'previousProxySecrets'> {
  const proxySecret = raw.proxySecret
  const weakness = proxySecret === undefined ? undefined : shippedSecretProblem(proxySecret, loopbackOnly) ?? secretProblem(proxySecret)
  if (weakness !== undefined) issues.add(['forwardAuth', 'proxySecret'], weakness)
  const current = { name: 'forwardAuth.proxySecret', value: proxySecret, why: 'previous values are only taken while the proxies in front change to the new one' }
  return { proxySecret, previousProxySecrets: previousSecrets(issues, ['forwardAuth', 'previousProxySecrets'], raw.previousProxySecrets, current, loopbackOnly) }
}

/** The hosts whose callers may bring their own tokens, with their bearer blocks. */
function hostBearers (hosts: ReadonlyMap<string, HostPolicy>): Map<string, BearerConfig> {
  return new Map([...hosts].flatMap(([host, { bearer }]) => bearer === undefined ? [] : [[host, bearer] as const]))
}

/** A key of forwardAuth.hosts: a lower-case host name or IPv4 address, without port or leading dot. */
const HOST_NAME = new RegExp(`^${LABEL}(?:\\.${LABEL})*$`)

type HostYaml = NonNullable<Sections['forwardAuth']['hosts']>[string]

/** What forwardAuth.hosts keeps for one host. */
interface HostPolicy { rules: RuleLists, bearer: BearerConfig | undefined }

/** forwardAuth.hosts: each host's `allow` and `deny` as lists of rules (one rule object is a list of one), and its `bearer`. */
function validateHosts (issues: Issues, raw: Record<string, HostYaml>): Map<string, HostPolicy> {
  const hosts = new Map<string, HostPolicy>()
  for (const [entry, rules] of Object.entries(raw)) {
    const at = ['forwardAuth', 'hosts', entry]
    const host = entry.trim().toLowerCase()
    if (!HOST_NAME.test(host) && isIP(host) !== 4) {
      issues.add(at, `must be a host name without port or leading dot, such as payroll.example.com (its rules hold on every port), got ${describe(entry)}`)
      continue
    }
    if (hosts.has(host)) {
      issues.add(at, `names the host ${describe(host)} a second time`)
      continue
    }
    hosts.set(host, { rules: ruleLists(issues, at, rules, { host }), bearer: bearerSection(issues, [...at, 'bearer'], rules.bearer, null) })
  }
  return hosts
}
