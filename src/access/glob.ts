// The path globs of the config (`public` rules, and any later rule that names paths), matched
// without a regular expression: a glob is split once at its `*`s into literal parts, and a target
// is matched by anchoring the first and last parts and finding each middle part, leftmost first,
// after the one before. Leftmost is always right for a glob whose only wildcard is `*`, so nothing
// is ever retried: the cost is at most the path's length times the glob's, linear in what the
// client sends (a regular expression with two `*` backtracks, quadratically or worse, on a long
// path that almost matches).

/** Whether a request target matches a glob; see {@link globMatcher}. */
export type GlobMatcher = (target: string) => boolean

const EVERYTHING: GlobMatcher = () => true
const NOTHING: GlobMatcher = () => false

/**
 * Compiles a path glob once, at startup, into a test of a request target. `*` matches any
 * characters of the path, `/` included, and the glob must match the whole path: the target's
 * query, from its first `?`, is never part of it. The lone glob `*` matches every target; a glob
 * holding `?` matches nothing (a path never holds one).
 */
export function globMatcher (glob: string): GlobMatcher {
  if (glob === '*') return EVERYTHING
  if (glob.includes('?')) return NOTHING
  const parts = glob.split('*')
  if (parts.length === 1) return (target) => pathOf(target) === glob
  const first = parts[0]!
  const last = parts[parts.length - 1]!
  const middle = parts.slice(1, -1).filter((part) => part !== '')
  const fixed = first.length + last.length
  return (target) => {
    const path = pathOf(target)
    if (path.length < fixed || !path.startsWith(first) || !path.endsWith(last)) return false
    const end = path.length - last.length
    let from = first.length
    for (const part of middle) {
      const at = path.indexOf(part, from)
      if (at === -1 || at + part.length > end) return false
      from = at + part.length
    }
    return true
  }
}

/** The target up to its first `?`: the path a glob is matched against. */
export function pathOf (target: string): string {
  const queryAt = target.indexOf('?')
  return queryAt === -1 ? target : target.slice(0, queryAt)
}
