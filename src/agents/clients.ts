// What a registered agent client may be (RFC 7591 metadata, checked before oidc-provider stores
// it): a public client (`token_endpoint_auth_method: none`, PKCE its only proof), whose redirect
// URIs are https, http on a loopback address with any port (RFC 8252 §7.3), or a private-use scheme
// (RFC 8252 §7.1: a native app's own), and whose name, shown on the consent page, is bounded and
// shows all it holds.
// @see https://www.rfc-editor.org/rfc/rfc7591#section-2
// @see https://www.rfc-editor.org/rfc/rfc8252#section-7
import { DEVICE_CODE_GRANT } from './endpoints.js'

/** The longest `client_name` kept: the consent page shows it whole. */
export const CLIENT_NAME_MAX = 100

/**
 * What a `client_name` may not hold: control characters (a line break, a tab), invisible ones
 * (zero-width spaces and joiners, soft hyphens, and every other default-ignorable code point: the
 * Hangul fillers, the combining grapheme joiner, variation selectors), and direction overrides or
 * isolates (U+202E), which hide or reorder what the consent page says around the name:
 * `Cl\u200Baude` or `Claude\u3164Code` passing as `Claude`, an override left open turning the
 * page's words around (outside testers' findings).
 */
const HIDDEN_IN_A_NAME = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}]/u

/**
 * Blank characters but the space (a no-break or ideographic space, the braille blank), and a run of
 * more combining marks on one letter than any script writes (they stack over the rows above).
 */
const BLANK_IN_A_NAME = /(?! )[\p{Zs}\u2800]|\p{M}{4}/u

/**
 * The consent page's own words about whose a name is: a name may not say them, so a client that
 * registered itself cannot claim a host vouches for it (`Claude Code (as described at claude.ai)`).
 * Read in the name's letters only, after NFKC and with the Cyrillic, Greek, Cherokee and Latin
 * letters that look like plain Latin ones (a single-storey ɑ, small capitals, capitals of any of
 * them) read as those: `ａｓ‑described at`, a Cyrillic `а` and `AS DESCRIΒED` with a Greek Beta say
 * it too (re-readings' points).
 */
const PAGE_WORDS = ['as described at', 'gave itself', 'calls itself']
/** Letters that look like plain Latin ones, each read as the Latin letter in the same place of its pair. */
const LOOKALIKES = new Map(([
  ['асеіорѕԁӏхуԛԝһј', 'aceiopsdlxyqwhj'], // Cyrillic
  ['αειοντκρυχϲ', 'aeiovtkpuxc'], // Greek
  // Latin's own (an outside tester's finding: a single-storey ɑ for "a"), and its small capitals, which NFKC keeps.
  ['ıɑɛɡɩʋǀ', 'iaegivl'],
  ['ᴀʙᴄᴅᴇꜰɢʜɪᴊᴋʟᴍɴᴏᴘʀꜱᴛᴜᴠᴡʏᴢ', 'abcdefghijklmnoprstuvwyz'],
  // Capitals, read before the name is lower-cased (a re-reading's finding: Β, В and Т lower-case to β, в, т).
  ['ΑΒΕΖΗΙΚΜΝΟΡΤΥΧ', 'abezhikmnoptyx'], // Greek
  ['АВЕКМНОРСТХУЅІЈԚԜ', 'abekmhopctxysijqw'], // Cyrillic
  ['ᎪᏴᏟᎠᎬᏀᎻᏆᎫᏦᏞᎷᏢᏒᏚᎢᏙᏔᏉᏃ', 'abcdeghijklmprstvwvz'], // Cherokee
] as const).flatMap(([letters, readings]) => [...letters].map((letter, i) => [letter, readings[i]!] as const)))

/** The letters of `name` as the page's words would be read in it. */
function lettersOf (name: string): string {
  const read = (text: string) => text.replace(/./gu, (letter) => LOOKALIKES.get(letter) ?? letter)
  // Looked up before lower-casing (capitals) and after (what lower-casing made); an `l` is read as
  // the `i` of a capital `I`, which it is in sans-serif type ("caIIs itself").
  return read(read(name.normalize('NFKC')).toLowerCase().replace(/[^\p{L}]/gu, '')).replaceAll('l', 'i')
}

/** PAGE_WORDS as lettersOf reads them. */
const PAGE_WORDS_READ = PAGE_WORDS.map(lettersOf)

/**
 * The hosts an http redirect URI may name (RFC 8252 §7.3): the loopback addresses, and `localhost`,
 * which browsers send to loopback themselves. A name under `.localhost` or another 127.x address is
 * refused: outside the browsers that keep them on this machine, a resolver may look such a name up.
 */
const LOOPBACK_REDIRECT_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost'])
/** At most this many redirect URIs per client. */
export const REDIRECT_URIS_MAX = 10

/**
 * Schemes that are not an app's own: they run code, read files, name another kind of resource,
 * start a program of the operating system (Windows' `ms-*`, `search-ms`, `shell`; remote shares),
 * open a browser or another app at the web address that follows them (`microsoft-edge:https://...`,
 * `x-safari-https://...`, `googlechromes://...`, `android-app://<browser>/https/...`): the code
 * would go to that site, by whatever name the consent page showed (an outside tester's finding,
 * and a reviewer's further ones). A list cannot be complete: the consent page also shows where the
 * code goes in full.
 */
const NOT_PRIVATE_USE = new Set(['javascript:', 'data:', 'file:', 'vbscript:', 'blob:', 'about:', 'ftp:', 'ws:', 'wss:', 'mailto:', 'tel:', 'sms:', 'urn:', 'filesystem:', 'chrome:', 'view-source:', 'intent:',
  'search-ms:', 'search:', 'shell:', 'smb:', 'res:', 'jar:', 'mhtml:', 'ssh:', 'telnet:', 'ldap:', 'callto:', 'steam:',
  'microsoft-edge:', 'microsoft-edge-http:', 'microsoft-edge-https:', 'microsoft-edge-holographic:', 'read:', 'x-safari-http:', 'x-safari-https:',
  'googlechrome:', 'googlechromes:', 'googlechrome-x-callback:', 'firefox:', 'firefox-private:', 'opera-http:', 'opera-https:', 'touch-http:', 'touch-https:', 'brave:', 'edge:',
  'ddgquicklink:', 'x-web-search:', 'android-app:', 'ios-app:',
  // From the second outside reading: Firefox Focus/Klar, Yandex, Vivaldi, Samsung Internet, UC and Opera open the address after them.
  'firefox-focus:', 'firefox-klar:', 'focus:', 'yandexbrowser-open-url:', 'vivaldi:', 'samsunginternet:', 'ucbrowser:', 'opera:', 'operaintent:',
  // The schemes a web site may claim in a browser (registerProtocolHandler's safelist; `web+*` below):
  // the code would go to whatever site claimed it.
  'bitcoin:', 'ftps:', 'geo:', 'im:', 'irc:', 'ircs:', 'magnet:', 'matrix:', 'mms:', 'news:', 'nntp:', 'openpgp4fpr:', 'sftp:', 'sip:', 'smsto:', 'webcal:', 'wtai:', 'xmpp:'])

/** A scheme no app may take as its own: listed above, Windows' `ms-*`, or a web site's `web+*`. */
function notPrivateUse (protocol: string): boolean {
  return NOT_PRIVATE_USE.has(protocol) || protocol.startsWith('ms-') || protocol.startsWith('web+')
}

/** Why `value` cannot be a redirect URI of an agent client, or undefined when it can. */
export function redirectUriProblem (value: unknown): string | undefined {
  if (typeof value !== 'string' || value.length > 2000) return 'is not a URI of at most 2000 characters'
  const parsed = URL.parse(value)
  if (parsed === null) return 'is not a URI'
  if (value.includes('#')) return 'must have no fragment'
  if (parsed.username !== '' || parsed.password !== '') return 'must carry no user name or password'
  if (parsed.protocol === 'https:') return parsed.hostname === '' ? 'has no host' : undefined
  if (parsed.protocol === 'http:') {
    return LOOPBACK_REDIRECT_HOSTS.has(parsed.hostname) ? undefined : 'uses http on a host other than 127.0.0.1, [::1] or localhost: use https'
  }
  // A private-use scheme: letters, digits, `+`, `-`, `.`; one that runs code or names other resources is refused.
  if (!/^[a-z][a-z0-9+.-]*:$/.test(parsed.protocol) || notPrivateUse(parsed.protocol)) return `uses the ${parsed.protocol.slice(0, -1)} scheme, which is not an app's own`
  return undefined
}

/** Whether `value` uses a private-use scheme (oidc-provider then treats the client as a native app). */
export function privateUse (value: string): boolean {
  const protocol = URL.parse(value)?.protocol
  return protocol !== undefined && protocol !== 'https:' && protocol !== 'http:'
}

/**
 * A CLI of the device flow only (RFC 8628): it asks for codes at the device authorization endpoint
 * and never receives a redirect, so it registers no redirect URI (and no response type).
 */
export function deviceOnly (metadata: Record<string, unknown>): boolean {
  const types = metadata.grant_types
  const uris = metadata.redirect_uris
  return Array.isArray(types) && types.includes(DEVICE_CODE_GRANT) && !types.includes('authorization_code') && (uris === undefined || (Array.isArray(uris) && uris.length === 0))
}

/** Why this registration cannot be kept, or undefined: the redirect URIs, the client authentication and the name. */
export function registrationProblem (metadata: Record<string, unknown>): { field: 'redirect_uris' | 'other', message: string } | undefined {
  const onlyDevice = deviceOnly(metadata)
  const uris = onlyDevice ? [] : metadata.redirect_uris
  if (!Array.isArray(uris) || (uris.length === 0 && !onlyDevice)) return { field: 'redirect_uris', message: 'redirect_uris must list at least one URI (a CLI of the device flow only registers grant_types without authorization_code, and no redirect URI)' }
  if (uris.length > REDIRECT_URIS_MAX) return { field: 'redirect_uris', message: `redirect_uris may list at most ${REDIRECT_URIS_MAX} URIs` }
  for (const uri of uris) {
    const problem = redirectUriProblem(uri)
    if (problem !== undefined) return { field: 'redirect_uris', message: `redirect URI ${JSON.stringify(String(uri).slice(0, 200))} ${problem}` }
  }
  const method = metadata.token_endpoint_auth_method
  if (method !== undefined && method !== 'none') return { field: 'other', message: 'token_endpoint_auth_method must be none: agent clients are public clients, proven by PKCE' }
  const name = metadata.client_name
  if (name !== undefined && (typeof name !== 'string' || name.length > CLIENT_NAME_MAX)) return { field: 'other', message: `client_name must be text of at most ${CLIENT_NAME_MAX} characters` }
  if (typeof name === 'string' && HIDDEN_IN_A_NAME.test(name)) {
    return { field: 'other', message: 'client_name must hold no control or invisible characters (line breaks, tabs, zero-width spaces or joiners, direction overrides): the consent page shows it as written' }
  }
  if (typeof name === 'string' && BLANK_IN_A_NAME.test(name)) {
    return { field: 'other', message: 'client_name must hold no blank characters but the space, nor marks stacked on one letter: the consent page shows it as written' }
  }
  const letters = typeof name === 'string' ? lettersOf(name) : ''
  if (PAGE_WORDS_READ.some((words) => letters.includes(words))) {
    return { field: 'other', message: 'client_name must not say whose name it is ("as described at", "calls itself"): the consent page says that' }
  }
  return undefined
}

/**
 * Where a client wants the browser back, as the consent page shows it: none for the device flow
 * (the CLI polls for its tokens); a web address (https, or http on loopback) by its host; a
 * private-use URI (an app's own scheme, whose host means nothing to the system) whole but its
 * query, so that no address hides behind its scheme.
 */
export function redirectShown (uri: unknown): string | undefined {
  const redirect = typeof uri === 'string' ? URL.parse(uri) : null
  if (redirect === null) return undefined
  if (redirect.protocol === 'https:' || redirect.protocol === 'http:') return redirect.host
  return `${redirect.protocol}${redirect.host === '' ? '' : `//${redirect.host}`}${redirect.pathname}`.slice(0, 200)
}
