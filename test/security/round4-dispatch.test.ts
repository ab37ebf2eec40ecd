// Readings of a path that routers dispatch to another action's, against routes, `deny` globs,
// `public` globs and `deny` methods. An outside tester's findings:
// - the edge refused only case and trailing-dot spellings of another route's prefix: a public `/`
//   beside a protected `/admin/` on one upstream served `/admin.json` (Rails: /admin),
//   `/index.php/admin/users` (Laravel, Symfony: /admin/users) and `/?/admin/users` (CodeIgniter)
//   anonymously, and a public `/site/` did the same for a protected `/site/admin/`;
// - a `deny` glob missed Rails formats other than 1-10 letters or digits (`admin.a-b`), FastCGI,
//   mod_wsgi and ISAPI scripts' PATH_INFO, and Drupal's `?q=` and Yii's `?r=` routes;
// - a `public` glob `GET /pub/` made `/pub/?/admin/users` public (CodeIgniter's admin);
// - a `deny` on PUT let PATCH through (Rails routes both to `update`).
// The upstream's record says whether anything reached it.
import { gzipSync } from 'node:zlib'
import { describe, expect } from 'vitest'
import { signIn, type SignedIn } from '../helpers/browser.js'
import type { TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'
import type { Upstream } from '../helpers/upstream.js'

let gateway: TestGateway
let up: Upstream
let alice: SignedIn

it.beforeAll(async ({ startStack, upstream }) => {
  up = upstream
  gateway = await startStack({
    routes: [
      { path: '/admin/', upstream: upstream.url, provider: 'demo' },
      { path: '/site/admin/', upstream: upstream.url, provider: 'demo' },
      { path: '/site/', upstream: upstream.url, auth: 'none' },
      { path: '/app/', upstream: upstream.url, provider: 'demo', deny: [{ paths: ['/app/admin/*', '/app/users/*/edit', '/app/xmlrpc.php', '/app/uploads/*.php', '/app/tool.phar', '/app/elmah.axd'] }, { methods: ['PUT', 'DELETE'], paths: ['/app/users/*'] }] },
      { path: '/pub/', upstream: upstream.url, provider: 'demo', public: ['GET /pub/', 'GET /pub/index.php', 'GET /pub/*.css'] },
      { path: '/Wiki/', upstream: upstream.url, provider: 'demo', public: ['GET /Wiki/*'] },
      { path: '/café/', upstream: upstream.url, provider: 'demo', public: ['GET /caf%C3%A9/*'] },
      { path: '/Reports/', upstream: upstream.url, provider: 'demo', allow: [{ users: ['alice'], paths: ['/Reports/*'] }] },
      { path: '/sites/', upstream: upstream.url, provider: 'demo', public: ['GET /sites/*/files/*'] },
      { path: '/docs/', upstream: upstream.url, provider: 'demo', public: ['GET /docs/install.php/*'] },
      { path: '/yii/', upstream: upstream.url, provider: 'demo', deny: [{ paths: ['/yii/admin/*'] }] },
      // A deny on paths that holds for mallory alone.
      { path: '/yiu/', upstream: upstream.url, provider: 'demo', deny: [{ users: ['mallory'], paths: ['/yiu/admin/*'] }] },
      { path: '/', upstream: upstream.url, auth: 'none' },
    ],
  })
  alice = await signIn(`${gateway.url}/app/x`, 'alice')
})

/** `method url` (signed in as alice, or anonymous): the status and whether anything reached the upstream. */
async function send (url: string, { method = 'GET', signedIn = false, body }: { method?: string, signedIn?: boolean, body?: string } = {}): Promise<{ status: number, reached: boolean }> {
  const before = up.seen.length
  const headers: Record<string, string> = { accept: 'application/json', ...(signedIn ? { cookie: alice.cookie } : {}), ...(body === undefined ? {} : { 'content-type': 'application/x-www-form-urlencoded' }) }
  const response = await fetch(`${gateway.url}${url}`, { method, headers, body, redirect: 'manual' })
  await response.arrayBuffer()
  return { status: response.status, reached: up.seen.length > before }
}

describe('a path that routers read as under another route\'s prefix', () => {
  it.each([
    ['/admin.json', 'Rails: /admin(.:format)'],
    ['/admin.json/', 'Rails, a trailing / and a format'],
    ['/index.php/admin/users', 'PATH_INFO: Laravel, Symfony'],
    ['/index.php?/admin/users', 'CodeIgniter: the route from the query'],
    ['/?/admin/users', 'CodeIgniter, the directory form'],
    ['/site/admin.json', 'Rails, a nested route'],
    ['/site/Admin.json', 'Rails, a nested route in another case'],
    ['/site/index.php/admin/users', 'PATH_INFO under /site/'],
    ['/site/index.php?/admin/users', 'CodeIgniter under /site/'],
    ['/index.phar/admin/users', 'a web phar'],
    ['/index.cfm/admin/users', 'ColdBox, FW/1'],
  ])('anonymous %s (%s): 400 at the edge, nothing upstream', async (url) => {
    expect(await send(url)).toEqual({ status: 400, reached: false })
  })

  // A re-reading's findings: a `?/` path the edge could not tell passed, and a script before `?/` was kept.
  it.each(['/?/../admin/users', '/?//admin/users', '/?/admin//users', '/index.php?/../admin/users', '/index.php/?/admin/users'])('anonymous %s (CodeIgniter drops dot and empty segments, and its script): 400, nothing upstream', async (url) => {
    expect(await send(url)).toEqual({ status: 400, reached: false })
  })

  it.each(['/about.html', '/index.php/about', '/?/about', '/?q=admin', '/site/page.json', '/site/?/page'])('held: %s, read under no protected route, passes', async (url) => {
    expect(await send(url)).toEqual({ status: 200, reached: true })
  })
})

describe('deny /app/admin/* and /app/users/*/edit: readings real routers make', () => {
  it.each([
    ['/app/admin.a-b', 'Rails: any format but /, . and ?'],
    ['/app/admin.a_b', 'Rails, with _'],
    ['/app/admin.abcdefghijk', 'Rails, 11 characters'],
    ['/app/users/1/edit.x-y', 'Rails users#edit'],
    ['/app/mysite.fcgi/admin/users', 'Django behind FastCGI'],
    ['/app/site.wsgi/admin/users', 'mod_wsgi'],
    ['/app/isapi.dll/admin/users', 'an ISAPI extension'],
    ['/app/?q=admin/users', 'Drupal 7'],
    ['/app/index.php?q=admin/users', 'Drupal 7, index.php'],
    ['/app/index.php?r=admin/users', 'Yii'],
    ['/app/index.php?q=x&q=admin/users', 'Drupal 7, the last of two (PHP reads the last)'],
    // A re-reading's findings: the name in another spelling PHP reads as q or r.
    ['/app/?%71=admin/users', 'q encoded'],
    ['/app/index.php?%72=admin/users', 'r encoded'],
    ['/app/?%71=x&%71=admin/users', 'the last of two encoded'],
    ['/app/?+q=admin/users', 'a space PHP drops before the name'],
    ['/app/?%20q=admin/users', 'an encoded space before the name'],
    ['/app/?q=admin%2Fusers', 'the value decoded, as Drupal reads it'],
    // An attacker's findings: names PHP reads as a C string, byte by byte, and its max_input_vars.
    ['/app/?q%00=admin/users', 'a NUL after the name (PHP cuts the name there)'],
    ['/app/index.php?q%00x=admin/users', 'a NUL and more after the name'],
    ['/app/?r%00=admin/users', 'Yii\'s r the same way'],
    ['/app/?q%00%FF=admin/users', 'a NUL and a byte decodeURIComponent refuses'],
    ['/app/?q=pub&q%00=admin/users', 'the last copy PHP reads is the NUL one'],
    ['/app/?q=admin/users/%FF', 'a value byte decodeURIComponent refuses (Drupal routes to the parent path)'],
    ['/app/?q=admin/users/x%00', 'a NUL in the value'],
    // An outside reader's finding: a PHP whose arg_separator.input is ";&" splits at `;` too.
    ['/app/?x=1;q=admin/users', 'PHP splitting at ; (arg_separator.input)'],
    ['/app/index.php?x;r=admin/users', 'Yii\'s r after a ;'],
    ['/app/?q=admin/users;q=pub', 'the first of two copies split at ; (PHP splitting at & alone reads it whole: a path under admin/users)'],
    // A re-reading's findings: Drupal 7 reads q first on every path its front controller serves,
    // under wherever it is installed.
    ['/app/node?q=admin/users', 'Drupal 7, q on a path that is no directory'],
    ['/app/user/login?q=admin/users', 'Drupal 7, installed at /app/, q on a deeper path'],
    ['/app/search?q=admin/users', 'Drupal 7, a search page\'s q naming the denied path'],
    ['/app/?q=admin/100%25', 'a value the edge would not take as a path, under the denied one'],
    // An outside tester's findings: a script with more segments after it runs that script (Apache's
    // mod_php, nginx's usual php-fpm split, IIS, CGI), which a deny naming the script missed.
    ['/app/xmlrpc.php/x', 'Apache mod_php: xmlrpc.php, PATH_INFO /x'],
    ['/app/XMLRPC.PHP/x', 'the same in upper case (IIS, PHP on Windows)'],
    ['/app/xmlrpc.php./x', 'with a trailing dot (Windows)'],
    ['/app/uploads/shell.php/x.jpg', 'a deny on *.php in an uploads directory'],
    ['/app/admin/config.aspx/x', 'IIS: config.aspx, PathInfo /x'],
    // A re-reader's findings: suffixes stock setups run with PATH_INFO too.
    ['/app/tool.phar/x', 'Debian\'s mod_php runs .phar'],
    ['/app/index.phar/admin/users', 'a web phar routes its PATH_INFO'],
    ['/app/index.cfm/admin/users', 'ColdBox and FW/1 on Lucee or ColdFusion'],
    ['/app/index.php5/admin/users', 'an older PHP suffix'],
    ['/app/elmah.axd/download', 'ELMAH\'s handler reads its PATH_INFO'],
    ['/app/ELMAH.AXD/detail?id=1', 'the same in upper case'],
  ])('%s (%s) is 403, nothing upstream', async (url) => {
    expect(await send(url, { signedIn: true })).toEqual({ status: 403, reached: false })
  })

  it('/app/?q=admin/users&x&...(998 more)&q=pub (max_input_vars: PHP never reads the second q, the 1001st pair) is 403, nothing upstream', async () => {
    expect(await send(`/app/?q=admin/users&${Array.from({ length: 999 }, () => 'x').join('&')}&q=pub`, { signedIn: true })).toEqual({ status: 403, reached: false })
  })

  // A PHP whose max_input_vars is set lower reads the last copy among fewer pairs: every copy is judged.
  it('/app/?q=admin/users&x&...(147 more)&q=pub (max_input_vars 100 reads the first q, 1,000 the second) is 403, nothing upstream', async () => {
    expect(await send(`/app/?q=admin/users&${Array.from({ length: 148 }, () => 'x').join('&')}&q=pub`, { signedIn: true })).toEqual({ status: 403, reached: false })
  })

  it('a query with more than 8 different values of q and r is not told: 403, nothing upstream; the same value many times is read once and passes', async () => {
    expect(await send(`/app/?${Array.from({ length: 9 }, (_, i) => `q=page${i}`).join('&')}`, { signedIn: true })).toEqual({ status: 403, reached: false })
    expect(await send(`/app/?${Array.from({ length: 8 }, (_, i) => `q=page${i}`).join('&')}`, { signedIn: true })).toEqual({ status: 200, reached: true })
    expect(await send(`/app/?${Array.from({ length: 500 }, () => 'q=page').join('&')}`, { signedIn: true })).toEqual({ status: 200, reached: true })
  })

  // A re-reader's measure: a long path of many directories with a route parameter cost 10 ms a
  // request to read under each directory; past a budget of 32 KiB of readings it is not told.
  it('a 7 KiB path of 31 directories with ?q= is not told: 403, nothing upstream', async () => {
    expect(await send(`/app/${Array.from({ length: 31 }, () => 'a'.repeat(230)).join('/')}?q=pub`, { signedIn: true })).toEqual({ status: 403, reached: false })
  })

  // A re-reading's finding: a search box's q that is no path the edge would take (an encoded %, ;,
  // \\, ...) was refused by every deny glob for a while.
  it.each(['/app/?q=100%25', '/app/?q=100%25+cotton', '/app/index.php?q=50%25+off', '/app/?q=a%3Bb', '/app/?q=tom;jerry', '/app/?q=pub;x=1', '/app/?q=C%3A%5CUsers', '/app/?q=pub&q=search',
    '/app/?q=...', '/app/?q=...and+more', '/app/?q=line%0Abreak', '/app/?q=tab%09separated'])('held: the search %s passes', async (url) => {
    expect(await send(url, { signedIn: true })).toEqual({ status: 200, reached: true })
  })

  // A re-reading's finding: searches whose q could not be made a path were refused by every deny glob.
  it.each(['/app/administrator', '/app/users/1', '/app/?q=TCP%2FIP', '/app/?q=https%3A%2F%2Fexample.com%2F',
    '/app/?q=https://example.com/', '/app/search/?q=a//b', '/app/?q=..', '/app/index.php?r=..%2F',
    '/app/index.php/about', '/app/xmlrpc.phpx/x'])('held: %s passes', async (url) => {
    expect(await send(url, { signedIn: true })).toEqual({ status: 200, reached: true })
  })
})

describe('deny methods [PUT, DELETE] on /app/users/*', () => {
  it('PATCH (Rails: the same update as PUT) is 403 too, nothing upstream', async () => {
    expect(await send('/app/users/1', { method: 'PATCH', signedIn: true, body: 'user[admin]=true' })).toEqual({ status: 403, reached: false })
  })
})

describe('public GET /pub/, GET /pub/index.php and GET /pub/*.css on a protected /pub/', () => {
  it.each(['/pub/?/admin/users', '/pub/index.php?/admin/users'])('anonymous %s (CodeIgniter: /admin/users) is not public: 401, nothing upstream', async (url) => {
    expect(await send(url)).toEqual({ status: 401, reached: false })
  })

  // An outside tester's finding: the glob matched, and Apache, php-fpm and IIS run admin.php.
  it.each(['/pub/admin.php/x.css', '/pub/ADMIN.PHP/x.css', '/pub/admin.php./x.css', '/pub/app.aspx/site.css', '/pub/admin.phar/x.css', '/pub/admin.cfm/x.css'])('anonymous %s (runs the script) is not public: 401, nothing upstream', async (url) => {
    expect(await send(url)).toEqual({ status: 401, reached: false })
  })

  it.each(['/pub/', '/pub/?page=2', '/pub/index.php', '/pub/site.css', '/pub/?q=admin', '/pub/index.php/site.css'])('held: anonymous %s is public', async (url) => {
    expect(await send(url)).toEqual({ status: 200, reached: true })
  })
})

// A re-reader's finding: the script a path runs was judged folded, while public and allow globs
// compare the path as written, so a directory with a capital or a non-ASCII letter lost its scripts'
// PATH_INFO pages.
describe('public and allow globs judge the script a path runs as the path is written', () => {
  // A re-reader's findings: a directory named like a script (a Polish domain in a Drupal
  // multisite; a glob naming the directory) lost its public files.
  it.each(['/Wiki/index.php/Main_Page', '/caf%C3%A9/index.php/menu', '/Wiki/index.php', '/Wiki/Main_Page',
    '/sites/example.pl/files/logo.png', '/sites/example.com/files/logo.png', '/docs/install.php/guide.html'])('anonymous %s is public', async (url) => {
    expect(await send(url)).toEqual({ status: 200, reached: true })
  })

  it('alice reaches /Reports/report.aspx/q1 (IIS PathInfo; the script is allowed)', async () => {
    expect(await send('/Reports/report.aspx/q1', { signedIn: true })).toEqual({ status: 200, reached: true })
  })
})

// Yii 1 reads its route from `r` in the query, and from a POST form when the query has none
// (CUrlManager::parseUrl): a form posted to its front controller with `r=admin/users` in the body
// ran admin/users where a deny held on `?r=admin/users` (a finding carried from an earlier reading).
// The route denies paths and no methods: before, such a route read no body at all.
describe('deny /yii/admin/*: the route a form POSTed to a front controller names (Yii\'s r)', () => {
  /** A signed-in POST of `body` (urlencoded unless given a type) to `url`: status, and what the upstream got. */
  async function post (url: string, body: string | FormData | Buffer, headers: Record<string, string> = {}): Promise<{ status: number, reached: boolean }> {
    const before = up.seen.length
    const type: Record<string, string> = typeof body === 'string' ? { 'content-type': 'application/x-www-form-urlencoded' } : {}
    const response = await fetch(`${gateway.url}${url}`, { method: 'POST', headers: { accept: 'application/json', cookie: alice.cookie, ...type, ...headers }, body })
    await response.arrayBuffer()
    return { status: response.status, reached: up.seen.length > before }
  }
  const multipart = (fields: Record<string, string>): FormData => {
    const form = new FormData()
    for (const [name, value] of Object.entries(fields)) form.append(name, value)
    return form
  }

  it.each([
    ['/yii/index.php', 'r=admin/users', 'the front controller'],
    ['/yii/', 'r=admin/users', 'its directory'],
    ['/yii/index.php/site', 'r=admin/users', 'a path the script runs'],
    ['/yii/INDEX.PHP', 'r=admin/users', 'the script in upper case'],
    ['/yii/index.php', 'r=admin%2Fusers', 'the value encoded'],
    ['/yii/index.php', '%72=admin/users', 'the name encoded, as PHP decodes it'],
    ['/yii/index.php', 'r%00x=admin/users', 'the name cut at a NUL'],
    ['/yii/index.php', 'title=x&r=site/index&r=admin/users', 'the last of two copies (PHP reads the last)'],
    ['/yii/index.php?page=2', 'r=admin/users', 'a query without r'],
    ['/yii/index.php', Array.from({ length: 9 }, (_, i) => `r=page${i}`).join('&'), 'more than 8 different values: not told'],
  ])('POST %s with %s (%s) is 403, nothing upstream', async (url, body) => {
    expect(await post(url, body)).toEqual({ status: 403, reached: false })
  })

  it('a multipart form whose part is named r: 403, nothing upstream', async () => {
    expect(await post('/yii/index.php', multipart({ title: 'x', r: 'admin/users' }))).toEqual({ status: 403, reached: false })
  })

  // An outside tester's findings, both checked against PHP 8.2: PHP cuts the Content-Type at `,` or
  // a space before it fills $_POST, and joins a part's header line that has no colon to the line before.
  it.each([
    'application/x-www-form-urlencoded,text/plain',
    'application/x-www-form-urlencoded text/plain',
    'application/x-www-form-urlencoded,',
  ])('a Content-Type PHP reads as a form (%s): 403, nothing upstream', async (type) => {
    expect(await post('/yii/index.php', 'r=admin/users', { 'content-type': type })).toEqual({ status: 403, reached: false })
  })

  it.each([
    ['CRLF', '--XyZ\r\nContent-Disposition: form-data; na\r\nme="r"\r\n\r\nadmin/users\r\n--XyZ--\r\n'],
    ['LF', '--XyZ\nContent-Disposition: form-data; na\nme="r"\n\nadmin/users\n--XyZ--\n'],
  ])('a part named r over two header lines, as PHP joins them (%s): 403, nothing upstream', async (_ends, body) => {
    expect(await post('/yii/index.php', body, { 'content-type': 'multipart/form-data; boundary=XyZ' })).toEqual({ status: 403, reached: false })
  })

  it('a form with a Content-Encoding to the front controller is refused unread (415): the application could inflate it', async () => {
    expect(await post('/yii/index.php', gzipSync('r=admin/users'), { 'content-type': 'application/x-www-form-urlencoded', 'content-encoding': 'gzip' })).toEqual({ status: 415, reached: false })
  })

  it.each([
    ['/yii/index.php', 'r=site/login', 'a route not denied'],
    ['/yii/index.php', 'title=admin/users', 'no r'],
    ['/yii/upload', 'r=admin/users', 'a path no front controller serves: the body streams on unread'],
  ])('held: POST %s with %s (%s) passes', async (url, body) => {
    expect(await post(url, body)).toEqual({ status: 200, reached: true })
  })

  // Every copy of r is judged, so a form of many fields is read whatever PHP's max_input_vars (a re-reader's finding: it was a 403).
  it('held: a form of 1,001 fields and no r passes; one whose last field is r=admin/users does not', async () => {
    const fields = Array.from({ length: 1000 }, (_, i) => `f${i}=x`).join('&')
    expect(await post('/yii/index.php', `${fields}&f1000=x`)).toEqual({ status: 200, reached: true })
    expect(await post('/yii/index.php', `${fields}&r=admin/users`)).toEqual({ status: 403, reached: false })
  })

  // A re-reader's findings: bodies PHP fills no $_POST from were read whole (and refused over the
  // bound), an untold form was refused by a deny whose other conditions did not hold, and a charset
  // PHP does not decode was refused.
  it.each([
    ['no Content-Type', {}],
    ['multipart/related', { 'content-type': 'multipart/related; boundary=x' }],
  ])('held: a 2 MiB POST with %s to a script streams on unread', async (_type, headers) => {
    expect(await post('/yii/upload.php', Buffer.alloc(2 * 1024 * 1024, 97), headers)).toEqual({ status: 200, reached: true })
  })

  // Where PHP ends a part's header block and the gateway's own scan did not (an outside tester's
  // findings, checked against PHP 8.2): a line that starts with a NUL, a header line as long as PHP's
  // 5,120-byte line buffer (its `\r\n` is then an empty line), and a block PHP reads on past a
  // boundary (it looks for none among headers). Each for Yii's r, and for a _method on /app/.
  const head = (field: string): string => `Content-Disposition: form-data; name="${field}"`
  const longHead = (field: string): string => `${head(field)}; x="${'p'.repeat(5120 - head(field).length - 6)}"`
  it.each([
    ['a line that starts with a NUL', (field: string) => `--XyZ\r\n${head(field)}\r\n\0\r\n`],
    ['a header line of 5,120 bytes', (field: string) => `--XyZ\r\n${longHead(field)}\r\n`],
    ['a header block across a boundary', (field: string) => `--XyZ\r\n${head(field)}; x="\r\n--XyZ\r\n\r\n`],
    // A third reading's findings: PHP reads a header line as a C string (a `:` after a NUL is none, and
    // the line goes on the one before, cut there), and looks for the next boundary in a part it reads
    // no value of (no Content-Disposition) line by line, where a 5,120-byte run is a line.
    ['a continuation line with a `:` after a NUL', (field: string) => `--XyZ\r\nContent-Disposition: form-data; na\r\nme="${field}"\0:x\r\n\r\n`],
    ['a header line cut at a NUL, then continued', (field: string) => `--XyZ\r\nContent-Disposition: form-data; n\0junk\r\name="${field}"\r\n\r\n`],
    ['a boundary line after 5,120 bytes of a part with no Content-Disposition', (field: string) => `--XyZ\r\nX-A: 1\r\n\r\n${'f'.repeat(5120)}--XyZ\r\n${longHead(field)}\r\n`],
  ])('a part PHP reads after %s: r=admin/users and _method=DELETE are 403, nothing upstream', async (_what, block) => {
    const type = { 'content-type': 'multipart/form-data; boundary=XyZ' }
    expect(longHead('r').length).toBe(5120)
    expect(await post('/yii/index.php', Buffer.from(`${block('r')}admin/users\r\n--XyZ--\r\n`, 'latin1'), type)).toEqual({ status: 403, reached: false })
    expect(await post('/app/users/1', Buffer.from(`${block('_method')}DELETE\r\n--XyZ--\r\n`, 'latin1'), type)).toEqual({ status: 403, reached: false })
  })

  // Yii reads its request method from the form's _method and its route from its r: judged together (a re-reader's finding).
  it.each([
    ['/app/index.php', 'r=users/5&_method=DELETE', 'both in the form'],
    ['/app/index.php?_method=DELETE', 'r=users/5', 'the method in the query, the route in the form'],
  ])('POST %s with %s (%s), on a route denying DELETE on /app/users/*: 403, nothing upstream', async (url, body) => {
    expect(await post(url, body)).toEqual({ status: 403, reached: false })
  })

  it('held: a DELETE of a route the deny does not name passes', async () => {
    expect(await post('/app/index.php', 'r=posts/5&_method=DELETE')).toEqual({ status: 200, reached: true })
  })

  it('a form PHP reads over methodOverrideMaxBody to the front controller is refused unread (413), saying what it read for', async () => {
    const response = await fetch(`${gateway.url}/yii/`, { method: 'POST', headers: { accept: 'application/json', cookie: alice.cookie }, body: multipart({ r: 'site/login', file: 'x'.repeat(2 * 1024 * 1024) }) })
    expect(response.status).toBe(413)
    expect(await response.text()).toContain('judge the route its r field names')
  })

  it('held: more r values than can be told pass where the deny\'s other conditions do not hold, as the same query does', async () => {
    const values = Array.from({ length: 9 }, (_, i) => `r=page${i}`).join('&')
    expect(await send(`/yiu/index.php?${values}`, { signedIn: true })).toEqual({ status: 200, reached: true })
    expect(await post('/yiu/index.php', values)).toEqual({ status: 200, reached: true })
  })

  it('held: a charset PHP does not decode is read as the bytes PHP reads', async () => {
    expect(await post('/yii/index.php', 'r=site/login', { 'content-type': 'application/x-www-form-urlencoded; charset=windows-1252' })).toEqual({ status: 200, reached: true })
    expect(await post('/yii/index.php', 'r=admin/users', { 'content-type': 'application/x-www-form-urlencoded; charset=windows-1252' })).toEqual({ status: 403, reached: false })
  })

  it('held: a JSON body (PHP fills no $_POST from it) and a multipart form naming an allowed route pass', async () => {
    expect(await post('/yii/index.php', JSON.stringify({ r: 'admin/users' }), { 'content-type': 'application/json' })).toEqual({ status: 200, reached: true })
    expect(await post('/yii/index.php', multipart({ r: 'site/login', file: 'x'.repeat(10_000) }))).toEqual({ status: 200, reached: true })
  })

  it('held: the very bytes read go upstream', async () => {
    const body = `r=site/login&text=${'a'.repeat(70_000)}`
    const response = await fetch(`${gateway.url}/yii/x.php/count`, { method: 'POST', headers: { cookie: alice.cookie, 'content-type': 'application/x-www-form-urlencoded' }, body })
    expect(await response.json()).toEqual({ bytes: body.length })
  })
})
