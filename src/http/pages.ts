// The HTML a person sees from the gateway itself: small self-contained pages, every dynamic value
// escaped, no framework, never a stack trace, token or code.
import { ERRORS, type GatewayError } from '../errors.js'
import { HOME } from '../oauth/urls.js'
import type { Identity } from '../session/record.js'

function escapeHtml (text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)
}

/** A small self-contained page; every dynamic value is escaped. */
function renderPage (title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem;color:#222}
h1{font-size:1.4rem}.code{color:#666;font-size:.9rem}code{background:#f3f3f3;padding:.1rem .3rem;border-radius:3px}a.button,button.button{display:inline-block;margin-top:1rem;padding:.5rem 1rem;background:#2456c7;color:#fff;border:0;border-radius:4px;font:inherit;text-decoration:none;cursor:pointer}</style>
</head><body>
${body}
</body></html>
`
}

/**
 * The sign-in address to offer with an error, only when signing in can help: never with
 * session_store_unavailable, since a new session would need the store too.
 */
export function signInRemedy (error: GatewayError): string | undefined {
  return error.code === 'session_store_unavailable' ? undefined : error.details.loginUrl
}

/** `startOver`: where the page sends a person when neither signing in nor trying again helps. */
export function errorPage (error: GatewayError, startOver: string): string {
  const entry = ERRORS[error.code]
  const { loginUrl, retryUrl } = error.details
  const signIn = signInRemedy(error)
  // A failed sign-in callback has no address of its own to retry: starting the sign-in over is the retry.
  const [href, label] = signIn ? [signIn, 'Sign in again'] : retryUrl ? [retryUrl, 'Try again'] : loginUrl ? [loginUrl, 'Try again'] : [startOver, startOver === HOME ? 'Start over' : 'Go back']
  return renderPage(entry.title, `<h1>${escapeHtml(entry.title)}</h1>
<p>${escapeHtml(entry.explanation)}</p>
<p>${escapeHtml(error.message)}</p>
<p class="code">Error code: <code>${escapeHtml(error.code)}</code></p>
<a class="button" href="${escapeHtml(href)}">${label}</a>`)
}

/** The gateway's home page, /oauth/: who is signed in where, a sign-in link per provider, a sign-out button. */
export function homePage (identities: Record<string, Identity>, links: ReadonlyArray<{ name: string, href: string }>): string {
  const signedIn = Object.entries(identities).map(([provider, identity]) =>
    `<li>${escapeHtml(identity.name ?? identity.sub)}${identity.email ? ` (${escapeHtml(identity.email)})` : ''} with <code>${escapeHtml(provider)}</code></li>`)
  const who = signedIn.length > 0
    ? `<p>You are signed in:</p><ul>${signedIn.join('')}</ul>
<form method="post" action="/oauth/logout/"><button type="submit" class="button">Sign out</button></form>`
    : '<p>You are not signed in.</p>'
  const buttons = links.map(({ name, href }) => `<a class="button" href="${escapeHtml(href)}">Sign in with ${escapeHtml(name)}</a>`).join(' ')
  return renderPage('Gateway', `<h1>Gateway</h1>
${who}
${buttons === '' ? '' : `<p>${buttons}</p>`}`)
}

/** The page after /oauth/logout/: one "sign in again" link per provider. */
export function signedOutPage (links: ReadonlyArray<{ name: string, href: string }>): string {
  const buttons = links.map(({ name, href }) =>
    `<a class="button" href="${escapeHtml(href)}">Sign in again${links.length > 1 ? ` with ${escapeHtml(name)}` : ''}</a>`).join(' ')
  return renderPage('Signed out', `<h1>You are signed out</h1>
<p>Your session at this gateway has ended. The next visit to a protected page asks you to sign in.</p>
${buttons}`)
}

/**
 * Asked when another site sent the browser to /oauth/logout/: only the person's own click (a
 * same-origin form POST) ends the session. `next` travels as a hidden field.
 */
export function signOutConfirmPage (next: string | undefined): string {
  const hidden = next === undefined ? '' : `<input type="hidden" name="next" value="${escapeHtml(next)}">`
  return renderPage('Sign out?', `<h1>Sign out?</h1>
<p>Another site sent you here to end your session at this gateway. Sign out only if you meant to.</p>
<form method="post" action="/oauth/logout/">${hidden}<button type="submit" class="button">Sign out</button></form>
<p><a href="${HOME}">Stay signed in</a></p>`)
}
