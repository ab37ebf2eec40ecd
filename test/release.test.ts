// A release a person can adopt (docs/release.md): the version, the changelog's dated section, the
// forge's workflows (what they run: they cannot run here), and the SBOM a release carries.
import { execFile } from 'node:child_process'
import { readFile } from 'node:fs/promises'
import { promisify } from 'node:util'
import { parse } from 'yaml'
import { beforeAll, describe, expect, it } from 'vitest'
import { releaseNotes } from '../scripts/release-notes.js'

interface Step { uses?: string, run?: string, with?: Record<string, unknown> }
interface Job { 'runs-on'?: string, needs?: string, uses?: string, container?: { image: string, options?: string }, steps?: Step[] }
interface Workflow { on: Record<string, unknown>, jobs: Record<string, Job> }

let pkg: { version: string, dependencies: Record<string, string>, devDependencies: Record<string, string> }
let changelog: string
let ci: Workflow
let release: Workflow
let releaseDoc: string

beforeAll(async () => {
  pkg = JSON.parse(await readFile('package.json', 'utf8')) as typeof pkg
  changelog = await readFile('CHANGELOG.md', 'utf8')
  ci = parse(await readFile('.github/workflows/ci.yml', 'utf8')) as Workflow
  release = parse(await readFile('.github/workflows/release.yml', 'utf8')) as Workflow
  releaseDoc = await readFile('docs/release.md', 'utf8')
})

const step = (job: Job | undefined, action: string) => job?.steps?.find((s) => s.uses?.startsWith(`${action}@`))

/** The SBOM step of the release: CycloneDX's npm tool through npx, at an exact version. */
const SBOM_STEP = /npx --yes --ignore-scripts (@cyclonedx\/cyclonedx-npm@\d+\.\d+\.\d+) --omit dev --output-format JSON /

/** The tool and exact version the release workflow runs (the SBOM test runs the same). */
function sbomTool (): string {
  const run = release.jobs.publish!.steps!.find((s) => SBOM_STEP.test(s.run ?? ''))?.run ?? ''
  return SBOM_STEP.exec(run)?.[1] ?? 'no SBOM step in release.yml'
}

describe('the release', () => {
  it('package.json\'s version has a dated changelog section whose text becomes the notes', () => {
    expect(pkg.version).toMatch(/^\d+\.\d+\.\d+$/)
    const result = releaseNotes(`v${pkg.version}`, pkg.version, changelog)
    expect(result).toHaveProperty('notes')
    expect((result as { notes: string }).notes).not.toMatch(/^## /m)
  })

  it.each([
    ['1.0.0', 'is not v<major>.<minor>.<patch>'],
    ['v1.0', 'is not v<major>.<minor>.<patch>'],
    ['v1.0.0-rc.1', 'is not v<major>.<minor>.<patch>'],
    ['v1.0.0\n', 'is not v<major>.<minor>.<patch>'],
    ['', 'is not v<major>.<minor>.<patch>'],
    ['v9.9.9', "is not package.json's version"],
  ])('refuses the tag %j', (tag, problem) => {
    expect(releaseNotes(tag, pkg.version, changelog)).toEqual({ problem: expect.stringContaining(problem) as string })
  })

  it('bench/releases.json names the newest dated version, on a commit of this history whose package.json has it', async () => {
    // What `npm run bench -- --against` and CI's guard compare with (docs/performance.md).
    const { releases } = JSON.parse(await readFile('bench/releases.json', 'utf8')) as { releases: Array<{ version: string, date: string, commit: string }> }
    const last = releases.at(-1)!
    const newest = /^## (\d+\.\d+\.\d+) \((\d{4}-\d{2}-\d{2})\)$/m.exec(changelog)!
    expect([last.version, last.date]).toEqual([newest[1], newest[2]])
    const shipped = (await promisify(execFile)('git', ['show', `${last.commit}:package.json`], { encoding: 'utf8' })).stdout
    expect((JSON.parse(shipped) as { version: string }).version).toBe(last.version)
  })

  it('refuses a version whose section is missing, undated or empty', () => {
    expect(releaseNotes('v2.0.0', '2.0.0', '# Changelog\n\n## Unreleased\n\n- x\n')).toEqual({ problem: 'CHANGELOG.md has no section "## 2.0.0 (YYYY-MM-DD)": rename "## Unreleased" to it' })
    expect(releaseNotes('v2.0.0', '2.0.0', '## 2.0.0\n\n- x\n')).toHaveProperty('problem')
    expect(releaseNotes('v2.0.0', '2.0.0', '## 2.0.0 (2027-01-02)\n\n## 1.0.0 (2026-11-26)\n\n- x\n')).toEqual({ problem: "CHANGELOG.md's section 2.0.0 is empty" })
    expect(releaseNotes('v2.0.0', '2.0.0', '## 2.0.0 (2027-01-02)\n\n- y\n\n## 1.0.0 (2026-11-26)\n\n- x\n')).toEqual({ notes: '- y\n' })
  })
})

describe('the forge\'s workflows', () => {
  it('CI runs .ci/run on Debian 12 with an engine of its own, and builds the image for both architectures', () => {
    expect(Object.keys(ci.on).sort()).toEqual(['pull_request', 'push', 'workflow_call'])
    const job = ci.jobs.ci!
    expect(job.container).toEqual({ image: 'node:20-bookworm', options: '--privileged' })
    expect(job.steps!.map((s) => s.run).filter(Boolean)).toEqual(['bash .ci/run'])
    expect(step(ci.jobs.image, 'docker/build-push-action')?.with).toMatchObject({ platforms: 'linux/amd64,linux/arm64', push: false })
  })

  it('a tag runs the whole CI first, then publishes both architectures with SBOM and provenance', () => {
    expect(release.on).toEqual({ push: { tags: ['v[0-9]+.[0-9]+.[0-9]+'] } })
    expect(release.jobs.ci!.uses).toBe('./.github/workflows/ci.yml')
    const publish = release.jobs.publish!
    expect(publish.needs).toBe('ci')
    expect(publish.steps!.some((s) => s.run?.includes('node dist/scripts/release-notes.js "$GITHUB_REF_NAME"'))).toBe(true)
    expect(step(publish, 'docker/build-push-action')?.with).toMatchObject({ platforms: 'linux/amd64,linux/arm64', push: true, sbom: true, provenance: 'mode=max' })
    expect(sbomTool()).toMatch(/^@cyclonedx\/cyclonedx-npm@\d+\.\d+\.\d+$/)
  })

  it('the SBOM tool is no dependency: npx fetches it in the release only (its libxmljs2 is native code)', () => {
    expect(Object.keys(pkg.devDependencies)).not.toContain('@cyclonedx/cyclonedx-npm')
    expect(Object.keys(pkg.dependencies)).not.toContain('@cyclonedx/cyclonedx-npm')
    expect(releaseDoc).toContain(`\`npx --yes --ignore-scripts ${sbomTool()} --omit dev\``)
  })

  it('publishes the tags docs/release.md promises', () => {
    const meta = step(release.jobs.publish, 'docker/metadata-action')!.with!
    const patterns = String(meta.tags).trim().split('\n').map((line) => /pattern=\{\{(.+)\}\}/.exec(line)?.[1])
    expect(patterns).toEqual(['version', 'major}}.{{minor', 'major'])
    expect(meta.flavor).toBe('latest=true')
    expect(releaseDoc).toContain('with the tags `X.Y.Z`, `X.Y`, `X` and `latest`')
  })
})

interface Component { group?: string, name: string, components?: Component[] }

/** Every component's package name, nested ones included (cyclonedx-npm nests bundled copies). */
function packageNames (components: Component[]): string[] {
  return components.flatMap((c) => [c.group === undefined ? c.name : `${c.group}/${c.name}`, ...packageNames(c.components ?? [])])
}

describe('the SBOM', () => {
  // As the release makes it; the first run fetches the tool from the npm registry into npx's cache.
  it('lists every production dependency and no dev dependency', { timeout: 120_000 }, async () => {
    const { stdout } = await promisify(execFile)('npx', ['--yes', '--ignore-scripts', sbomTool(), '--omit', 'dev', '--output-format', 'JSON', '--output-file', '-'], { maxBuffer: 64 * 1024 * 1024 })
    const bom = JSON.parse(stdout) as { bomFormat: string, metadata: { component: { name: string, version: string } }, components: Component[] }
    expect(bom.bomFormat).toBe('CycloneDX')
    expect(bom.metadata.component).toMatchObject({ name: 'oauth-gateway', version: pkg.version })
    const names = new Set(packageNames(bom.components))
    for (const name of Object.keys(pkg.dependencies)) expect(names, name).toContain(name)
    for (const name of ['vitest', '@modelcontextprotocol/sdk', 'testcontainers', '@cyclonedx/cyclonedx-npm']) expect(names, name).not.toContain(name)
  })
})
