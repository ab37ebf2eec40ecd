// `server.trustProxy`: addresses, CIDR ranges and proxy-addr's group names, none wider than a
// network of proxies, and `true` only on loopback.
import { BlockList, isIP } from 'node:net'
import { Issues, describe } from '../problems.js'
import { isLoopbackHost } from '../loopback.js'

/** proxy-addr's names for address groups, accepted besides addresses and CIDR ranges. */
const PROXY_GROUPS = ['loopback', 'linklocal', 'uniquelocal']

function isAddressOrRange (entry: string): boolean {
  if (PROXY_GROUPS.includes(entry)) return true
  const [address = '', bits, extra] = entry.split('/')
  const version = isIP(address)
  if (version === 0 || extra !== undefined) return false
  return bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= (version === 4 ? 32 : 128))
}

/** Whether IPv6 `probe` lies in `address`/`bits`. */
function inRange (probe: string, address: string, bits: number): boolean {
  const range = new BlockList()
  range.addSubnet(address, bits, 'ipv6')
  return range.check(probe, 'ipv6')
}

/**
 * Why a trusted range is wider than any network of proxies (shorter than /8 for IPv4, the largest
 * private block, /104 for IPv4-mapped IPv6, or /7 for IPv6, the unique-local block): `0.0.0.0/0`, `::/0` or two `/1`s trust
 * every client, as `true` does. Undefined for a range that is narrow enough.
 */
function tooWide (entry: string): string | undefined {
  const [address = '', bits] = entry.split('/')
  if (bits === undefined || PROXY_GROUPS.includes(entry)) return undefined
  const version = isIP(address)
  const width = Number(bits)
  // IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) are IPv4 peers: a range among them is measured as
  // IPv4 (its last 32 bits), and one that holds them all (::ffff:0:0/96, ::/80) trusts every one.
  const mapped = version === 6 && inRange(address, '::ffff:0:0', 96)
  const holdsMapped = version === 6 && width <= 96 && inRange('::ffff:0.0.0.0', address, width)
  const least = version === 4 ? 8 : mapped || (holdsMapped && width >= 7) ? 96 + 8 : 7
  if (width >= least) return undefined
  return `${describe(entry)} trusts X-Forwarded-For from a large part of the internet (a range shorter than /${least}): any client could pick its own address; ` +
    'list the addresses or ranges of your proxies, such as 10.0.0.0/8'
}

/** true, false, or a list (or comma-separated string, for ${VAR}) of addresses and CIDR ranges. */
export function trustProxy (issues: Issues, value: boolean | string | string[]): boolean | string[] {
  const path = ['server', 'trustProxy']
  if (typeof value === 'boolean') return value
  if (value === 'true' || value === 'false') return value === 'true'
  const list = typeof value === 'string' ? value.split(',').map((entry) => entry.trim()).filter(Boolean) : value
  const trusted = list.flatMap((entry, i) => {
    if (entry !== undefined && isAddressOrRange(entry.trim())) {
      const wide = tooWide(entry.trim())
      if (wide === undefined) return [entry.trim()]
      issues.add([...path, i], wide)
      return []
    }
    issues.add([...path, i], `must be an IP address or CIDR range such as 10.0.0.0/8 (or loopback, linklocal, uniquelocal), got ${describe(entry)}`)
    return []
  })
  return trusted.length > 0 ? trusted : false
}

/**
 * `trustProxy: true` believes X-Forwarded-For from any peer: only a gateway that listens on loopback
 * (so every peer is a proxy on this machine) may say it; anyone else could choose the address its
 * rate-limit budget is counted under.
 */
export function checkTrustAll (issues: Issues, trusted: boolean | string[], host: string): void {
  if (trusted !== true || isLoopbackHost(host) || host === '::1') return
  issues.add(['server', 'trustProxy'], `true believes X-Forwarded-For from every client, as server.host ${describe(host)} is not loopback: ` +
    'any client could pick its own address (and a fresh sign-in budget); list the addresses or CIDR ranges of your proxies instead, such as ["10.0.0.0/8"]')
}
