// Comments name only what a reader can open: every repository path a comment names (`src/...`,
// `test/...`, `docs/...`, or a bare file name, found next to the file or anywhere in the
// repository) exists, and no comment sends the reader to a document outside the repository (a
// spec kept elsewhere, an issue number). Comments are found by TypeScript's parser (text in strings
// is not a comment); shell scripts by their `#` lines.
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

/** What the check reads: the code folders, the CI script and the root configs. */
const ROOTS = ['src', 'test', 'bench', 'demo', 'scripts', '.ci/run', 'eslint.config.js', 'vitest.config.ts']
const CODE = /\.(?:ts|js|mjs)$/
const TOP = ['src', 'test', 'bench', 'demo', 'scripts', 'docs', 'deploy', '.ci']
const IGNORED = readFileSync('.gitignore', 'utf8').split('\n').map((line) => line.trim().replace(/\/$/, '')).filter((line) => line !== '' && !line.includes('*'))

/** A path under one of the repository's top folders, or a bare file name with an extension. */
const PATH = new RegExp(`(?<![\\w./@<-])((?:${TOP.map((top) => top.replace('.', '\\.')).join('|')})/[\\w./-]*\\w|[\\w-]+\\.(?:ts|js|mjs|md|json|yaml|sh))\\b`, 'g')
/** A document outside the repository: a spec kept beside it, an issue number. */
const OUTSIDE = /\.\.\/shared\b|\bissues? #?\d+|\(#\d+\)/gi

function walk (root: string): string[] {
  if (!statSync(root).isDirectory()) return [root]
  return readdirSync(root, { recursive: true, encoding: 'utf8' })
    .map((name) => join(root, name))
    .filter((file) => !IGNORED.some((ignored) => file.startsWith(`${ignored}/`)) && statSync(file).isFile())
}

const FILES = ROOTS.flatMap(walk).filter((file) => CODE.test(file) || file.endsWith('.sh') || file === '.ci/run').sort()
const NAMES = new Set(FILES.concat(readdirSync('.'), readdirSync('docs').map((name) => `docs/${name}`), walk('bench/results')).map((file) => basename(file)))

/** Every comment's text in a file: TypeScript's comment ranges for code, `#` lines for shell. */
function commentsOf (file: string, text: string): string[] {
  if (!CODE.test(file)) return text.split('\n').filter((line) => /^\s*#|\s#\s/.test(line)).map((line) => line.slice(line.indexOf('#')))
  const found = new Map<number, string>()
  // Nodes share their edges: each position's trivia is read once (leading at a node's start, pos;
  // trailing at its end, kept apart as -end - 1).
  const read = new Set<number>()
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false)
  const collect = (key: number, ranges: ts.CommentRange[] | undefined) => {
    read.add(key)
    for (const range of ranges ?? []) found.set(range.pos, text.slice(range.pos, range.end))
  }
  const visit = (node: ts.Node): void => {
    if (!read.has(node.pos)) collect(node.pos, ts.getLeadingCommentRanges(text, node.pos))
    if (!read.has(-node.end - 1)) collect(-node.end - 1, ts.getTrailingCommentRanges(text, node.end))
    ts.forEachChild(node, visit)
  }
  visit(source)
  return [...found.values()]
}

/** Whether a path a comment in `file` names exists (or is one the tests write, kept out of git). */
function resolves (file: string, path: string): boolean {
  if (path.includes('/')) return existsSync(path) || IGNORED.some((ignored) => path === ignored || path.startsWith(`${ignored}/`))
  return existsSync(join(dirname(file), path)) || NAMES.has(path)
}

/** `file: path` for each path a comment names that does not exist, and each outside reference. */
function stalePaths (file: string, text: string): string[] {
  // The whole text first: a comment's paths are among the text's (a comment begins with `/` and
  // ends at a line's end or `*/`, so each of its matches is one of the text's too), and a file
  // whose every path resolves and that cites nothing outside needs no parse (most files: the parse
  // was most of this check's second of CPU).
  if (CODE.test(file) && staleIn(file, [text]).length === 0) return []
  return staleIn(file, commentsOf(file, text))
}

/** `file: path` for each path `comments` name that does not exist, and each outside reference. */
function staleIn (file: string, comments: string[]): string[] {
  const stale: string[] = []
  for (const comment of comments) {
    for (const [, path] of comment.matchAll(PATH)) if (!resolves(file, path!)) stale.push(`${file}: ${path}`)
    for (const [reference] of comment.matchAll(OUTSIDE)) stale.push(`${file}: ${reference}`)
  }
  return stale
}

describe('paths named in comments', () => {
  it('reports a made-up file, an outside document and an issue number, and nothing in strings', () => {
    const text = [
      '// See src/http/no-such-file.ts and no-such-helper.ts, as SPEC.md says (issue 23).',
      '/** Docs in ../shared/SPEC.md; src/errors.ts and docs/errors.md exist. */',
      "const s = 'src/not-a-comment.ts'",
    ].join('\n')
    expect(stalePaths('src/example.ts', text)).toEqual([
      'src/example.ts: src/http/no-such-file.ts',
      'src/example.ts: no-such-helper.ts',
      'src/example.ts: SPEC.md',
      'src/example.ts: issue 23',
      'src/example.ts: ../shared',
    ])
    expect(stalePaths('.ci/run', '# see scripts/gone.sh\necho src/x.ts\n')).toEqual(['.ci/run: scripts/gone.sh'])
  })

  it('every path a comment names exists, and no comment cites a document outside the repository', () => {
    expect(FILES.length).toBeGreaterThan(100)
    expect(FILES.flatMap((file) => stalePaths(file, readFileSync(file, 'utf8')))).toEqual([])
  })
})

/**
 * `folder: name` for each file name a row of CONTRIBUTING's layout table gives bare (no folder)
 * that is not in that row's folder: a newcomer opens it there (a newcomer's finding: the proxy's
 * adapter to reply-from, renamed long ago, and the assertions' cache, in ops/, were still listed).
 */
function strayLayoutNames (contributing: string): string[] {
  const stray: string[] = []
  for (const [, folder, cells] of contributing.matchAll(/^\| `((?:src|demo|bench)\/[\w-]*\/?)` \|(.*)$/gm)) {
    const inFolder = new Set(walk(folder!.replace(/\/$/, '')).map((file) => basename(file)))
    for (const [, name] of cells!.matchAll(/`([\w-]+\.ts)`/g)) if (!inFolder.has(name!)) stray.push(`${folder}: ${name}`)
  }
  return stray
}

describe('CONTRIBUTING\'s layout table', () => {
  it('reports a name its row\'s folder does not hold', () => {
    expect(strayLayoutNames('| `src/proxy/` | the pool (`upstream-pool.ts`), its bridge (`reply-from-adapter.ts`), `src/ops/lru.ts` |\n')).toEqual(['src/proxy/: reply-from-adapter.ts'])
  })

  it('names, for each folder, only files that folder holds', () => {
    const contributing = readFileSync('CONTRIBUTING.md', 'utf8')
    expect(contributing).toMatch(/^\| `src\/agents\/` \|/m)
    expect(strayLayoutNames(contributing)).toEqual([])
  })
})
