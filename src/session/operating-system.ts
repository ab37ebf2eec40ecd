// Which operating system a User-Agent header names, beside its browser (./browser-family.ts), so a
// person tells "Chrome on macOS" from "Chrome on Windows" on their list of sessions: Windows, macOS,
// iOS, iPadOS, Android, ChromeOS, Linux, or other. The same rules as the browser's: a fixed order of
// substring tests on at most the header's first USER_AGENT_READ characters, no regex, so no header
// costs more. The client's own word: it labels a session for its owner, and decides nothing.
import { USER_AGENT_READ } from './browser-family.js'

/** What the list of sessions shows for a session's operating system (the order is the person index's stored byte: append only). */
export const OPERATING_SYSTEMS = ['Windows', 'macOS', 'iOS', 'iPadOS', 'Android', 'ChromeOS', 'Linux', 'other'] as const
export type OperatingSystem = typeof OPERATING_SYSTEMS[number]

/**
 * The operating system a User-Agent names. Phones and tablets say "like Mac OS X" (Apple's) or
 * "Linux" (Android), and ChromeOS says "X11": the more specific token is tested first.
 */
export function operatingSystem (userAgent: string | undefined): OperatingSystem {
  if (typeof userAgent !== 'string') return 'other'
  const ua = userAgent.slice(0, USER_AGENT_READ)
  if (ua.includes('iPad')) return 'iPadOS'
  if (ua.includes('iPhone') || ua.includes('iPod')) return 'iOS'
  if (ua.includes('Android')) return 'Android'
  if (ua.includes('CrOS')) return 'ChromeOS'
  if (ua.includes('Windows')) return 'Windows'
  if (ua.includes('Macintosh') || ua.includes('Mac OS X')) return 'macOS'
  if (ua.includes('Linux')) return 'Linux'
  return 'other'
}
