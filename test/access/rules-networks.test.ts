// `networks` in a rule: the config's reading of each entry (src/config/networks.ts) and the gate's
// test of a client address (src/access/networks.ts), as tables of hostile values, and a property that
// the two agree with plain prefix arithmetic for any network and address; the rules' meaning (a
// `deny` holds where the address cannot be told, an `allow` does not; `::/0` is not IPv4); and
// `--check`'s problems and warnings.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { compileRules } from '../../src/access/rules.js'
import { addressSet, isEmpty, minus, someLeft, union } from '../../src/access/address-sets.js'
import { networkTest } from '../../src/access/networks.js'
import { parseConfig } from '../../src/config/config.js'
import { normalizeIP } from '@fastify/rate-limit'
import { parseNetwork, withoutPort } from '../../src/config/networks.js'
import { addressBytes, addressText } from '../../src/session/client-address.js'
import { configWarnings } from '../../src/config/safety.js'
import type { Network } from '../../src/config/types.js'
import type { Identity } from '../../src/session/record.js'
import { configProblems } from '../helpers/config.js'
import { growth } from '../helpers/cost.js'
import { TEST_SECRET } from '../helpers/gateway.js'
import { lists } from '../helpers/rules.js'

const alice: Identity = { sub: 'alice', subject: 'alice', groups: ['staff'] }

function network (entry: string): Network {
  const parsed = parseNetwork(entry)
  if (typeof parsed === 'string') throw new Error(parsed)
  return parsed
}

describe('a network as gateway.yaml writes it', () => {
  const READ: Array<[string, Network | RegExp]> = [
    ['10.0.0.0/8', { address: '10.0.0.0', bits: 8, family: 'ipv4', outside: false }],
    [' 192.0.2.7 ', { address: '192.0.2.7', bits: 32, family: 'ipv4', outside: false }],
    ['2001:DB8:0:0::/32', { address: '2001:db8::', bits: 32, family: 'ipv6', outside: false }],
    ['::1', { address: '::1', bits: 128, family: 'ipv6', outside: false }],
    ['0.0.0.0/0', { address: '0.0.0.0', bits: 0, family: 'ipv4', outside: false }],
    ['::/0', { address: '::', bits: 0, family: 'ipv6', outside: false }],
    ['!10.8.0.0/16', { address: '10.8.0.0', bits: 16, family: 'ipv4', outside: true }],
    [' ! fd00:8::/32', { address: 'fd00:8::', bits: 32, family: 'ipv6', outside: true }],
    ['!!10.8.0.0/16', /IP address or CIDR range/],
    ['!', /IP address or CIDR range/],
    // Host bits under the prefix: the network, or the address? Said, not guessed.
    ['10.1.2.3/8', /network's own address \(10\.0\.0\.0\/8\)/],
    ['2001:db8::1/32', /network's own address \(2001:db8::\/32\)/],
    ['10.0.0.0/33', /prefix length from 0 to 32/],
    ['2001:db8::/129', /prefix length from 0 to 128/],
    ['10.0.0.0/', /prefix length/],
    ['10.0.0.0/-1', /prefix length/],
    ['10.0.0.0/8/8', /prefix length/],
    ['10.0.0.0/ 8', /prefix length/],
    ['10.0.0/8', /IP address or CIDR range/],
    ['010.0.0.1', /IP address or CIDR range/],
    ['10.0.0.256', /IP address or CIDR range/],
    ['localhost', /IP address or CIDR range/],
    ['*', /IP address or CIDR range/],
    ['', /IP address or CIDR range/],
    ['fe80::1%eth0', /IP address or CIDR range/],
    ['10.0.0.0-10.0.0.255', /IP address or CIDR range/],
    // Clients reach the gateway as IPv4: an IPv4 network in IPv6 form would be read two ways.
    ['::ffff:10.0.0.0/104', /written as IPv4/],
    ['::ffff:192.0.2.7', /written as IPv4/],
  ]
  it.each(READ)('%j', (entry, expected) => {
    const parsed = parseNetwork(entry)
    if (expected instanceof RegExp) expect(parsed).toMatch(expected)
    else expect(parsed).toEqual(expected)
  })
})

describe('a client address against networks', () => {
  const inside = networkTest([network('10.0.0.0/8'), network('2001:db8::/32'), network('192.0.2.7')])
  const ADDRESSES: Array<[string | undefined, boolean | undefined]> = [
    ['10.1.2.3', true],
    ['11.0.0.1', false],
    ['192.0.2.7', true],
    ['192.0.2.8', false],
    // An IPv4 client on an IPv6 socket is the IPv4 address it is.
    ['::ffff:10.1.2.3', true],
    ['::FFFF:10.1.2.3', true],
    ['::ffff:11.0.0.1', false],
    ['2001:db8::1', true],
    ['2001:DB8:FFFF::1', true],
    ['2001:db9::1', false],
    // Not an address the rules can judge: cannot be told.
    ['fe80::1%eth0', undefined],
    ['2001:db8::1%eth0', undefined],
    ['[fe80::1%eth0]:443', undefined],
    // The other spellings of an IPv4-mapped address (a trusted proxy's X-Forwarded-For may use them).
    ['::ffff:a01:203', true],
    ['0:0:0:0:0:ffff:10.1.2.3', true],
    ['0:0:0:0:0:FFFF:0A01:0203', true],
    ['::0:ffff:11.0.0.1', false],
    // With the port some proxies write after it (Azure Application Gateway): the client it names.
    ['10.1.2.3:443', true],
    ['11.0.0.1:443', false],
    ['[2001:db8::1]:443', true],
    ['[2001:db8::1]', true],
    ['[::ffff:10.1.2.3]:80', true],
    ['10.1.2.3:', undefined],
    ['10.1.2.3:443:1', undefined],
    ['', undefined],
    ['unknown', undefined],
    [undefined, undefined],
  ]
  it.each(ADDRESSES)('%j', (address, expected) => {
    expect(inside(address)).toBe(expected)
  })

  it('reads every spelling of a client as the rate limits and the sessions page do (tester\'s finding, round 4)', () => {
    const bytes = fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 4, maxLength: 4 })
    fc.assert(fc.property(bytes, fc.integer({ min: 0, max: 32 }), bytes, fc.integer({ min: 1, max: 65535 }), (net, bits, address, port) => {
      const dotted = address.join('.')
      const hex = [address[0]! * 256 + address[1]!, address[2]! * 256 + address[3]!].map((group) => group.toString(16))
      const spellings = [dotted, `::ffff:${dotted}`, `::FFFF:${hex.join(':')}`, `0:0:0:0:0:ffff:${dotted}`, `${dotted}:${port}`, `[::ffff:${hex.join(':')}]:${port}`]
      const written = String(networkAddressOf(net, bits))
      const test = networkTest([network(`${written}/${bits}`)])
      for (const spelling of spellings) {
        expect(test(spelling), spelling).toBe(test(dotted))
        // The rate limits' key and the sessions page's address: the same client.
        expect(normalizeIP(withoutPort(spelling), 64), spelling).toBe(dotted)
        expect(addressText(addressBytes(withoutPort(spelling))), spelling).toBe(dotted)
      }
    }))
  })

  it('::/0 holds no IPv4 client, and 0.0.0.0/0 no IPv6 one', () => {
    expect(networkTest([network('::/0')])('10.0.0.1')).toBe(false)
    expect(networkTest([network('::/0')])('::ffff:10.0.0.1')).toBe(false)
    expect(networkTest([network('::/0')])('2001:db8::1')).toBe(true)
    expect(networkTest([network('0.0.0.0/0')])('2001:db8::1')).toBe(false)
    expect(networkTest([network('0.0.0.0/0')])('::ffff:10.0.0.1')).toBe(true)
  })
})

/** An address as a number, for the reference test: IPv4 as 32 bits, IPv6 as 128. */
function bitsOf (bytes: number[]): bigint {
  return bytes.reduce((all, byte) => (all << 8n) | BigInt(byte), 0n)
}

describe('the config and the gate agree with prefix arithmetic', () => {
  const v4 = fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 4, maxLength: 4 })
  const v6 = fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 16, maxLength: 16 })
  const v6Text = (bytes: number[]): string => Array.from({ length: 8 }, (_, i) => ((bytes[2 * i]! << 8) | bytes[2 * i + 1]!).toString(16)).join(':')

  it('IPv4: an address is inside exactly when its first bits are the network\'s', () => {
    fc.assert(fc.property(v4, fc.integer({ min: 0, max: 32 }), v4, (net, bits, address) => {
      const mask = bits === 0 ? 0n : ((1n << BigInt(bits)) - 1n) << BigInt(32 - bits)
      const base = bitsOf(net) & mask
      const written = `${[24, 16, 8, 0].map((shift) => Number((base >> BigInt(shift)) & 255n)).join('.')}/${bits}`
      const test = networkTest([network(written)])
      expect(test(address.join('.'))).toBe((bitsOf(address) & mask) === base)
      // The network's own first and last address are inside.
      expect(test(written.split('/')[0])).toBe(true)
    }), { numRuns: 500 })
  })

  it('IPv6: the same, and a written network with host bits is refused, naming the one meant', () => {
    fc.assert(fc.property(v6, fc.integer({ min: 0, max: 128 }), v6, (net, bits, address) => {
      const mask = bits === 0 ? 0n : ((1n << BigInt(bits)) - 1n) << BigInt(128 - bits)
      const base = bitsOf(net) & mask
      const baseBytes = Array.from({ length: 16 }, (_, i) => Number((base >> BigInt(8 * (15 - i))) & 255n))
      // Networks among the IPv4-mapped addresses are written as IPv4 (refused in IPv6 form).
      fc.pre(!(bits >= 96 && baseBytes.slice(0, 10).every((byte) => byte === 0) && baseBytes[10] === 255 && baseBytes[11] === 255))
      const test = networkTest([network(`${v6Text(baseBytes)}/${bits}`)])
      fc.pre(!(address.slice(0, 10).every((byte) => byte === 0) && address[10] === 255 && address[11] === 255))
      expect(test(v6Text(address))).toBe((bitsOf(address) & mask) === base)
      if (bitsOf(net) !== base) expect(parseNetwork(`${v6Text(net)}/${bits}`)).toMatch(/network's own address/)
    }), { numRuns: 500 })
  })
})

// Two readings of one `networks` list that must agree: the gate's test of an address
// (access/networks.ts) and the set of addresses the refusal page reasons with (access/address-sets.ts).
describe('the addresses a rule takes, as a set', () => {
  const inBlock = fc.tuple(fc.integer({ min: 0, max: 255 }), fc.integer({ min: 24, max: 32 }), fc.boolean())
    .map(([host, bits, outside]) => `${outside ? '!' : ''}${networkAddressOf([10, 0, 0, host], bits)}/${bits}`)
  // Each list takes some of 10.0.0.0/24 only (one plain network there at least): all 256 addresses can be tried.
  const list = fc.tuple(inBlock.filter((entry) => !entry.startsWith('!')), fc.array(inBlock, { maxLength: 3 })).map(([first, rest]) => [first, ...rest].map(network))
  it('property: some address is in the allow lists and none of the deny lists exactly when the sets say so', () => {
    fc.assert(fc.property(fc.array(list, { minLength: 1, maxLength: 3 }), fc.array(list, { maxLength: 3 }), (allow, deny) => {
      const tests = (lists: Network[][]) => lists.map((networks) => networkTest(networks))
      const [inAllow, inDeny] = [tests(allow), tests(deny)]
      const some = Array.from({ length: 256 }, (_, host) => `10.0.0.${host}`).some((address) => inAllow.some((test) => test(address)) && !inDeny.some((test) => test(address)))
      expect(!isEmpty(minus(union(allow.map(addressSet)), union(deny.map(addressSet))))).toBe(some)
    }), { numRuns: 500 })
  })

  // An attacker's finding: one walk of the allowed ranges per denied range cost a second per refusal
  // with 5,000 networks a side. Growth, not time (test/helpers/cost.ts): the networks 4 times as many.
  it('comparing the sets grows with the number of networks, not with their product', () => {
    const lists = new Map([1000, 4000].map((n) => {
      const blocks = Array.from({ length: n }, (_, i) => `10.${i >> 8}.${i & 255}.0/30`)
      // The deny rule covers every allowed block: the whole of both lists is walked.
      return [n, { open: addressSet(blocks.map(network)), shut: addressSet(blocks.map(network)) }] as const
    }))
    const compare = (input: string) => {
      const { open, shut } = lists.get(input.length)!
      return someLeft(union([open]), union([shut]))
    }
    expect(compare('a'.repeat(1000))).toBe(false)
    expect(growth(compare, 'a'.repeat(1000), 'a'.repeat(4000))).toBeLessThan(8)
  })

  it('a list with no plain network takes every address of both families but its ! ones', () => {
    const set = addressSet([network('!10.0.0.0/8')])
    expect(isEmpty(minus(set, addressSet([network('0.0.0.0/0')])))).toBe(false)
    expect(isEmpty(minus(set, union([addressSet([network('0.0.0.0/0')]), addressSet([network('::/0')])])))).toBe(true)
    expect(isEmpty(minus(addressSet([network('10.1.0.0/16')]), set))).toBe(false)
    expect(isEmpty(minus(addressSet([network('10.1.0.0/16')]), addressSet([network('10.0.0.0/8')])))).toBe(true)
  })
})

describe('networks in rules', () => {
  const office = { networks: ['10.0.0.0/8'] }

  it('an allow rule admits from inside only; where the address cannot be told it does not', () => {
    const judge = compileRules(lists([office]))
    expect(judge(alice, 'GET', '/x', '10.2.3.4')).toEqual({ admit: true, rule: 'allow[0]' })
    expect(judge(alice, 'GET', '/x', '192.0.2.1')).toMatchObject({ admit: false, rule: undefined, refusedBy: 'no_allow_rule' })
    expect(judge(alice, 'GET', '/x', undefined).admit).toBe(false)
    expect(judge(alice, 'GET', '/x', 'garbage').admit).toBe(false)
  })

  it('a deny rule refuses from inside, and where the address cannot be told; it names its conditions for the metric', () => {
    const judge = compileRules(lists(undefined, [{ networks: ['192.0.2.0/24'], paths: ['/x/admin/*'] }]))
    expect(judge(alice, 'GET', '/x/admin/a', '192.0.2.9')).toEqual({ admit: false, rule: 'deny[0]', refusedBy: 'paths+networks', partial: { method: 'GET', path: '/' } })
    expect(judge(alice, 'GET', '/x/admin/a', '10.0.0.1').admit).toBe(true)
    expect(judge(alice, 'GET', '/x/other', '192.0.2.9').admit).toBe(true)
    expect(judge(alice, 'GET', '/x/admin/a', undefined).admit).toBe(false)
    expect(judge(alice, 'GET', '/x/admin/a', 'fe80::1%eth0').admit).toBe(false)
  })

  it('"contractors never from outside the VPN" is one deny rule: the domain, and the VPN after !', () => {
    const judge = compileRules(lists(undefined, [{ domains: ['contractor.example'], networks: ['!10.8.0.0/16', '!fd00:8::/32'] }]))
    const contractor: Identity = { sub: 'c', subject: 'c', email: 'c@contractor.example', groups: [] }
    expect(judge(contractor, 'GET', '/x', '203.0.113.5').admit).toBe(false)
    expect(judge(contractor, 'GET', '/x', '2001:db8::5').admit).toBe(false)
    expect(judge(contractor, 'GET', '/x', '10.8.3.4').admit).toBe(true)
    expect(judge(contractor, 'GET', '/x', '::ffff:10.8.3.4').admit).toBe(true)
    expect(judge(contractor, 'GET', '/x', 'fd00:8::1').admit).toBe(true)
    expect(judge(contractor, 'GET', '/x', undefined).admit).toBe(false)
    expect(judge(alice, 'GET', '/x', '203.0.113.5').admit).toBe(true)
  })

  it('plain and ! networks together: inside one of the plain ones and none of the ! ones', () => {
    const test = networkTest(['10.0.0.0/8', '!10.66.0.0/16'].map(network))
    expect([test('10.1.0.1'), test('10.66.0.1'), test('11.0.0.1'), test('2001:db8::1')]).toEqual([true, false, false, false])
    const outsideOnly = networkTest([network('!10.0.0.0/8')])
    expect([outsideOnly('10.1.0.1'), outsideOnly('11.0.0.1'), outsideOnly('2001:db8::1'), outsideOnly('nope')]).toEqual([false, true, true, undefined])
  })
})

describe('networks in gateway.yaml', () => {
  const PROVIDER = { clientId: 'c', clientSecret: 's', authorizeUrl: 'https://op.example/a', tokenUrl: 'https://op.example/t', scope: 'read' }
  const yamlOf = (rules: Record<string, unknown>, server: Record<string, unknown> = {}, forwardAuth?: Record<string, unknown>): string => stringify({
    server,
    session: { secret: TEST_SECRET },
    providers: { demo: PROVIDER },
    routes: [{ path: '/app/', upstream: 'http://127.0.0.1:9100', provider: 'demo', ...rules }],
    ...(forwardAuth ? { forwardAuth } : {}),
  })

  it('reads networks into the rule, each checked at its own key path', () => {
    const config = parseConfig(yamlOf({ allow: [{ networks: ['10.0.0.0/8', '2001:db8::/32'] }] }), {})
    expect(config.routes[0]!.rules.allow![0]!.networks).toEqual([network('10.0.0.0/8'), network('2001:db8::/32')])
    expect(configProblems(yamlOf({ deny: [{ networks: ['10.0.0.0/8', '10.1.2.3/8', 'vpn'] }] }))).toEqual([
      expect.stringMatching(/^routes\[0\]\.deny\[0\]\.networks\[1\]: must be the network's own address \(10\.0\.0\.0\/8\), got "10\.1\.2\.3\/8"/),
      expect.stringMatching(/^routes\[0\]\.deny\[0\]\.networks\[2\]: must be an IP address or CIDR range such as 10\.0\.0\.0\/8/),
    ])
    expect(configProblems(yamlOf({ allow: [{ networks: [] }] }))).toEqual([expect.stringMatching(/^routes\[0\]\.allow\[0\]\.networks: must be a non-empty list/)])
    expect(configProblems(yamlOf({ allow: [{ networks: [10] }] }))).toEqual([expect.stringMatching(/^routes\[0\]\.allow\[0\]\.networks\[0\]: must be a string/)])
  })

  it.each([
    ['an allow rule of that network only', { allow: [{ networks: ['10.1.2.3/8'] }] }, 'routes[0].allow[0].networks[0]'],
    ['the object form', { allow: { networks: ['10.1.2.3/8'] } }, 'routes[0].allow.networks[0]'],
    ['a deny rule', { deny: { networks: ['10.1.2.3/8'] } }, 'routes[0].deny.networks[0]'],
    ['IPv4 in IPv6 form', { allow: [{ networks: ['::ffff:10.0.0.0/104'] }] }, 'routes[0].allow[0].networks[0]'],
    ['a name', { allow: [{ networks: ['intranet'] }] }, 'routes[0].allow[0].networks[0]'],
  ])('one bad network, one problem at it (not "gives no condition" besides, an operator\'s finding): %s', (_what, rules, at) => {
    const problems = configProblems(yamlOf(rules))
    expect(problems).toHaveLength(1)
    expect(problems[0]!.startsWith(`${at}: must be`)).toBe(true)
  })

  it.each([
    ['a bare !network: an unknown tag, read as nothing (an operator\'s finding)', '- !10.77.0.0/16'],
    ['! and a space: the non-specific tag, read as the network itself, the exclusion turned round (an outside tester\'s finding)', '- ! 10.77.0.0/16'],
    ['in a flow list', '[ ! 10.77.0.0/16 ]'],
    ['!!str', '- !!str 10.77.0.0/16'],
  ])('a YAML tag is refused with the quoting to write, its text not echoed: %s', (_what, written) => {
    const text = yamlOf({ deny: [{ domains: ['contractor.example'], networks: ['PLACE'] }] }).replace(/\n\s+- PLACE/, written.startsWith('[') ? ` ${written}` : `\n        ${written}`)
    expect(text).toContain('10.77.0.0/16')
    const problems = configProblems(text)
    expect(problems).toEqual([expect.stringMatching(/^YAML syntax: a value that starts with ! .* is read as a YAML tag, which changes or drops the value, and gateway.yaml uses none: quote the value, .* \(line \d+\)$/)])
    expect(problems[0]).not.toContain('10.77')
  })

  it('a %TAG directive and a secret that starts with ! (not echoed) are refused alike', () => {
    expect(configProblems(`%TAG !x! tag:yaml.org,2002:\n---\n${yamlOf({}).replace('clientSecret: s', 'clientSecret: !x!str s')}`)).toEqual([expect.stringMatching(/^YAML syntax: .* YAML tag/)])
    expect(configProblems(yamlOf({}).replace('clientSecret: s', 'clientSecret: !s3cr3t-value')).join('\n')).not.toContain('s3cr3t')
  })

  it('warns where the address judged would be another than the client\'s', () => {
    const warnings = (rules: Record<string, unknown>, server: Record<string, unknown> = {}, forwardAuth?: Record<string, unknown>): string[] =>
      configWarnings(parseConfig(yamlOf(rules, server, forwardAuth), {})).filter((warning) => warning.includes('.networks'))
    // Behind a TLS proxy it does not trust, every client is the proxy.
    expect(warnings({ allow: [{ networks: ['10.0.0.0/8'] }] }, { baseUrl: 'https://gw.example' })).toEqual([
      expect.stringMatching(/^routes\[0\]\.allow\[0\]\.networks: server\.baseUrl is https.*set server\.trustProxy/),
    ])
    expect(warnings({ allow: [{ networks: ['10.0.0.0/8'] }] }, { baseUrl: 'https://gw.example', trustProxy: ['192.0.2.10'] })).toEqual([])
    expect(warnings({ allow: [{ networks: ['10.0.0.0/8'] }] }, { baseUrl: 'http://127.0.0.1:8080' })).toEqual([])
    // A network that shares addresses with a trusted range: a host there is taken for a proxy and names any address.
    const shares = /names addresses that server\.trustProxy trusts \((.*?)\): a host there is taken for a proxy/
    expect(warnings({ allow: [{ networks: ['10.8.0.0/16'] }] }, { trustProxy: ['10.0.0.0/8'] })).toEqual([expect.stringMatching(/^routes\[0\]\.allow\[0\]\.networks: names addresses that server\.trustProxy trusts \(10\.0\.0\.0\/8\)/)])
    expect(warnings({ allow: [{ networks: ['10.0.0.0/8'] }] }, { trustProxy: ['10.1.0.0/16'] })).toEqual([expect.stringMatching(shares)])
    expect(warnings({ deny: [{ networks: ['10.66.0.0/16'] }] }, { trustProxy: ['10.0.0.0/8'] })).toEqual([expect.stringMatching(/^routes\[0\]\.deny\[0\]\.networks: names addresses/)])
    expect(warnings({ deny: [{ networks: ['!10.8.0.0/16'] }] }, { trustProxy: ['10.8.0.1'] })).toEqual([expect.stringMatching(shares)])
    expect(warnings({ allow: [{ networks: ['127.0.0.0/8'] }] }, { trustProxy: ['loopback'] })).toEqual([expect.stringMatching(/trusts \(127\.0\.0\.0\/8\)/)])
    // `true` (allowed on a loopback server.host only) trusts every peer, all of them loopback (an outside tester's finding: no warning).
    expect(warnings({ allow: [{ networks: ['127.0.0.0/8'] }] }, { host: '127.0.0.1', trustProxy: true })).toEqual([expect.stringMatching(/trusts \(127\.0\.0\.0\/8\)/)])
    expect(warnings({ deny: [{ networks: ['::1'] }] }, { host: '127.0.0.1', trustProxy: true })).toEqual([expect.stringMatching(/trusts \(::1\)/)])
    expect(warnings({ allow: [{ networks: ['10.0.0.0/8'] }] }, { host: '127.0.0.1', trustProxy: true })).toEqual([])
    expect(warnings({ allow: [{ networks: ['10.8.0.0/16', '2001:db8::/32'] }] }, { trustProxy: ['192.0.2.10', '2001:db9::1'] })).toEqual([])
    // Forward-auth learns the address only from a trusted proxy: its hosts' rules need one (a config error).
    expect(configProblems(yamlOf({}, {}, { hosts: { 'app.example.com': { deny: [{ networks: ['10.0.0.0/8'] }] } } }))).toEqual([
      expect.stringMatching(/^forwardAuth\.hosts: needs server\.trustProxy to admit the proxy in front/),
    ])
    expect(warnings({}, { trustProxy: ['192.0.2.10'] }, { hosts: { 'app.example.com': { deny: [{ networks: ['10.0.0.0/8'] }] } } })).toEqual([])
  })
})

/** The network address of `bytes` under a prefix of `bits` (host bits cleared), dotted. */
function networkAddressOf (bytes: number[], bits: number): string {
  return bytes.map((byte, i) => {
    const kept = Math.max(0, Math.min(8, bits - 8 * i))
    return byte & (0xff << (8 - kept)) & 0xff
  }).join('.')
}

describe('a refusal with no allow rule matched, and the address', () => {
  const bob: Identity = { sub: 'bob', subject: 'bob', email: 'bob@example.com', groups: [] }
  it.each([
    ['every allow rule names networks the address is not in: no account would pass from here', [{ networks: ['10.8.0.0/16'] }, { emails: ['boss@example.com'], networks: ['10.9.0.0/16'] }], '192.0.2.1', true],
    ['an address that cannot be told, the same', [{ networks: ['10.8.0.0/16'] }], undefined, true],
    ['an allow rule without networks: another account might pass', [{ networks: ['10.8.0.0/16'] }, { emails: ['boss@example.com'] }], '192.0.2.1', undefined],
    ['an allow rule whose networks take the address, not the person: another account might pass', [{ emails: ['boss@example.com'], networks: ['192.0.2.0/24'] }], '192.0.2.1', undefined],
    ['an excluded network: the address is out', [{ networks: ['0.0.0.0/0', '!192.0.2.0/24'] }], '192.0.2.1', true],
    // No network helps a request no allow rule takes: the page must not send the person to a VPN for it.
    ['the only networked allow rule is for other paths: no network would pass this one', [{ networks: ['10.8.0.0/16'], paths: ['/app/admin/*'] }], '192.0.2.1', undefined],
    ['the only networked allow rule is for other methods, the same', [{ networks: ['10.8.0.0/16'], methods: ['POST'] }], '192.0.2.1', undefined],
    ['a rule for this path from another network, one for other paths from here: from here', [{ networks: ['10.8.0.0/16'], paths: ['/app/*'] }, { networks: ['192.0.2.0/24'], paths: ['/app/admin/*'] }], '192.0.2.1', true],
    ['a rule for this path and method from another network: from here', [{ networks: ['10.8.0.0/16'], paths: ['/app/*'], methods: ['GET'] }], '192.0.2.1', true],
  ])('%s', (_what, allow, address, byAddress) => {
    const judgement = compileRules(lists(allow))(bob, 'GET', '/app/x', address)
    expect(judgement).toMatchObject({ admit: false, rule: undefined, refusedBy: 'no_allow_rule' })
    expect(judgement.byAddress).toBe(byAddress)
  })
})

// A re-reading's: "connect from a network its rules take" only when some network would admit this
// request for someone, and then with deny rules too.
/** `::/80` is the mapped `::ffff:0:0/96` and these 16 networks beside it, written with `!`. */
const MAPPED_NEIGHBOURS = Array.from({ length: 16 }, (_, k) => {
  const group = (0xffff << (16 - k)) & 0xffff
  return `!${group === 0 ? '::' : `::${group.toString(16)}:0:0`}/${81 + k}`
})

describe('a refusal by address, and what some network would admit', () => {
  const bob: Identity = { sub: 'bob', subject: 'bob', email: 'bob@example.com', groups: [] }
  it('a deny rule that refuses this path to everyone from the only allowing network: the person is not sent there', () => {
    const judge = compileRules(lists([{ networks: ['10.8.0.0/16'] }], [{ networks: ['10.8.0.0/16'], paths: ['/app/admin/*'] }]))
    expect(judge(bob, 'GET', '/app/admin/x', '10.8.0.1').admit).toBe(false)
    expect(judge(bob, 'GET', '/app/admin/x', '192.0.2.1')).toMatchObject({ admit: false, rule: undefined })
    expect(judge(bob, 'GET', '/app/admin/x', '192.0.2.1').byAddress).toBeUndefined()
    expect(judge(bob, 'GET', '/app/x', '192.0.2.1').byAddress).toBe(true)
  })

  // A re-reading's: the deny rule's networks were not compared with the allow rule's, so any deny
  // rule on the request alone turned the tell off, even one beside the allow rule's network.
  it.each([
    ['allow the VPN, deny the guest Wi-Fi: from home, the VPN would pass', [{ networks: ['10.8.0.0/16'] }], [{ networks: ['192.168.77.0/24'] }], true],
    ['allow the VPN, deny a range around it: no address passes', [{ networks: ['10.8.0.0/16'] }], [{ networks: ['10.0.0.0/8'] }], undefined],
    ['allow 10/8, deny one /16 inside it: the rest of 10/8 passes', [{ networks: ['10.0.0.0/8'] }], [{ networks: ['10.8.0.0/16'] }], true],
    ['allow two /24s, deny exactly both: none passes', [{ networks: ['10.8.1.0/24', '10.8.2.0/24'] }], [{ networks: ['10.8.1.0/24'] }, { networks: ['10.8.2.0/24'] }], undefined],
    ['allow two /24s, deny one: the other passes', [{ networks: ['10.8.1.0/24', '10.8.2.0/24'] }], [{ networks: ['10.8.1.0/24'] }], true],
    ['a deny of 10/8 but the VPN (! in a deny): the VPN passes', [{ networks: ['10.8.0.0/16'] }], [{ networks: ['10.0.0.0/8', '!10.8.0.0/16'] }], true],
    ['a deny of 10/8 but another network: none passes', [{ networks: ['10.8.0.0/16'] }], [{ networks: ['10.0.0.0/8', '!10.9.0.0/16'] }], undefined],
    ['an IPv6 allow and an IPv4 deny around here: IPv6 passes', [{ networks: ['fd00:8::/32'] }], [{ networks: ['10.0.0.0/8'] }], true],
    ['an IPv6 allow and a deny of the same /64: none passes', [{ networks: ['fd00:8::/64'] }], [{ networks: ['fd00:8::/64'] }], undefined],
    ['a deny of this path from the VPN: none passes', [{ networks: ['10.8.0.0/16'] }], [{ networks: ['10.8.0.0/16'], paths: ['/app/*'] }], undefined],
    ['a deny without networks on other paths: the VPN passes this one', [{ networks: ['10.8.0.0/16'] }], [{ paths: ['/app/admin/*'] }], true],
    ['a deny of the VPN on other paths: the VPN passes this one', [{ networks: ['10.8.0.0/16'] }], [{ networks: ['10.8.0.0/16'], paths: ['/app/admin/*'] }], true],
    ['a deny of a person from the VPN: another account passes there', [{ networks: ['10.8.0.0/16'] }], [{ emails: ['bob@example.com'], networks: ['10.8.0.0/16'] }], true],
    // An attacker's: the tell read a deny glob as the path is, while the gate also reads it folded
    // and as routers dispatch it; and it counted IPv4-mapped IPv6 addresses, where no client is.
    ['a deny of /app/admin/* from the VPN, asked as /app/ADMIN/x: none passes', [{ networks: ['10.8.0.0/16'] }], [{ networks: ['10.8.0.0/16'], paths: ['/app/admin/*'] }], undefined, '/app/ADMIN/x'],
    ['the same, asked through a front controller, /app/index.php/admin/x: none passes', [{ networks: ['10.8.0.0/16'] }], [{ networks: ['10.8.0.0/16'], paths: ['/app/admin/*'] }], undefined, '/app/index.php/admin/x'],
    ['an allow of ::/80 but its 16 neighbours of the mapped /96: none passes', [{ networks: ['::/80', ...MAPPED_NEIGHBOURS] }], [], undefined],
    ['an allow of ::/80 but 15 of those neighbours: the one left passes', [{ networks: ['::/80', ...MAPPED_NEIGHBOURS.slice(1)] }], [], true],
  ])('%s', (_what, allow, deny, byAddress, path = '/app/x') => {
    const judge = compileRules(lists(allow, deny), '/app/')
    // The request is refused from every address of the allow rule's network that the tell could send the person to.
    if (byAddress === undefined && deny.length > 0) expect(judge(bob, 'GET', path, '10.8.0.1').admit).toBe(false)
    const judgement = judge(bob, 'GET', path, '192.0.2.1')
    expect(judgement).toMatchObject({ admit: false, rule: undefined, refusedBy: 'no_allow_rule' })
    expect(judgement.byAddress).toBe(byAddress)
  })

  const NETWORKS = ['10.8.0.0/16', '10.9.0.0/16', '192.0.2.0/24', '!10.8.1.0/24']
  const ADDRESSES = ['10.8.0.1', '10.8.1.1', '10.9.0.1', '192.0.2.1', '198.51.100.1']
  const IDENTITIES: Identity[] = [bob, { sub: 'boss', subject: 'boss', email: 'boss@example.com', groups: [] }, { sub: 'eve', subject: 'eve', email: 'eve@example.com', groups: [] }]
  const REQUESTS = [['GET', '/app/x'], ['POST', '/app/admin/y'], ['DELETE', '/other/z']] as const
  const request = {
    networks: fc.subarray(NETWORKS, { minLength: 1 }),
    paths: fc.subarray(['/app/*', '/app/admin/*', '/app/**', '/other/*'], { minLength: 1 }),
    methods: fc.subarray(['GET', 'POST', 'DELETE'], { minLength: 1 }),
  }
  const rule = (person: boolean): fc.Arbitrary<Record<string, string[]>> => fc.record<Record<string, string[]>>(person ? { ...request, emails: fc.subarray(['bob@example.com', 'boss@example.com'], { minLength: 1 }) } : request, { requiredKeys: [] })
    .filter((conditions) => Object.keys(conditions).length > 0)
  const someAdmits = (judge: ReturnType<typeof compileRules>, method: string, path: string) =>
    ADDRESSES.some((address) => IDENTITIES.some((identity) => judge(identity, method, path, address).admit))

  // Deny rules about the request alone: one on a person refuses that person everywhere, which the
  // address does not tell (the page says no account passes from here, not that this one would there).
  it('property: byAddress only when some address admits someone for the same request; and, when no allow rule matched, always then when none does from here', () => {
    fc.assert(fc.property(fc.array(rule(true), { minLength: 1, maxLength: 3 }), fc.array(rule(false), { maxLength: 2 }), fc.constantFrom(...ADDRESSES), fc.constantFrom(...IDENTITIES), fc.constantFrom(...REQUESTS), (allow, deny, address, identity, [method, path]) => {
      const judge = compileRules(lists(allow, deny))
      const judgement = judge(identity, method, path, address)
      if (judgement.byAddress === true) expect(someAdmits(judge, method, path)).toBe(true)
      const fromHere = IDENTITIES.some((other) => judge(other, method, path, address).admit)
      if (judgement.refusedBy === 'no_allow_rule' && judgement.byAddress !== true && !fromHere) expect(someAdmits(judge, method, path)).toBe(false)
    }), { numRuns: 2000 })
  })
})
