// The release workflow's first check (.github/workflows/release.yml, docs/release.md): the tag
// pushed is `v` + package.json's version, and CHANGELOG.md has a dated section for that version,
// whose text becomes the release's notes. `node dist/scripts/release-notes.js v1.0.0` prints the
// notes, or says what is wrong and exits 1.
import { readFile } from 'node:fs/promises'
import { pathToFileURL } from 'node:url'

/** A changelog heading of a release: `## 1.0.0 (2026-11-26)`. */
const SECTION = /^## (\d+\.\d+\.\d+) \((\d{4}-\d{2}-\d{2})\)$/

/** The notes of `tag`'s release, or the reason there are none. */
export function releaseNotes (tag: string, packageVersion: string, changelog: string): { notes: string } | { problem: string } {
  const version = /^v(\d+\.\d+\.\d+)$/.exec(tag)?.[1]
  if (version === undefined) return { problem: `the tag ${JSON.stringify(tag)} is not v<major>.<minor>.<patch>` }
  if (version !== packageVersion) return { problem: `the tag ${tag} is not package.json's version ${packageVersion}: run npm version ${version} --no-git-tag-version first` }
  const lines = changelog.split('\n')
  const start = lines.findIndex((line) => SECTION.exec(line)?.[1] === version)
  if (start === -1) return { problem: `CHANGELOG.md has no section "## ${version} (YYYY-MM-DD)": rename "## Unreleased" to it` }
  const next = lines.findIndex((line, i) => i > start && line.startsWith('## '))
  const notes = lines.slice(start + 1, next === -1 ? undefined : next).join('\n').trim()
  return notes === '' ? { problem: `CHANGELOG.md's section ${version} is empty` } : { notes: `${notes}\n` }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [pkg, changelog] = await Promise.all([readFile('package.json', 'utf8'), readFile('CHANGELOG.md', 'utf8')])
  const result = releaseNotes(process.argv[2] ?? '', (JSON.parse(pkg) as { version: string }).version, changelog)
  if ('problem' in result) {
    process.stderr.write(`release: ${result.problem}\n`)
    process.exit(1)
  }
  process.stdout.write(result.notes)
}
