// The `session` section: the cookie's name, domain and Secure flag, the secrets, the lifetimes.
import { isIP } from 'node:net'
import type { SessionConfig } from '../types.js'
import { Issues, describe } from '../problems.js'
import { isLoopbackHost } from '../loopback.js'
import { secretProblem, shippedSecretProblem } from '../safety.js'
import { DAY, type Sections, LABEL, duration, previousSecrets } from './values.js'

export function validateSession (issues: Issues, raw: Sections['session'], baseUrl: string, baseUrlTouched: boolean): SessionConfig {
  const cookieName = raw.cookieName
  const secret = raw.secret
  const loopbackOnly = isLoopbackHost(new URL(baseUrl).hostname)
  const weakness = secret ? shippedSecretProblem(secret, loopbackOnly) ?? secretProblem(secret) : undefined
  if (weakness) issues.add(['session', 'secret'], weakness)
  // A cookieSecure with a problem of its own: the checks below that read it would only repeat it.
  const secureTouched = issues.touched(['session', 'cookieSecure'])
  const secure = raw.cookieSecure
  const cookieSecure = secure === 'auto' ? baseUrl.startsWith('https:') : secure
  if (!cookieSecure && baseUrl.startsWith('https:') && !secureTouched) {
    issues.add(['session', 'cookieSecure'], 'is false while server.baseUrl is https: browsers would also send the session cookie over plain http; ' +
      'remove it (auto sets Secure for an https baseUrl) or set it to true')
  }
  if (!baseUrlTouched && !secureTouched) checkCookiePrefix(issues, cookieName, cookieSecure)
  return {
    cookieName,
    secret: secret || undefined,
    ttlMs: duration(issues, ['session', 'ttl'], raw.ttl, 60_000, 30 * DAY),
    maxAgeMs: duration(issues, ['session', 'maxAge'], raw.maxAge, 5 * 60_000, 400 * DAY),
    previousSecrets: previousSecrets(issues, ['session', 'previousSecrets'], raw.previousSecrets, { name: 'session.secret', value: secret, why: 'previous secrets only open what they sealed, and new sessions must be sealed with a fixed secret' }, loopbackOnly),
    cookieSecure,
    cacheTtlMs: duration(issues, ['session', 'cacheTtl'], raw.cacheTtl, 0, 10_000),
    cookieDomain: validateCookieDomain(issues, raw.cookieDomain, cookieName, baseUrl),
  }
}

const DOMAIN_NAME = new RegExp(`^${LABEL}(?:\\.${LABEL})*$`)

/**
 * `session.cookieDomain`: a domain name (a leading dot is dropped, as browsers do) that
 * server.baseUrl's host is under, or browsers would refuse the cookie; never with a `__Host-` name.
 * @see https://www.rfc-editor.org/rfc/rfc6265#section-5.3 (step 6: the Domain must domain-match the host)
 */
function validateCookieDomain (issues: Issues, raw: string | undefined, cookieName: string, baseUrl: string): string | undefined {
  const path = ['session', 'cookieDomain']
  if (raw === undefined || raw.trim() === '') return undefined
  const domain = raw.trim().toLowerCase().replace(/^\./, '')
  if (!DOMAIN_NAME.test(domain) || isIP(domain) !== 0) {
    issues.add(path, `must be a domain name such as .example.com, got ${describe(raw)}`)
    return undefined
  }
  if (/^__host-/i.test(cookieName)) {
    issues.add(path, 'cannot be used with a "__Host-" cookie name, which browsers only keep without a Domain: ' +
      'rename session.cookieName (for example to __Secure-gw) or remove cookieDomain')
    return undefined
  }
  const host = new URL(baseUrl).hostname
  if (host !== domain && !host.endsWith(`.${domain}`)) {
    issues.add(path, `must be server.baseUrl's host ${describe(host)} or a parent domain of it, got ${describe(domain)}`)
    return undefined
  }
  return domain
}

/**
 * Browsers drop a `__Host-`/`__Secure-` cookie (prefixes matched in any case) set without Secure.
 * @see https://datatracker.ietf.org/doc/html/draft-ietf-httpbis-rfc6265bis#section-4.1.3
 */
function checkCookiePrefix (issues: Issues, cookieName: string, cookieSecure: boolean): void {
  const prefix = /^__(host|secure)-/i.exec(cookieName)?.[1]
  if (prefix === undefined || cookieSecure) return
  issues.add(['session', 'cookieName'], `a "${prefix.toLowerCase() === 'host' ? '__Host-' : '__Secure-'}" cookie name needs a Secure cookie, which browsers otherwise drop: use an https baseUrl or set session.cookieSecure: true`)
}
