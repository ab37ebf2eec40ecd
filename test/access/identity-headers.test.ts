// Identity headers with names beyond ASCII: sent as UTF-8 bytes (as claim headers are), since a
// character beyond U+00FF cannot be written into a header at all and one in U+0080-U+00FF would go
// as a latin1 byte. Then through a real socket: Node's HTTP client writes the value and an upstream
// reading the bytes as UTF-8 gets the name back.
import { createServer } from 'node:http'
import { describe, expect, it } from 'vitest'
import { DEFAULT_IDENTITY_HEADERS, headerText, identityHeaders } from '../../src/access/identity-headers.js'
import { close, listen } from '../helpers/net.js'

const utf8 = (text: string): string => Buffer.from(text, 'utf8').toString('latin1')

describe('identity headers beyond ASCII', () => {
  it.each([
    ['ASCII stays as it is', 'alice', 'alice'],
    ['latin1 letters go as UTF-8, two bytes each', 'José', utf8('José')],
    ['CJK', '小组', utf8('小组')],
    ['an emoji (a surrogate pair)', 'team 🚀', utf8('team 🚀')],
  ])('%s', (_what, text, sent) => {
    expect(headerText(text)).toBe(sent)
    expect(Buffer.from(headerText(text), 'latin1').toString('utf8')).toBe(text)
  })

  it('writes user, e-mail and groups so, and a real upstream reads them back as UTF-8', async () => {
    const headers = identityHeaders({ sub: 'José', email: 'josé@exämple.org', groups: ['小组', 'staff'] }, DEFAULT_IDENTITY_HEADERS, {})
    const seen: Record<string, string> = {}
    const server = createServer((req, res) => {
      for (const name of Object.values(DEFAULT_IDENTITY_HEADERS)) seen[name] = Buffer.from(req.headers[name] as string, 'latin1').toString('utf8')
      res.end()
    })
    const url = await listen(server)
    try {
      await fetch(url, { headers: headers as Record<string, string> })
    } finally {
      await close(server)
    }
    expect(seen).toEqual({ 'x-forwarded-user': 'José', 'x-forwarded-email': 'josé@exämple.org', 'x-forwarded-groups': '小组,staff' })
  })
})
