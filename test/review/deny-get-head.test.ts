// Review finding (low): a deny on GET does not cover HEAD. HEAD is GET without the body (RFC 9110
// §9.3.2) and most upstreams answer it with their GET handler (Express, Django, Rails run it and drop
// the body): the handler's side effects happen and its headers (Content-Length, Content-Disposition
// with a file name, ETag, Location...) reach the refused person. For `allow` and `public` the gateway
// keeps GET and HEAD apart on purpose (fail closed); for `deny` the same choice fails open. The
// suggested fix: a deny rule naming GET also holds for HEAD (or --check warns about a deny on GET
// without HEAD).
import { describe, expect, it } from 'vitest'
import { compileRules } from '../../src/access/rules.js'
import { lists } from '../helpers/rules.js'

const bob = { sub: 'bob', groups: ['contractors'] }

describe('a deny on GET /app/export/* for contractors', () => {
  const judge = compileRules(lists(undefined, [{ groups: ['contractors'], methods: ['GET'], paths: ['/app/export/*'] }]))

  it.each(['GET', 'HEAD'])('refuses bob\'s %s', (method) => {
    expect(judge(bob, method, '/app/export/payroll.csv')).toEqual({ admit: false, rule: 'deny[0]' })
  })
})
