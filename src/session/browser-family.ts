// Which browser a User-Agent header names, as a person would recognise it on their list of
// sessions: Firefox, Chrome, Edge, Safari, curl, or other (and an agent's grant,
// src/agents/, which no User-Agent names). A fixed order of substring tests on at
// most the header's first 512 characters: linear in that length, no regex, so no header costs more.
// A User-Agent is the client's own word: it labels a session for its owner, and decides nothing.

/** What the list of sessions shows for a session's browser (the order is the person index's stored byte: append only). */
export const BROWSER_FAMILIES = ['Firefox', 'Chrome', 'Edge', 'Safari', 'curl', 'other', 'agent (MCP client or CLI)'] as const
export type BrowserFamily = typeof BROWSER_FAMILIES[number]
/** The family of an agent's grant. */
export const AGENT_FAMILY: BrowserFamily = 'agent (MCP client or CLI)'

/** How much of the header is looked at: real ones fit; a longer one is read no further. */
export const USER_AGENT_READ = 512

/**
 * The family of the browser a User-Agent names. Edge and Chrome say "Safari" too, and Edge says
 * "Chrome": the more specific token is tested first.
 */
export function browserFamily (userAgent: string | undefined): BrowserFamily {
  if (typeof userAgent !== 'string') return 'other'
  const ua = userAgent.slice(0, USER_AGENT_READ)
  if (ua.startsWith('curl/')) return 'curl'
  if (ua.includes('Firefox/') || ua.includes('FxiOS/')) return 'Firefox'
  if (ua.includes('Edg/') || ua.includes('Edge/') || ua.includes('EdgA/') || ua.includes('EdgiOS/')) return 'Edge'
  if (ua.includes('Chrome/') || ua.includes('Chromium/') || ua.includes('CriOS/')) return 'Chrome'
  if (ua.includes('Safari/') && ua.includes('Version/')) return 'Safari'
  return 'other'
}
