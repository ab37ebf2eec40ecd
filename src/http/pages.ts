// The HTML a person sees from the gateway itself: small self-contained pages, every dynamic value
// escaped, no framework, never a stack trace, token or code.
import type { FastifyReply } from 'fastify'
import { ERRORS, type ErrorCode, type GatewayError, type Refused } from '../errors.js'
import { HOME } from '../oauth/urls.js'
import type { Identity } from '../session/record.js'

/**
 * The headers of every page of the gateway's own (and of oidc-provider's device pages). Each page
 * has a button (sign in, sign out everywhere, use another account, allow) that a page framing it
 * could trick out of a click, so no other page may frame it, a same-site one included: SameSite=Lax
 * sends the session cookie into a frame on a sibling host or another port of the same host. The
 * pages run no script and load nothing: `default-src 'none'` keeps it so should a value ever slip
 * past the escaping, with their own inline style. No `form-action`: a page's POST answers with a
 * redirect to a provider (sign-out) or to an agent's redirect URI (consent), which Chromium checks
 * against it. Another site never learns the page's address (a `next` with its query, a code in a
 * callback's).
 */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; frame-ancestors 'none'",
  'x-frame-options': 'DENY',
  'referrer-policy': 'same-origin',
  'x-content-type-options': 'nosniff',
}

/** Sends one of these pages: every page of the gateway's own goes out through here, with PAGE_HEADERS. */
export function sendUnframed (reply: FastifyReply, html: string): FastifyReply {
  return reply.type('text/html; charset=utf-8').headers(PAGE_HEADERS).send(html)
}

/** `text` safe inside HTML text and quoted attribute values. */
export function escapeHtml (text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)
}

/** A small self-contained page; every dynamic value is escaped. */
export function renderPage (title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem;color:#222}bdi{overflow-wrap:anywhere}
h1{font-size:1.4rem}.code{color:#666;font-size:.9rem}code{background:#f3f3f3;padding:.1rem .3rem;border-radius:3px}dl.seen{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem}dl.seen dd{margin:0}a.button,button.button{display:inline-block;margin-top:1rem;padding:.5rem 1rem;background:#2456c7;color:#fff;border:0;border-radius:4px;font:inherit;text-decoration:none;cursor:pointer}
form.inline{display:inline}button.link{background:none;border:0;padding:0;color:#2456c7;font:inherit;font-size:.9rem;text-decoration:underline;cursor:pointer}h2{font-size:1.1rem}ul.apps a.app{font-size:1.1rem}ul.who{list-style:none;padding:0}
table.sessions{border-collapse:collapse}table.sessions th,table.sessions td{text-align:left;vertical-align:top;padding:.3rem .6rem .3rem 0;overflow-wrap:break-word}table.sessions td code,table.sessions .button{white-space:nowrap}
@media (max-width:40rem){table.sessions thead{display:none}table.sessions tr{display:block;border-top:1px solid #ddd;padding:.6rem 0}table.sessions td{display:block;padding:.1rem 0}table.sessions td[data-label]::before{content:attr(data-label) ": ";color:#666}}</style>
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

/** The way back when nothing else on the page helps. */
function backLink (startOver: string): string {
  return `<a href="${escapeHtml(startOver)}">${startOver === HOME ? 'Start over' : 'Go back'}</a>`
}

const ONLY_THIS_REQUEST = 'You are signed in and may use this application, but not this page or action: its rules keep it from your account.'
/** A 403 the address decided: another account would come from the same place. */
const FROM_HERE = 'This application is not open to requests from where this one comes from, whichever account makes them. Connect from a network its rules take (a VPN or an office network) and try again.'
const BY_TOKEN = 'The access token sent with this request is valid, but this application\'s rules do not admit the client it was issued to.'

/**
 * A rules' 403: what the gateway saw (the person's own user, e-mail, groups and address), which rule refused
 * (its name only), and "Use another account", a form POST (sign-out is never a link).
 */
function refusedPage (error: GatewayError, refused: Refused, switchAccountUrl: string | undefined, startOver: string): string {
  const entry = ERRORS[error.code]
  const { seen, rule } = refused
  const email = seen?.email === undefined ? 'none' : `${escapeHtml(seen.email)}${seen.emailVerified ? '' : ' (not verified by the provider)'}`
  const groups = seen === undefined || seen.groups.length === 0 ? 'none' : seen.groups.map((group) => `<code>${escapeHtml(group)}</code>`).join(', ')
  const rows = seen === undefined
    ? '<dt>Account</dt><dd>the session holds no identity for this provider</dd>'
    : `<dt>User</dt><dd>${escapeHtml(seen.user)}</dd><dt>E-mail</dt><dd>${email}</dd><dt>Groups</dt><dd>${groups}</dd>`
  const provider = refused.provider === undefined ? '' : `<dt>Signed in with</dt><dd>${escapeHtml(refused.provider)}</dd>`
  const address = refused.address === undefined ? '' : `<dt>Address</dt><dd>${escapeHtml(refused.address)}</dd>`
  const on = refused.byNetwork === true ? ', on where the request comes from' : ''
  const why = rule !== undefined ? `the rule <code>${escapeHtml(rule)}</code>${on}` : refused.byNetwork === true ? 'no allow rule takes this address' : 'no allow rule matched'
  const only = refused.refusedFor === undefined ? '' : `<dt>Refused</dt><dd class="request"><code>${escapeHtml(refused.refusedFor.method)} ${escapeHtml(refused.refusedFor.path)}</code> only</dd>`
  const other = switchAccountUrl === undefined
    ? ''
    : `<form method="post" action="${escapeHtml(switchAccountUrl)}"><button type="submit" class="button">Use another account</button></form>`
  // Without a sign-in to offer, the caller brought its own token (a machine client): no account to switch.
  const explanation = error.details.loginUrl === undefined && switchAccountUrl === undefined
    ? BY_TOKEN
    : refused.refusedFor !== undefined ? ONLY_THIS_REQUEST : refused.byNetwork === true ? FROM_HERE : entry.explanation
  return renderPage(entry.title, `<h1>${escapeHtml(entry.title)}</h1>
<p>${escapeHtml(explanation)}</p>
<p>What the gateway saw:</p>
<dl class="seen">${provider}${rows}${address}${only}<dt>Refused by</dt><dd class="rule">${why}</dd></dl>
${other}
<p>${backLink(startOver)}</p>
${supportLine(error)}`)
}

/**
 * Codes whose message names the protocol's parts (the token endpoint, the ID token, JWKS): a person
 * reads the catalogue's plain explanation, and the message goes small beside the code, for support.
 */
const FOR_SUPPORT: ReadonlySet<ErrorCode> = new Set(['token_exchange_failed', 'provider_unavailable'])

/**
 * What a person reads under the heading: the explanation and the message, each said once (one
 * that holds the other stands alone); a message for support only is left to the foot of the page.
 */
function sentences (error: GatewayError, explanation: string): string[] {
  const message = error.message.trim()
  // Every invalid_state message is written for a person (a sign-in's, or a sign-out's): it says it all.
  if (error.code === 'invalid_state' && message !== '') return [message]
  if (FOR_SUPPORT.has(error.code) || message === '' || explanation.includes(message)) return [explanation]
  return message.includes(explanation) ? [message] : [explanation, message]
}

/** The code, and a message for support only (unless the explanation says it already): small, at the foot of the page. */
function supportLine (error: GatewayError): string {
  const detail = FOR_SUPPORT.has(error.code) && !ERRORS[error.code].explanation.includes(error.message.trim()) ? ` (${escapeHtml(error.message)})` : ''
  return `<p class="code">For support: error code <code>${escapeHtml(error.code)}</code>${detail}</p>`
}

/**
 * Where the page's button goes, and its label. A sign-in whose link is stale starts again toward
 * where it was going when the gateway could read that back from its own state, else from the home page.
 */
function remedy (error: GatewayError, startOver: string): [href: string, label: string] {
  const { loginUrl, retryUrl, flowNext } = error.details
  if (error.code === 'invalid_state') return [flowNext !== undefined && loginUrl !== undefined ? loginUrl : HOME, 'Start again']
  const signIn = signInRemedy(error)
  // A failed sign-in callback has no address of its own to retry: starting the sign-in over is the retry.
  // No signed-in identity (never signed in here, perhaps): "Sign in".
  if (signIn) return [signIn, error.code === 'unauthenticated' ? 'Sign in' : 'Sign in again']
  if (retryUrl) return [retryUrl, 'Try again']
  if (loginUrl) return [loginUrl, 'Try again']
  return [startOver, startOver === HOME ? 'Start over' : 'Go back']
}

/**
 * `startOver`: where the page sends a person when neither signing in nor trying again helps. The
 * title is the heading; the explanation and the message are each said once.
 */
export function errorPage (error: GatewayError, startOver: string): string {
  const entry = ERRORS[error.code]
  const { refused, switchAccountUrl } = error.details
  if (refused !== undefined) return refusedPage(error, refused, switchAccountUrl, startOver)
  const [href, label] = remedy(error, startOver)
  return renderPage(entry.title, `<h1>${escapeHtml(entry.title)}</h1>
${sentences(error, entry.explanation).map((text) => `<p>${escapeHtml(text)}</p>\n`).join('')}<a class="button" href="${escapeHtml(href)}">${label}</a>
${supportLine(error)}`)
}

/** An application the home page links: its path (or the page the person came from) and where the link goes. */
export interface HomeApp {
  readonly label: string
  readonly href: string
}

/**
 * A provider the person is signed in with: whom as, and a small "Use another account" (a form POST:
 * it signs out first) instead of a Sign-in button.
 */
function signedInLine (provider: string, identity: Identity, switchAccountUrl: ((provider: string) => string) | undefined): string {
  const email = identity.email ? ` (${escapeHtml(identity.email)})` : ''
  const other = switchAccountUrl === undefined
    ? ''
    : ` <form class="inline" method="post" action="${escapeHtml(switchAccountUrl(provider))}"><button type="submit" class="link">Use another account</button></form>`
  return `<li>Signed in as <strong><bdi>${escapeHtml(identity.name ?? identity.sub)}</bdi></strong>${email} with <code>${escapeHtml(provider)}</code>${other}</li>`
}

/** The way back to the applications, first on the page. */
function appList (apps: readonly HomeApp[]): string {
  if (apps.length === 0) return ''
  const items = apps.map(({ label, href }) => `<li><a class="app" href="${escapeHtml(href)}">${escapeHtml(label)}</a></li>`).join('')
  return `<h2>Your applications</h2>\n<ul class="apps">${items}</ul>\n`
}

/** The addresses of the agents' routes (an MCP server's), to give an MCP client or a CLI: they are no pages to open. */
function agentList (addresses: readonly string[]): string {
  if (addresses.length === 0) return ''
  const items = addresses.map((address) => `<li><code class="agent">${escapeHtml(address)}</code></li>`).join('')
  return `<h2>For your agents and CLIs</h2>\n<p>Give this address to an MCP client or a CLI: it signs in through this gateway and asks for your approval. The agents you approved are under <a href="/oauth/sessions/">Your sessions</a>.</p>\n<ul class="apps">${items}</ul>\n`
}

/**
 * The gateway's home page, /oauth/: the applications the person can open (`apps`, first), the
 * addresses of the agents' routes they may use (`agents`), whom they
 * are signed in as with which provider, a sign-out button, and a Sign-in button only for the
 * providers they are not signed in with. `switchAccountUrl`: "Use another account" per provider.
 */
export function homePage (identities: Record<string, Identity>, links: ReadonlyArray<{ name: string, href: string }>, apps: readonly HomeApp[] = [],
  switchAccountUrl?: (provider: string) => string, agents: readonly string[] = []): string {
  const signedIn = Object.entries(identities).map(([provider, identity]) => signedInLine(provider, identity, switchAccountUrl))
  const who = signedIn.length > 0
    ? `${appList(apps)}${agentList(agents)}<ul class="who">${signedIn.join('')}</ul>
<form method="post" action="/oauth/logout/"><button type="submit" class="button">Sign out</button></form>
<p><a href="/oauth/sessions/">Your sessions</a></p>
${signOutEverywhereButton()}`
    : '<p>You are not signed in.</p>'
  const buttons = links.filter(({ name }) => !Object.hasOwn(identities, name))
    .map(({ name, href }) => `<a class="button" href="${escapeHtml(href)}">Sign in with ${escapeHtml(name)}</a>`).join(' ')
  return renderPage('Gateway', `<h1>Gateway</h1>
${who}
${buttons === '' ? '' : `<p>${buttons}</p>`}`)
}

/** "Sign out everywhere" (/oauth/ and /oauth/sessions/): this session and every other of the same person. */
export function signOutEverywhereButton (): string {
  return '<form method="post" action="/oauth/logout/?everywhere=1"><button type="submit" class="button">Sign out everywhere</button></form>' +
    '<p class="code">Ends your sessions at this gateway on every browser and device. Your provider may still remember you on them: the next visit there signs in again without asking.</p>'
}

/**
 * What a sign-out ended: this browser's session; every session of its person; or, where "sign out
 * everywhere" was asked but this browser's session was already gone (ended, or renamed by a
 * sign-in in another tab a moment before), only what this browser held: whose other sessions to
 * end could not be told, and the page says so rather than claim it.
 */
export type SignedOut = 'here' | 'everywhere' | 'not-everywhere'

/** The page after /oauth/logout/: one "sign in again" link per provider. */
export function signedOutPage (links: ReadonlyArray<{ name: string, href: string }>, ended: SignedOut = 'here'): string {
  const buttons = links.map(({ name, href }) =>
    `<a class="button" href="${escapeHtml(href)}">Sign in again${links.length > 1 ? ` with ${escapeHtml(name)}` : ''}</a>`).join(' ')
  const said = ended === 'everywhere'
    ? `<h1>You are signed out everywhere</h1>
<p>Every session you had at this gateway has ended, on every browser and device. Where your provider offers a sign-out, this browser was sent to it too.</p>
<p>${PROVIDER_REMEMBERS}</p>`
    : ended === 'not-everywhere'
      ? `<h1>Only this browser is signed out</h1>
<p>This browser's session had already ended or changed (a sign-in in another tab) when you asked, so the gateway could not tell whose other sessions to end: none were. To end them, sign in again and choose "Sign out everywhere".</p>`
      : `<h1>You are signed out</h1>
<p>Your session at this gateway has ended. The next visit to a protected page signs you in again: it asks who you are, unless your provider still remembers you (if you stayed signed in there).</p>`
  return renderPage('Signed out', `${said}
${buttons}`)
}

/** What "sign out everywhere" cannot do: the provider's own sign-in on the other devices is the provider's. */
const PROVIDER_REMEMBERS = 'Other browsers are signed out of this gateway, but not of your provider: where the provider still remembers you, ' +
  'the next visit there signs in again without asking. To end that too, sign out at your provider on those devices (or end its sessions in your account there).'

/**
 * Asked when another site sent the browser to /oauth/logout/, or a GET asked to sign out everywhere or
 * to use another account: only the person's own click (a same-origin form POST) ends the session. `next`, `switchTo` ("Use another account") and `everywhere` travel as
 * hidden fields.
 */
export function signOutConfirmPage (next: string | undefined, switchTo?: string, everywhere = false): string {
  const hidden = (next === undefined ? '' : `<input type="hidden" name="next" value="${escapeHtml(next)}">`) +
    (switchTo === undefined ? '' : `<input type="hidden" name="switch" value="${escapeHtml(switchTo)}">`) +
    (everywhere ? '<input type="hidden" name="everywhere" value="1">' : '')
  const [title, question, button] = switchTo !== undefined
    ? ['Use another account?', 'This ends your session at this gateway and signs you in again with the account you choose. Go on only if you meant to.', 'Use another account']
    : everywhere
      ? ['Sign out everywhere?', `This ends every session you have at this gateway, on every device. ${PROVIDER_REMEMBERS} Sign out everywhere only if you meant to.`, 'Sign out everywhere']
      : ['Sign out?', 'Another site sent you here to end your session at this gateway. Sign out only if you meant to.', 'Sign out']
  return renderPage(title, `<h1>${title}</h1>
<p>${question}</p>
<form method="post" action="/oauth/logout/">${hidden}<button type="submit" class="button">${button}</button></form>
<p><a href="${HOME}">Stay signed in</a></p>`)
}

/**
 * A route with several providers, met without a session: the route's name and one sign-in button
 * per provider, each returning to the page the person asked for.
 */
export function chooserPage (route: string, links: ReadonlyArray<{ name: string, href: string }>): string {
  const buttons = links.map(({ name, href }) => `<a class="button" href="${escapeHtml(href)}">Sign in with ${escapeHtml(name)}</a>`).join(' ')
  return renderPage('Sign in', `<h1>Sign in to ${escapeHtml(route)}</h1>
<p>Choose where your account is.</p>
<p>${buttons}</p>`)
}

/**
 * What a sign-in address answers a request the browser made for something a page embeds, or
 * ahead of the person (request-site.ts `embedded`): a link to it, and no flow begun (each begun flow
 * moves the browser's flow cookie on, and images loading one by one down a page dropped a sign-in
 * under way in another tab: an outside tester's finding).
 */
export function signInLinkPage (provider: string, href: string): string {
  return renderPage('Sign in', `<h1>Sign in</h1>
<p><a class="button" href="${escapeHtml(href)}">Sign in with ${escapeHtml(provider)}</a></p>`)
}
