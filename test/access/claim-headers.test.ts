// The claim headers' writer (src/access/identity-headers.ts claimHeaderValues): a table of hostile
// and edge values a provider may put in a claim (CR, LF, NUL, other C0, DEL, 4096 vs 4097 bytes,
// non-ASCII, lone surrogates, arrays, empty arrays, a claim missing), each either sent whole or
// refused with the header's name, never cut or cleaned.
import { describe, expect, it } from 'vitest'
import { CLAIM_HEADER_MAX_BYTES, claimHeaderValues } from '../../src/access/identity-headers.js'
import type { Identity } from '../../src/session/record.js'

const MAPPING = [{ name: 'x-roles', claim: 'realm_access.roles' }]

function withRoles (roles: readonly string[] | undefined): Identity {
  return { sub: 'alice', groups: [], ...(roles === undefined ? {} : { claims: { 'realm_access.roles': roles } }) }
}

/** The bytes a value goes upstream as (Node's HTTP clients write the latin1 string byte for byte). */
function wire (value: string): Buffer {
  return Buffer.from(value, 'latin1')
}

describe('claimHeaderValues', () => {
  it.each([
    ['one value', ['admin'], 'admin'],
    ['an array, comma-joined', ['a', 'b'], 'a,b'],
    ['values with spaces inside as given, at an element\'s ends encoded (trimming would change them)', ['team lead', ' x'], 'team lead,%20x'],
    ['an empty string', [''], ''],
    ['a tab-free printable run, the list separators and % encoded', ['!"#$%&\'()*+-./:;<=>?@[\\]^_`{|}~'], '!%22#$%25&\'()*+-./:%3B<=>?@[\\]^_`{|}~'],
    ['exactly 4096 bytes', ['x'.repeat(CLAIM_HEADER_MAX_BYTES)], 'x'.repeat(CLAIM_HEADER_MAX_BYTES)],
    ['4096 bytes once joined', ['x'.repeat(2047), 'y'.repeat(2048)], `${'x'.repeat(2047)},${'y'.repeat(2048)}`],
  ])('sends %s', (_name, roles, expected) => {
    expect(claimHeaderValues(withRoles(roles), MAPPING)).toEqual({ ok: true, headers: [['x-roles', expected]] })
  })

  it.each([
    ['Latin-1 letters', ['café']],
    ['other scripts and emoji', ['日本', 'ロール', '🙂']],
    ['4096 bytes of two-byte letters', ['é'.repeat(2048)]],
  ])('sends %s as their UTF-8 bytes', (_name, roles) => {
    const result = claimHeaderValues(withRoles(roles), MAPPING)
    if (!result.ok) throw new Error(`refused: ${result.problem}`)
    expect(result.headers.map(([name]) => name)).toEqual(['x-roles'])
    expect(wire(result.headers[0]![1]).toString('utf8')).toBe(roles.join(','))
  })

  it.each([
    ['CR LF (a header injected)', ['a\r\nX-Admin: 1'], 'holds a control character'],
    ['a lone LF', ['a\nb'], 'holds a control character'],
    ['a lone CR', ['a\rb'], 'holds a control character'],
    ['NUL', ['a\u0000b'], 'holds a control character'],
    ['a tab', ['a\tb'], 'holds a control character'],
    ['ESC', ['\u001b[31m'], 'holds a control character'],
    ['US (0x1f)', ['a\u001fb'], 'holds a control character'],
    ['DEL', ['a\u007fb'], 'holds a control character'],
    ['a control character in a later element', ['a', 'b', 'c\r'], 'holds a control character'],
    ['4097 bytes', ['x'.repeat(CLAIM_HEADER_MAX_BYTES + 1)], 'is longer than 4096 bytes'],
    ['4097 bytes once joined', ['x'.repeat(2048), 'y'.repeat(2048)], 'is longer than 4096 bytes'],
    ['4097 bytes of which some are two-byte letters', ['é'.repeat(2048), 'x'], 'is longer than 4096 bytes'],
    ['2049 two-byte letters (4098 bytes, 2049 characters)', ['é'.repeat(2049)], 'is longer than 4096 bytes'],
    ['a lone high surrogate', ['a\ud800b'], 'is not valid Unicode'],
    ['a lone low surrogate', ['\udc00'], 'is not valid Unicode'],
    ['a very long value (1 MB)', ['x'.repeat(1024 * 1024)], 'is longer than 4096 bytes'],
  ])('refuses %s, naming the header', (_name, roles, problem) => {
    expect(claimHeaderValues(withRoles(roles), MAPPING)).toEqual({ ok: false, header: 'x-roles', problem })
  })

  it.each([
    ['a claim the session lacks', { sub: 'alice', groups: [], claims: { tid: ['t1'] } } satisfies Identity],
    ['no kept claims at all', withRoles(undefined)],
    ['an empty array', withRoles([])],
    ['no identity', undefined],
  ])('sends no header for %s', (_name, identity) => {
    expect(claimHeaderValues(identity, MAPPING)).toEqual({ ok: true, headers: [] })
  })

  it('reads only the claims the session kept, never a name an object inherits', () => {
    const mapping = ['constructor', 'toString', '__proto__', 'hasOwnProperty'].map((claim) => ({ name: `x-${claim.toLowerCase().replace(/_/g, '')}`, claim }))
    expect(claimHeaderValues({ sub: 'alice', groups: [], claims: { tid: ['t1'] } }, mapping)).toEqual({ ok: true, headers: [] })
  })

  it('sends each header of the mapping, and refuses the whole request when any one cannot be sent', () => {
    const mapping = [...MAPPING, { name: 'x-tenant', claim: 'tid' }]
    const identity: Identity = { sub: 'alice', groups: [], claims: { 'realm_access.roles': ['a', 'b'], tid: ['t1'] } }
    expect(claimHeaderValues(identity, mapping)).toEqual({ ok: true, headers: [['x-roles', 'a,b'], ['x-tenant', 't1']] })
    const bad: Identity = { ...identity, claims: { ...identity.claims, tid: ['t1\r\n'] } }
    expect(claimHeaderValues(bad, mapping)).toEqual({ ok: false, header: 'x-tenant', problem: 'holds a control character' })
  })
})
