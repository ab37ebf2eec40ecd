// Review finding: rules that parse without a problem or a warning and can never hold, which in a
// `deny` list means the person it names is silently let in (and in `allow`, silently kept out):
// - a route's path glob outside the route's own path. Every request the route judges has a canonical
//   path under `path`, so `deny: { paths: [/admin/*] }` on `path: /app/` with `rewritePrefix: /`
//   (the operator thinking in the upstream's paths, which is what the application's own docs name)
//   matches nothing;
// - e-mail and domain values that no address can match: a wildcard (`*.example.com`,
//   `*@example.com`), a URL (`https://example.com`), an address with two `@`, a domain with an `@`
//   inside or a `/`.
// rules.ts's own header says such a rule should be "a problem at its key path". The suggested fix:
// refuse them at --check (a route's path globs must start with the route's path, or `*`; e-mails
// must be local@domain with one `@`; domains a host name).
import { describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { configProblems } from '../helpers/config.js'
import { TEST_SECRET } from '../helpers/gateway.js'

const PROVIDER = { clientId: 'c', clientSecret: 's', authorizeUrl: 'https://op.example/a', tokenUrl: 'https://op.example/t', scope: 'read' }

function yamlOf (route: Record<string, unknown>): string {
  return stringify({
    session: { secret: TEST_SECRET },
    providers: { demo: PROVIDER },
    routes: [{ path: '/app/', upstream: 'http://127.0.0.1:9100', provider: 'demo', rewritePrefix: '/', ...route }],
  })
}

describe('rules that can never hold are refused at their key path', () => {
  it.each([
    ['a deny glob outside the route\'s path (the upstream\'s path after rewritePrefix)', { deny: [{ paths: ['/admin/*'], groups: ['contractors'] }] }, /^routes\[0\]\.deny\[0\]\.paths\[0\]: /],
    ['an allow glob outside the route\'s path', { allow: [{ paths: ['/other/*'] }] }, /^routes\[0\]\.allow\[0\]\.paths\[0\]: /],
    ['a wildcard domain', { deny: [{ domains: ['*.contractor.example'] }] }, /^routes\[0\]\.deny\[0\]\.domains\[0\]: /],
    ['a wildcard e-mail address', { deny: [{ emails: ['*@contractor.example'] }] }, /^routes\[0\]\.deny\[0\]\.emails\[0\]: /],
    ['a domain written as a URL', { deny: [{ domains: ['https://contractor.example'] }] }, /^routes\[0\]\.deny\[0\]\.domains\[0\]: /],
    ['an e-mail address with two @', { deny: [{ emails: ['mallory@@evil.test'] }] }, /^routes\[0\]\.deny\[0\]\.emails\[0\]: /],
  ])('%s', (_what, route, problem) => {
    expect(configProblems(yamlOf(route))).toEqual([expect.stringMatching(problem)])
  })
})
