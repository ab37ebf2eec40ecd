// The documentation stays true: every relative link in README.md, SECURITY.md, CONTRIBUTING.md, CHANGELOG.md and
// docs/ points at a file that exists (and a heading that exists, for links with #), and the
// README's example gateway.yaml passes the same validation as `--check`.
import { existsSync } from 'node:fs'
import { readFile, readdir } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { parseConfig } from '../src/config/config.js'

const PAGES = ['README.md', 'SECURITY.md', 'CONTRIBUTING.md', 'CHANGELOG.md', ...(await readdir('docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)]

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to `-`. */
function anchor (heading: string): string {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, '').replace(/ /g, '-')
}

async function anchors (file: string): Promise<Set<string>> {
  const text = await readFile(file, 'utf8')
  return new Set([...text.matchAll(/^#{1,6} (.+)$/gm)].map(([, heading]) => anchor(heading!)))
}

describe('documentation links', () => {
  it.each(PAGES)('every relative link in %s resolves', async (page) => {
    const text = await readFile(page, 'utf8')
    const broken: string[] = []
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target!)) continue
      const [path, hash] = target!.split('#') as [string, string | undefined]
      const file = path === '' ? page : join(dirname(page), path)
      if (!existsSync(file)) broken.push(target!)
      else if (hash !== undefined && file.endsWith('.md') && !(await anchors(file)).has(hash)) broken.push(target!)
    }
    expect(broken).toEqual([])
  })
})

describe('the README example', () => {
  it('is a valid gateway.yaml', async () => {
    const readme = await readFile('README.md', 'utf8')
    const example = /```yaml\n(server:[\s\S]*?)```/.exec(readme)?.[1]
    expect(example).toBeDefined()
    const env = { GATEWAY_SESSION_SECRET: 'Zm9vYmFyYmF6cXV4LXRlc3Qtc2VjcmV0LTEyMzQ1Njc4OTA', REDIS_URL: 'redis://127.0.0.1:6379', CORP_CLIENT_ID: 'id', CORP_CLIENT_SECRET: 'secret' }
    const config = parseConfig(example!, env, 'README.md')
    expect(config.routes[0]).toMatchObject({ path: '/app', provider: 'corp' })
  })
})
