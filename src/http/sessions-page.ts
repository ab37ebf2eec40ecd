// /oauth/sessions/ as a page: the signed-in person's sessions, newest first, the current one
// marked, each with a revoke button (a same-origin form POST), and "sign out everywhere". The same
// look as the gateway's other pages (pages.ts); every value escaped.
import type { PersonSession } from '../session/person-index.js'
import { escapeHtml, renderPage, signOutEverywhereButton } from './pages.js'

/** A session on the list, whether it is the one this request came with, and, for an agent's grant, which client on which route. */
export interface ListedSession extends PersonSession {
  readonly current: boolean
  readonly agent?: { readonly client: string, readonly route: string } | undefined
}

/** What the first column says of a session: its browser, or the agent's client and route. */
function who (session: ListedSession): string {
  if (session.agent === undefined) return escapeHtml(session.browser)
  return `${escapeHtml(session.browser)}: <strong>${escapeHtml(session.agent.client)}</strong> on <code>${escapeHtml(session.agent.route)}</code>`
}

/** A time as a person reads it on the page: `2026-11-26 10:26 UTC`. */
function when (ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 16).replace('T', ' ')} UTC`
}

function row (session: ListedSession): string {
  // This browser's own row signs out as /oauth/ does (the providers' sign-out included): a revoke
  // would leave the provider's session, and the next visit would sign straight back in.
  const action = session.current ? '/oauth/logout/' : `/oauth/sessions/${encodeURIComponent(session.publicId)}/revoke`
  const providers = session.providers.map((provider) => `<code>${escapeHtml(provider)}</code>`).join(', ')
  const label = session.current ? 'Sign out' : 'Revoke'
  return `<tr${session.current ? ' class="current"' : ''}><td>${who(session)}${session.current ? ' <strong>(this browser)</strong>' : ''}</td>` +
    `<td>${escapeHtml(when(session.started))}</td><td>${escapeHtml(when(session.lastSeen))}</td><td>${providers}</td>` +
    `<td><form method="post" action="${escapeHtml(action)}"><button type="submit" class="button">${label}</button></form></td></tr>`
}

/** The list of one's sessions. */
export function sessionsPage (sessions: readonly ListedSession[]): string {
  return renderPage('Your sessions', `<h1>Your sessions</h1>
<p>Where you are signed in at this gateway. Revoking a session signs that browser out at its next request.</p>
<table class="sessions"><thead><tr><th>Browser</th><th>Started</th><th>Last seen</th><th>Signed in with</th><th></th></tr></thead>
<tbody>${sessions.map(row).join('\n')}</tbody></table>
${signOutEverywhereButton()}
<p><a href="/oauth/">Back</a></p>`)
}
