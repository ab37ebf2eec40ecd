// A `paths` glob that no request can meet is a problem at its key path, in
// `allow`, `deny` and `public` rules of a route and in forwardAuth.hosts, with the spelling the edge
// gives such a path (src/config/canonical.ts) to write instead: non-ASCII, lower-case `%xx`, an
// encoded unreserved byte, a character the edge encodes. One the edge refuses outright says so. The
// same problems from `--check` (it and start-up read the file through the one parseConfig).
import { execFile } from 'node:child_process'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { configProblemList } from '../helpers/config.js'
import { TEST_SECRET } from '../helpers/gateway.js'

const PROVIDER = { clientId: 'c', clientSecret: 's', authorizeUrl: 'https://op.example/a', tokenUrl: 'https://op.example/t', scope: 'read' }

function yamlOf (route: Record<string, unknown>, forwardAuth?: Record<string, unknown>): string {
  return stringify({
    session: { secret: TEST_SECRET },
    providers: { demo: PROVIDER },
    routes: [{ path: '/app/', upstream: 'http://127.0.0.1:9100', provider: 'demo', ...route }],
    // The proxy in front, which forwardAuth.hosts needs to be trusted.
    ...(forwardAuth ? { forwardAuth, server: { trustProxy: ['10.0.0.5'] } } : {}),
  })
}

const spelt = (canonical: string, given: string) => `never matches a request: the edge spells such a path "${canonical}" (write that), got ${JSON.stringify(given)}`
const refused = (reason: string, given: string) => `never matches a request: the edge refuses such a path (${reason}), got ${JSON.stringify(given)}`

/** Hostile or careless globs: what each must say. */
const GLOBS: Array<[string, string, string]> = [
  ['a non-ASCII letter', '/app/café/*', spelt('/app/caf%C3%A9/*', '/app/café/*')],
  ['lower-case percent-encoding', '/app/caf%c3%a9/*', spelt('/app/caf%C3%A9/*', '/app/caf%c3%a9/*')],
  ['an encoded unreserved letter', '/app/%61dmin/*', spelt('/app/admin/*', '/app/%61dmin/*')],
  ['an encoded dash and tilde', '/app/%7Euser%2D1', spelt('/app/~user-1', '/app/%7Euser%2D1')],
  ['an encoded colon (the edge decodes it)', '/wiki/Special%3A*', spelt('/wiki/Special:*', '/wiki/Special%3A*')],
  ['an encoded at sign and dollar', '/app/%40me/%24batch', spelt('/app/@me/$batch', '/app/%40me/%24batch')],
  ['a brace the edge encodes', '/app/{id}/*', spelt('/app/%7Bid%7D/*', '/app/{id}/*')],
  ['a double quote', '/app/"x"', spelt('/app/%22x%22', '/app/"x"')],
  ['angle brackets and a pipe', '/app/<a|b>', spelt('/app/%3Ca%7Cb%3E', '/app/<a|b>')],
  ['a backtick and a caret', '/app/`^`', spelt('/app/%60%5E%60', '/app/`^`')],
  ['an emoji', '/app/🔒/*', spelt('/app/%F0%9F%94%92/*', '/app/🔒/*')],
  ['an encoded slash', '/app/a%2Fb', refused('the path has an encoded / or \\', '/app/a%2Fb')],
  ['a semicolon', '/app/a;b', refused('the path has a ; (some servers drop what follows it in a segment)', '/app/a;b')],
  ['invalid percent-encoding', '/app/%zz', refused('the path has an invalid percent-encoding', '/app/%zz')],
  ['an encoded percent', '/app/%25', refused('the path has an encoded % (double encoding)', '/app/%25')],
  ['a segment ending in ..', '/app/x../*', refused('the path has a segment that begins or ends with ..', '/app/x../*')],
  ['bytes that are not UTF-8', '/app/%C3%28', refused('the path has an encoding that is not UTF-8', '/app/%C3%28')],
]

describe('a paths glob no request can meet', () => {
  it.each(GLOBS)('in deny: %s', (_what, glob, message) => {
    expect(configProblemList(yamlOf({ deny: [{ paths: [glob] }] })).map(({ path, message }) => ({ path, message })))
      .toEqual([{ path: 'routes[0].deny[0].paths[0]', message }])
  })

  it.each(GLOBS)('in allow: %s', (_what, glob, message) => {
    expect(configProblemList(yamlOf({ allow: { groups: ['staff'], paths: ['/app/ok/*', glob] } })).map(({ path, message }) => ({ path, message })))
      .toEqual([{ path: 'routes[0].allow.paths[1]', message }])
  })

  it.each(GLOBS)('in public: %s', (_what, glob, message) => {
    expect(configProblemList(yamlOf({ public: ['GET /app/static/*', `GET ${glob}`] })).map(({ path, message }) => ({ path, message })))
      .toEqual([{ path: 'routes[0].public[1]', message }])
  })

  it.each(GLOBS)('in forwardAuth.hosts: %s', (_what, glob, message) => {
    const given = glob.replace('/app', '')
    const expected = message.replaceAll('"/app', '"')
    expect(configProblemList(yamlOf({}, { hosts: { 'wiki.example.com': { deny: [{ paths: [given] }] } } })).map(({ path, message }) => ({ path, message })))
      .toEqual([{ path: 'forwardAuth.hosts.wiki.example.com.deny[0].paths[0]', message: expected }])
  })

  it.each(['/app/admin/*', '/app/Admin/*', '/app/caf%C3%A9/*', '/app/%7Bid%7D', '/app/~user-1', '/app/a:b@c!$&\'()+,=', '*'])('a glob spelled as the edge spells paths is fine: %s', (glob) => {
    expect(configProblemList(yamlOf({ deny: [{ paths: [glob] }], public: [`GET ${glob}`] }))).toEqual([])
  })
})

describe('a route path no request can meet', () => {
  it.each([
    ['/%40admin/', 'never matches a request: the edge spells such a path "/@admin/", got "/%40admin/"'],
    ['/wiki/Special%3A/', 'never matches a request: the edge spells such a path "/wiki/Special:/", got "/wiki/Special%3A/"'],
    ['/%61pp/', 'never matches a request: the edge spells such a path "/app/", got "/%61pp/"'],
    ['/a%2Fb/', 'never matches a request: the edge refuses such a path (the path has an encoded / or \\), got "/a%2Fb/"'],
    // The router compares a request's path decoded: /caf%C3%A9/x is /café/x to it.
    ['/caf%C3%A9/', 'never matches a request: the router reads a request\'s path decoded, so write it decoded: "/café/", got "/caf%C3%A9/"'],
    ['/c%2B%2B/', 'never matches a request: the router reads a request\'s path decoded, so write it decoded: "/c++/", got "/c%2B%2B/"'],
  ])('%s', (path, message) => {
    expect(configProblemList(yamlOf({ path })).map(({ path, message }) => ({ path, message }))).toEqual([{ path: 'routes[0].path', message }])
  })

  it.each(['/café/', '/c++/', '/app/'])('a path as the router matches it is fine: %s', (path) => {
    expect(configProblemList(yamlOf({ path }))).toEqual([])
  })
})

describe('--check and start-up', () => {
  const run = promisify(execFile)

  it('names each unmeetable glob with the spelling to write, and start-up reads the same problems', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'gw-globs-'))
    const file = join(dir, 'gateway.yaml')
    await writeFile(file, yamlOf({ deny: [{ paths: ['/app/ADMIN/*', '/app/%61dmin/*'] }, { paths: ['/app/café/*'] }] }))
    const result = await run('node', ['dist/src/main.js', '--check', '--config', file], { env: { ...process.env, GATEWAY_IN_CONTAINER: 'false' } }).catch((error: unknown) => error) as { code: number, stdout: string, stderr: string }
    expect(result.code).toBe(1)
    expect(result.stderr).toMatch(new RegExp(`^${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: 2 problems\n`))
    expect(result.stderr).toContain(`  routes[0].deny[0].paths[1]: ${spelt('/app/admin/*', '/app/%61dmin/*')} (line `)
    expect(result.stderr).toContain(`  routes[0].deny[1].paths[0]: ${spelt('/app/caf%C3%A9/*', '/app/café/*')} (line `)
    const start = await run('node', ['dist/src/main.js', '--config', file], { env: { ...process.env, GATEWAY_IN_CONTAINER: 'false' }, timeout: 20_000 }).catch((error: unknown) => error) as { code: number, stderr: string }
    expect(start).toMatchObject({ code: 1, stderr: result.stderr })
  })
})
