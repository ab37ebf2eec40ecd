// GitHub's e-mail choice (src/oauth/github.ts): only the address marked both primary and verified in
// `GET /user/emails` counts, and that endpoint sits beside the configured `/user`.
import { describe, expect, it } from 'vitest'
import { emailsUrl, primaryVerifiedEmail } from '../../src/oauth/github.js'

describe('GitHub e-mail', () => {
  it.each<[string, unknown, string | undefined]>([
    ['the primary verified address', [{ email: 'a@x.test', primary: false, verified: true }, { email: 'b@x.test', primary: true, verified: true }], 'b@x.test'],
    ['no address when the primary one is unverified', [{ email: 'a@x.test', primary: false, verified: true }, { email: 'b@x.test', primary: true, verified: false }], undefined],
    ['no address from an empty list', [], undefined],
    ['no address from something that is not a list', { email: 'b@x.test', primary: true, verified: true }, undefined],
    ['no address when verified is a string', [{ email: 'b@x.test', primary: true, verified: 'true' }], undefined],
    ['no address when email is not a string', [{ email: 1, primary: true, verified: true }, null], undefined],
  ])('%s', (_name, list, expected) => {
    expect(primaryVerifiedEmail(list)).toBe(expected)
  })

  it.each([
    ['https://api.github.com/user', 'https://api.github.com/user/emails'],
    ['https://github.example.com/api/v3/user', 'https://github.example.com/api/v3/user/emails'],
    ['https://api.github.com/user/?x=1', 'https://api.github.com/user/emails'],
  ])('/user/emails beside %s', (user, emails) => {
    expect(emailsUrl(user)).toBe(emails)
  })
})
