// The HTML a person sees from the gateway itself: small self-contained pages, every dynamic value
// escaped, no framework, never a stack trace, token or code.
import { ERRORS, type GatewayError } from './errors.js'

function escapeHtml (text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)
}

/** A small self-contained page; every dynamic value is escaped. */
function renderPage (title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem;color:#222}
h1{font-size:1.4rem}.code{color:#666;font-size:.9rem}code{background:#f3f3f3;padding:.1rem .3rem;border-radius:3px}a.button{display:inline-block;margin-top:1rem;padding:.5rem 1rem;background:#2456c7;color:#fff;border-radius:4px;text-decoration:none}</style>
</head><body>
${body}
</body></html>
`
}

export function errorPage (error: GatewayError): string {
  const entry = ERRORS[error.code]
  const { loginUrl, retryUrl } = error.details
  const [href, label] = loginUrl ? [loginUrl, 'Sign in again'] : retryUrl ? [retryUrl, 'Try again'] : ['/', 'Start over']
  return renderPage(entry.title, `<h1>${escapeHtml(entry.title)}</h1>
<p>${escapeHtml(entry.explanation)}</p>
<p>${escapeHtml(error.message)}</p>
<p class="code">Error code: <code>${escapeHtml(error.code)}</code></p>
<a class="button" href="${escapeHtml(href)}">${label}</a>`)
}

/** The page after /oauth/logout/: one "sign in again" link per provider. */
export function signedOutPage (links: Array<{ name: string, href: string }>): string {
  const buttons = links.map(({ name, href }) =>
    `<a class="button" href="${escapeHtml(href)}">Sign in again${links.length > 1 ? ` with ${escapeHtml(name)}` : ''}</a>`).join(' ')
  return renderPage('Signed out', `<h1>You are signed out</h1>
<p>Your session at this gateway has ended. The next visit to a protected page asks you to sign in.</p>
${buttons}`)
}
