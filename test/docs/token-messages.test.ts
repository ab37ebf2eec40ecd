// The troubleshooting table of docs/machine-clients.md ("When a token is refused") lists each
// message a refused bearer token can get, and only those: the messages are the gateway's own
// (src/oauth/token-messages.ts), and no refusal in the token checks writes a message of its own.
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { TOKEN_MESSAGES, noTokenMessage, tokenMessage } from '../../src/oauth/token-messages.js'

const page = readFileSync('docs/machine-clients.md', 'utf8')
const section = page.slice(page.indexOf('## When a token is refused\n'))
/** The first column of the table: each message as the page writes it, `<word>` where it varies. */
const listed = [...section.matchAll(/^\| `([^`]+)` \|/gm)].map(([, message]) => message!)
const asListed = (message: string) => message.replace(/\{(\w+)\}/g, '<$1>')

describe('the troubleshooting table of docs/machine-clients.md', () => {
  it('lists each message the token checks give, once, and nothing else', () => {
    expect(listed.toSorted()).toEqual(Object.values(TOKEN_MESSAGES).map(asListed).toSorted())
  })

  it.each(['src/oauth/access-tokens.ts', 'src/oauth/person-claims.ts', 'src/access/bearer.ts'])('%s refuses only with the listed messages', (file) => {
    const source = readFileSync(file, 'utf8')
    const own = [...source.matchAll(/\brefused?\('\w+', ([^)]*)\)/g)].map(([, message]) => message!.trim())
    expect(own.length).toBeGreaterThan(0)
    for (const message of own) expect(message, `${file}: ${message}`).toMatch(/^(?:TOKEN_MESSAGES\.\w+|tokenMessage\('\w+'.*|\w+)$/)
  })
})

describe('a credential that is no token', () => {
  it.each([
    ['', TOKEN_MESSAGES.noToken],
    ['null', tokenMessage('placeholder', { word: 'null' })],
    ['undefined', tokenMessage('placeholder', { word: 'undefined' })],
    ['None', tokenMessage('placeholder', { word: 'None' })],
    ['nil', tokenMessage('placeholder', { word: 'nil' })],
    ['NULL', tokenMessage('placeholder', { word: 'NULL' })],
    ['false', tokenMessage('placeholder', { word: 'false' })],
  ])('%j: "no token was sent"', (token, message) => {
    expect(noTokenMessage(token)).toBe(message)
    expect(message.startsWith('No token was sent: ')).toBe(true)
  })

  it.each(['Null', 'nullx', 'xnull', 'eyJhbGciOi.e30.sig', 'opaque-token', 'true'])('%j is a token to check', (token) => {
    expect(noTokenMessage(token)).toBeUndefined()
  })
})
