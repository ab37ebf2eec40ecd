// docs/operations.md's metrics table against a real gateway's GET /metrics (a newcomer's finding: it left out
// gateway_rule_refusals_total): every metric the table lists is there with the labels it names, and
// every gateway_ metric /metrics shows is in the table.
import { readFileSync } from 'node:fs'
import { expect } from 'vitest'
import { signIn } from '../helpers/browser.js'
import type { TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'

let gateway: TestGateway

/** The table's rows: name -> documented labels. */
function documented (): Map<string, string[]> {
  const docs = readFileSync('docs/operations.md', 'utf8')
  const rows = new Map<string, string[]>()
  for (const line of docs.split('\n')) {
    const row = /^\| `(gateway_[a-z_]+)` \|([^|]*)\|/.exec(line)
    if (row) rows.set(row[1]!, [...row[2]!.matchAll(/`([a-z_]+)`/g)].map((m) => m[1]!))
  }
  return rows
}

/** name -> the label names of its series on /metrics (histograms by their _count series). */
function shown (text: string): Map<string, Set<string>> {
  const seen = new Map<string, Set<string>>()
  for (const line of text.split('\n')) {
    const type = /^# TYPE (gateway_[a-z_]+) /.exec(line)
    if (type) { if (!seen.has(type[1]!)) seen.set(type[1]!, new Set()); continue }
    const series = /^(gateway_[a-z_]+?)(_count|_sum|_bucket)?(?:\{([^}]*)\})? /.exec(line)
    if (!series) continue
    const name = seen.has(series[1]!) ? series[1]! : `${series[1]}${series[2] ?? ''}`
    const labels = seen.get(name) ?? new Set<string>()
    for (const pair of (series[3] ?? '').split(',')) { const key = pair.split('=')[0]; if (key && key !== 'le') labels.add(key) }
    seen.set(name, labels)
  }
  return seen
}

it.beforeAll(async ({ startStack, upstream }) => {
  gateway = await startStack({
    routes: [
      { path: '/app/', upstream: upstream.url, provider: 'demo' },
      { path: '/admin/', upstream: upstream.url, provider: 'demo', allow: [{ users: ['nobody-at-all'] }] },
      { path: '/orders/', upstream: upstream.url, provider: 'demo', bearer: { audience: 'api://orders' } },
    ],
  })
})

it('every metric in operations.md\'s table is on /metrics with the labels it names, and the table names every gateway_ metric', async () => {
  // Events enough for each labelled series the table lists: a sign-in, a proxied request, a rule's
  // refusal, a refused token, a failed callback.
  const person = await signIn(`${gateway.url}/app/`, 'alice')
  expect((await person.browser.fetch(`${gateway.url}/app/x`)).status).toBe(200)
  expect((await person.browser.fetch(`${gateway.url}/admin/x`, { headers: { accept: 'application/json' } })).status).toBe(403)
  expect((await fetch(`${gateway.url}/orders/x`, { headers: { authorization: 'Bearer not-a-token' } })).status).toBe(401)
  expect((await fetch(`${gateway.url}/oauth/authorized/demo/?code=x&state=y`)).status).toBe(400)

  const text = await (await fetch(`${gateway.url}/metrics`)).text()
  const onMetrics = shown(text)
  const table = documented()
  const problems: string[] = []
  for (const [name, labels] of table) {
    const seen = onMetrics.get(name)
    if (!seen) { problems.push(`${name}: in the table, not on /metrics`); continue }
    for (const label of seen) if (!labels.includes(label)) problems.push(`${name}: /metrics shows label ${label}, the table does not name it`)
    if (seen.size > 0) for (const label of labels) if (!seen.has(label)) problems.push(`${name}: the table names label ${label}, /metrics does not show it`)
  }
  for (const [name, labels] of onMetrics) {
    if (!table.has(name)) problems.push(`${name}{${[...labels].join(', ')}}: on /metrics, missing from operations.md's metrics table`)
  }
  expect(problems).toEqual([])
}, 60_000)
