// Where a session signed in from, as its person-index entry keeps it: the operating system read
// from the User-Agent (a table of real headers and of hostile ones: empty, 5,000 characters, markup,
// CRLF, a token past the read limit), and the client address as kept (IPv4 whole, IPv6 as its /64,
// an IPv4-mapped one as IPv4; anything that is not one address, nothing).
import { describe, expect, it } from 'vitest'
import { USER_AGENT_READ } from '../../src/session/browser-family.js'
import { addressBytes, addressText } from '../../src/session/client-address.js'
import { operatingSystem } from '../../src/session/operating-system.js'

describe('operating system from the User-Agent', () => {
  const table: Array<[string, string | undefined, string]> = [
    ['absent', undefined, 'other'],
    ['empty', '', 'other'],
    ['curl', 'curl/8.5.0', 'other'],
    ['Chrome on macOS', 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36', 'macOS'],
    ['Firefox on Linux', 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0', 'Linux'],
    ['Firefox on Ubuntu', 'Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0', 'Linux'],
    ['Edge on Windows', 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0', 'Windows'],
    ['Safari on iOS ("like Mac OS X")', 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1', 'iOS'],
    ['Firefox on iOS', 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) FxiOS/128.0 Mobile/15E148 Safari/605.1.15', 'iOS'],
    ['Safari on iPadOS', 'Mozilla/5.0 (iPad; CPU OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1', 'iPadOS'],
    ['Chrome on Android ("Linux")', 'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36', 'Android'],
    ['Chrome on ChromeOS ("X11")', 'Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36', 'ChromeOS'],
    ['headless Chrome on Linux', 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.0.0 Safari/537.36', 'Linux'],
    ['a bare Mozilla', 'Mozilla/5.0', 'other'],
    ['FreeBSD', 'Mozilla/5.0 (X11; FreeBSD amd64; rv:128.0) Gecko/20100101 Firefox/128.0', 'other'],
    ['5,000 characters, no token', 'x'.repeat(5000), 'other'],
    ['5,000 characters, the token past the read limit', `${'x'.repeat(5000 - 'Windows'.length)}Windows`, 'other'],
    ['the token just inside the read limit', `${'x'.repeat(USER_AGENT_READ - 'Windows'.length)}Windows`, 'Windows'],
    ['a megabyte of near-tokens', 'Window'.repeat(200_000), 'other'],
    ['markup', '<script>alert("Windows")</script>', 'Windows'],
    ['markup, no token', '<img src=x onerror=alert(1)>', 'other'],
    ['CRLF', 'Mozilla/5.0\r\nSet-Cookie: a=b\r\n(Macintosh)', 'macOS'],
    ['control characters', '\u0000\u001b[31mLinux\r\n', 'Linux'],
    ['lone surrogate', '\ud800Android', 'Android'],
    ['lower case is not the token', 'windows linux android', 'other'],
  ]
  it.each(table)('%s', (_name, header, os) => {
    expect(operatingSystem(header)).toBe(os)
  })
})

describe('the client address as an entry keeps it', () => {
  const table: Array<[string, string | undefined, string | undefined]> = [
    ['IPv4', '203.0.113.7', '203.0.113.7'],
    ['loopback', '127.0.0.1', '127.0.0.1'],
    ['IPv4-mapped IPv6: the IPv4 address', '::ffff:198.51.100.23', '198.51.100.23'],
    ['IPv6: its /64', '2001:db8:85a3:8d3:1319:8a2e:370:7348', '2001:db8:85a3:8d3::/64'],
    ['IPv6 written long', '2001:0db8:0000:0001:0000:0000:0000:0001', '2001:db8:0:1::/64'],
    ['IPv6 loopback', '::1', '::/64'],
    ['IPv6 with a zone', 'fe80::1%eth0', 'fe80::/64'],
    ['NAT64 (an IPv4 tail, not mapped)', '64:ff9b::192.0.2.1', '64:ff9b::/64'],
    ['absent', undefined, undefined],
    ['empty', '', undefined],
    ['a host name', 'gateway.example', undefined],
    ['two addresses', '203.0.113.7, 198.51.100.1', undefined],
    ['an address and a port', '203.0.113.7:443', undefined],
    ['IPv4 with leading zeros', '010.0.0.1', undefined],
    ['IPv4 past 255', '256.0.0.1', undefined],
    ['markup', '<script>alert(1)</script>', undefined],
    ['CRLF', '203.0.113.7\r\nx-injected: 1', undefined],
    ['5,000 characters', '1'.repeat(5000), undefined],
    ['a CIDR range', '10.0.0.0/8', undefined],
  ]
  it.each(table)('%s', (_name, address, shown) => {
    const bytes = addressBytes(address)
    expect(addressText(bytes)).toBe(shown)
    expect(bytes.length).toBe(shown === undefined ? 0 : shown.includes(':') ? 8 : 4)
  })

  it('reads no other length as an address', () => {
    for (const length of [1, 2, 3, 5, 6, 7, 9, 16]) expect(addressText(Buffer.alloc(length, 1))).toBeUndefined()
  })
})
