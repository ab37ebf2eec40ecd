// /oauth/sessions/ as a page: the signed-in person's sessions, newest first, each named by its
// browser and operating system and the address it signed in from, the current one marked, each
// other one with a Revoke button that asks first (revokeConfirmPage: a GET, whose form POSTs), and
// "sign out everywhere". The same look as the gateway's other pages (pages.ts); every value escaped.
import type { PersonSession } from '../session/person-index.js'
import { escapeHtml, renderPage, signOutEverywhereButton } from './pages.js'

/** A session on the list, whether it is the one this request came with, and, for an agent's grant, which client on which route. */
export interface ListedSession extends PersonSession {
  readonly current: boolean
  readonly agent?: { readonly client: string, readonly route: string } | undefined
}

/** The form field that says a revoke POST came from the confirmation page's button. */
export const CONFIRMED = 'confirm'

/** The address of a session's confirmation page, which its form POSTs to as well. */
export function revokeUrl (publicId: string): string {
  return `/oauth/sessions/${encodeURIComponent(publicId)}/revoke`
}

/** A session's browser as a person reads it: `Chrome on macOS`, `curl` (no operating system told), or the family alone when none was kept. */
export function deviceOf (session: PersonSession): string {
  const os = session.origin?.os
  if (os === undefined || os === 'other') return session.browser
  return `${session.browser === 'other' ? 'Unknown browser' : session.browser} on ${os}`
}

/** What the first column says of a session: its browser, or the agent's client and route. */
function who (session: ListedSession): string {
  if (session.agent === undefined) return escapeHtml(deviceOf(session))
  return `${escapeHtml(session.browser)}: <strong><bdi>${escapeHtml(session.agent.client)}</bdi></strong> on <code>${escapeHtml(session.agent.route)}</code>`
}

/** Where a session signed in from: its client address, or a dash when none was kept (an agent's grant, an older session). */
function from (session: PersonSession): string {
  const address = session.origin?.address
  return address === undefined ? '&mdash;' : `<code>${escapeHtml(address)}</code>`
}

/** A time as a person reads it on the page: `2026-11-26 10:26 UTC`. */
function when (ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 16).replace('T', ' ')} UTC`
}

function providersOf (session: PersonSession): string {
  return session.providers.map((provider) => `<code>${escapeHtml(provider)}</code>`).join(', ')
}

function row (session: ListedSession): string {
  // This browser's own row signs out as /oauth/ does (the providers' sign-out included): a revoke
  // would leave the provider's session, and the next visit would sign straight back in.
  const action = session.current
    ? '<form method="post" action="/oauth/logout/"><button type="submit" class="button">Sign out</button></form>'
    : `<a class="button" href="${escapeHtml(revokeUrl(session.publicId))}">Revoke</a>`
  return `<tr${session.current ? ' class="current"' : ''}><td>${who(session)}${session.current ? ' <strong>(this browser)</strong>' : ''}</td>` +
    `<td data-label="Signed in from">${from(session)}</td><td data-label="Started">${escapeHtml(when(session.started))}</td>` +
    `<td data-label="Last seen">${escapeHtml(when(session.lastSeen))}</td><td data-label="Signed in with">${providersOf(session)}</td><td>${action}</td></tr>`
}

/** What the list says when it is back from a revoke. */
const REVOKED = {
  session: '<p class="notice"><strong>The session was revoked:</strong> it has ended at this gateway.</p>\n',
  agent: '<p class="notice"><strong>The agent\'s access was revoked:</strong> its tokens no longer work.</p>\n',
}

/** The list of one's sessions; `revoked`: just back from a revoke of a session or an agent's access, which the page says. */
export function sessionsPage (sessions: readonly ListedSession[], revoked?: keyof typeof REVOKED): string {
  return renderPage('Your sessions', `<h1>Your sessions</h1>
${revoked === undefined ? '' : REVOKED[revoked]}<p>Where you are signed in at this gateway, and the agents you allowed. Revoking a session ends it at this gateway (where your provider still remembers that browser, its next visit signs in again without asking); revoking an agent's ends its access.</p>
<table class="sessions"><thead><tr><th>Browser</th><th>Signed in from</th><th>Started</th><th>Last seen</th><th>Signed in with</th><th></th></tr></thead>
<tbody>${sessions.map(row).join('\n')}</tbody></table>
${signOutEverywhereButton()}
<p><a href="/oauth/">Back</a></p>`)
}

/**
 * Asked before a session is revoked (GET /oauth/sessions/<id>/revoke): which session it is, and a
 * form whose button POSTs the revoke; Cancel goes back to the list. Nothing ends until that POST.
 */
export function revokeConfirmPage (session: ListedSession): string {
  const warning = session.current
    ? '<p><strong>This is the browser you are using now:</strong> revoking it signs you out here.</p>'
    : session.agent === undefined
      ? '<p>Revoking it ends this session at this gateway, at once. It does not sign that browser out of your provider: where the provider still remembers it, its next visit here signs in again without asking. To lock a lost device out, also end its session at your provider (in your account there).</p>'
      : '<p>Revoking it ends this agent\'s access: its tokens stop working, and it has to be allowed again.</p>'
  // An agent's grant is its access, not a browser's session (a newcomer's reading).
  const [question, kind, button] = session.agent === undefined ? ['Revoke this session?', 'Browser', 'Revoke this session'] : ['Revoke this agent\'s access?', 'Agent', 'Revoke access']
  return renderPage(question, `<h1>${question}</h1>
<dl class="seen"><dt>${kind}</dt><dd>${who(session)}</dd><dt>Signed in from</dt><dd>${from(session)}</dd>` +
`<dt>Started</dt><dd>${escapeHtml(when(session.started))}</dd><dt>Last seen</dt><dd>${escapeHtml(when(session.lastSeen))}</dd>` +
`<dt>Signed in with</dt><dd>${providersOf(session)}</dd></dl>
${warning}
<form method="post" action="${escapeHtml(revokeUrl(session.publicId))}"><input type="hidden" name="${CONFIRMED}" value="1"><button type="submit" class="button">${button}</button></form>
<p><a href="/oauth/sessions/">Cancel</a></p>`)
}
