// The secrets this repository's own files hold (compose defaults, bench and script values) are
// refused on a gateway reached beyond this machine: SHIPPED_SECRETS lists them, and this file reads
// the shipped files so that a secret added to one of them cannot be missing from the list.
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { stringify } from 'yaml'
import { describe, expect, it } from 'vitest'
import { configProblems } from '../helpers/config.js'
import { SHIPPED_SECRETS } from '../../src/config/safety.js'

/**
 * The files an operator may copy from: everything shipped but the tests and the dependencies (the
 * tests' own secret signs the https gateways the tests start, and no operator's config comes from a test).
 */
const SHIPPED = ['docker-compose.yml', 'gateway.yaml', 'README.md', 'Dockerfile', 'deploy', 'demo', 'docs', 'bench', 'scripts', '.ci']

function files (path: string): string[] {
  let stat
  try {
    stat = statSync(path)
  } catch {
    return []
  }
  if (!stat.isDirectory()) return [path]
  return readdirSync(path).filter((name) => name !== 'results' && name !== 'node_modules').flatMap((name) => files(join(path, name)))
}

/**
 * Literal secret values in a file: in code, `...Secret = 'value'`; elsewhere `${..SECRET..:-value}`,
 * `..SECRET..=value` and a YAML key `...secret: value` (a variable or a placeholder is no value).
 */
function secretsIn (file: string, text: string): string[] {
  const found = file.endsWith('.ts')
    ? [...text.matchAll(/\b\w*secret\w*\s*=\s*'([^'$]+)'/gi)]
    : [
        ...text.matchAll(/\$\{\w*SECRET\w*:-([^}]+)\}/gi),
        ...text.matchAll(/\b\w*SECRET\w*=([^\s"'`$|()]+)(?=[\s"'`]|$)/gim),
        ...text.matchAll(/^[ \t-]*\w*secret\w*:[ \t]+["']?(?![$"'<{|>])([^\s"'#,}]+)/gim),
      ]
  // The Kubernetes placeholder is refused on its own (validate.ts), whatever the address; `...` is
  // the docs' "your value here".
  return found.map((match) => match[1]!.trim()).filter((value) => value !== 'REPLACE-ME' && !/^\.+$/.test(value))
}

const shipped = new Map<string, string>()
for (const file of SHIPPED.flatMap(files)) {
  for (const secret of secretsIn(file, readFileSync(file, 'utf8'))) shipped.set(secret, file)
}

const GOOD_SECRET = 'q3Vt8mJ0bXcE1s7yKp2RzL9wH4dNfA6gUoTiC5eBvMk='
const provider = (clientSecret: string) => ({ p: { clientId: 'c', clientSecret, scope: 'read', authorizeUrl: 'https://op.example.org/a', tokenUrl: 'https://op.example.org/t' } })
const MESSAGE = 'is a value shipped in this repository\'s own files (a demo or test value), which anyone can read; set a secret of your own (for a session secret, generate one with "openssl rand -base64 32")'

describe('secrets shipped in the repository', () => {
  it('finds the compose demo\'s, the bench\'s and the scripts\' secrets in the shipped files', () => {
    expect([...shipped.keys()]).toEqual(expect.arrayContaining(['compose-demo-session-secret-change-me', 'demo-secret-change-me', 'bench-session-secret-0123456789-abcdefghij']))
  })

  it('SHIPPED_SECRETS holds every secret a shipped file holds, and nothing else', () => {
    expect([...shipped.keys()].sort()).toEqual([...SHIPPED_SECRETS].sort())
  })

  it.each([...SHIPPED_SECRETS])('%s is refused as session.secret and as a clientSecret on a gateway reached beyond this machine', (secret) => {
    const text = stringify({ server: { baseUrl: 'https://gw.example.org' }, session: { secret }, providers: provider(secret) })
    expect(configProblems(text, {})).toEqual([`session.secret: ${MESSAGE} (line 4)`, `providers.p.clientSecret: ${MESSAGE} (line 8)`])
    // With spaces around it (a variable's value read from a file).
    expect(configProblems(stringify({ server: { baseUrl: 'https://gw.example.org' }, session: { secret: ` ${secret}\n` } }), {})).toHaveLength(1)
  })

  it.each([...SHIPPED_SECRETS])('%s is still accepted where only this machine reaches the gateway (the demo, the bench)', (secret) => {
    for (const baseUrl of ['http://localhost:8080', 'http://127.0.0.1:4180', 'http://[::1]:8080']) {
      const problems = configProblems(stringify({ server: { baseUrl }, session: { secret }, providers: provider(secret) }), {})
      expect(problems.filter((problem) => problem.includes('shipped')), baseUrl).toEqual([])
    }
  })

  it('a secret that only contains a shipped one, or differs in case, is judged on its own', () => {
    for (const secret of [`${GOOD_SECRET}compose-demo-session-secret-change-me`, 'COMPOSE-DEMO-SESSION-SECRET-CHANGE-ME'.toLowerCase().replace('c', 'C')]) {
      expect(configProblems(stringify({ server: { baseUrl: 'https://gw.example.org' }, session: { secret } }), {}).filter((problem) => problem.includes('shipped'))).toEqual([])
    }
  })
})
