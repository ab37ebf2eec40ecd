// The pages of the agents' authorization server (src/routes/agents.ts): the consent page, a message
// page, and the device flow's (RFC 8628 §3.3: enter the code, confirm it, done). The same look as
// the gateway's other pages (pages.ts); every value escaped. A client's name is the client's own
// word (anyone may register one), so the pages say whose it is.
import { agentDevicePage, agentInteractionUrl } from '../oauth/urls.js'
import { escapeHtml, renderPage } from './pages.js'

/** What the consent page shows of an authorization. */
export interface ConsentView {
  /** The interaction's id (the form posts back to it). */
  readonly uid: string
  readonly clientName: string
  /** The host whose metadata document names the client; none for a client that registered itself. */
  readonly clientSite: string | undefined
  /** Where the browser goes back to; none in the device flow. */
  readonly redirectHost: string | undefined
  readonly routePath: string
}

export function messagePage (title: string, text: string): string {
  return renderPage(title, `<h1>${escapeHtml(title)}</h1>\n<p>${escapeHtml(text)}</p>`)
}

/**
 * The client as the consent page's first sentence names it: whose word the name is comes before
 * it, so nothing in a name can read as the page's own words after it.
 */
function whose (view: ConsentView): string {
  const name = `<strong><bdi>${escapeHtml(view.clientName)}</bdi></strong>`
  return view.clientSite === undefined ? `A client that calls itself ${name}` : `${name}, as described at <code>${escapeHtml(view.clientSite)}</code>,`
}

/** The consent page: which client, where it sends the browser back, which route, as whom; Allow or Deny. */
export function consentPage (view: ConsentView, person: string, csrf: string): string {
  const title = 'Allow an agent?'
  const back = view.redirectHost === undefined
    ? '<dt>Signs in</dt><dd>with the code you entered (a CLI or device)</dd>'
    : `<dt>Sends you back to</dt><dd><code>${escapeHtml(view.redirectHost)}</code></dd>`
  const warning = view.redirectHost === undefined ? ' If someone else gave you the code, deny: they would get your access.' : ''
  return renderPage(title, `<h1>${escapeHtml(title)}</h1>
<p>${whose(view)} asks to use <code>${escapeHtml(view.routePath)}</code> as <strong><bdi>${escapeHtml(person)}</bdi></strong>.</p>
<dl class="seen"><dt>Named by</dt><dd>${view.clientSite === undefined ? 'itself: anyone may register a client under any name' : `<code>${escapeHtml(view.clientSite)}</code>, where its description is`}</dd>${back}<dt>Application</dt><dd><code>${escapeHtml(view.routePath)}</code></dd><dt>As</dt><dd>${escapeHtml(person)}</dd></dl>
<p>It can then call this application as you until you sign out everywhere or end it on <a href="/oauth/sessions/">your sessions</a>. Allow it only if you started this from that client.${warning}</p>
<form method="post" action="${escapeHtml(agentInteractionUrl(view.uid))}">
<input type="hidden" name="csrf" value="${escapeHtml(csrf)}">
<button class="button" type="submit" name="decision" value="allow">Allow</button>
<button class="button" type="submit" name="decision" value="deny" style="background:#777">Deny</button>
</form>`)
}

/**
 * The device flow's pages: each gets oidc-provider's form (its CSRF field) to show. The code entry
 * gets none when its form could not be sent (the browser holds no live session of the server's):
 * it then links to itself, opened again.
 */
export const DEVICE_PAGES = {
  input: (form: string | undefined, problem: string | undefined): string => renderPage('Enter the code from your CLI', `<h1>Enter the code from your CLI</h1>
${problem === undefined ? '<p>Your CLI or device shows a code of 8 letters, such as <code>BDFH-JKLM</code>. Enter it here to sign it in.</p>' : `<p class="problem"><strong>${escapeHtml(problem)}</strong></p>`}
${form === undefined
? `<p><a class="button" href="${agentDevicePage}">Open the device page again</a></p>`
: `${form}
<button class="button" type="submit" form="op.deviceInputForm">Continue</button>`}`),
  confirm: (form: string, name: string, userCode: string, routePath: string | undefined): string => renderPage('Is this your code?', `<h1>Is this your code?</h1>
<p>A client that calls itself <strong><bdi>${escapeHtml(name)}</bdi></strong> asks to sign in${routePath === undefined ? '' : ` to <code>${escapeHtml(routePath)}</code>`} with the code</p>
<p class="user-code"><code style="font-size:1.6rem;letter-spacing:.1em">${escapeHtml(userCode)}</code></p>
${routePath === undefined ? '' : `<dl class="seen"><dt>Application</dt><dd><code>${escapeHtml(routePath)}</code></dd></dl>\n`}
<p>Go on only if you started this yourself and your CLI shows this same code. If someone gave you this code or this link, stop: they would get your access.</p>
${form}
<button class="button" type="submit" form="op.deviceConfirmForm">Continue</button>
<button class="button" type="submit" form="op.deviceConfirmForm" name="abort" value="yes" style="background:#777">Stop</button>`),
  done: (name: string): string => renderPage('Your CLI is signed in', `<h1>Your CLI is signed in</h1>
<p><strong><bdi>${escapeHtml(name)}</bdi></strong> can now use what you allowed. You can close this page, and end its access any time on <a href="/oauth/sessions/">your sessions</a>.</p>`),
}
