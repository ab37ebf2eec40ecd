// The other ways an application may read a request's path, which a `deny` glob holds on besides the
// path itself (src/access/rules.ts): folded as a case-insensitive application reads it, as common
// routers dispatch it, and the path a front controller takes from the query (src/config/path-fold.ts
// makes each reading), and the script a path runs. An `allow` glob admits a path only with the
// script it runs and every path its query routes to.
import { admittedScript, foldable, folded, queryReadings, routedForms, scriptRun } from '../config/path-fold.js'
import { pathOf } from './glob.js'

/** No other reading: the path is read only as it is (an `allow` list, or no `deny` glob). */
export const NO_READINGS: readonly string[] = Object.freeze([])

/**
 * `path` folded (path-fold.ts), and with `%2B` read as `+`, as an application that decodes the path
 * reads it: the edge keeps `%2B` encoded (to an application that reads `+` in a path as a space, the
 * two differ), so a `deny` glob holds on both spellings. Globs and paths are read alike.
 */
export function denyFold (path: string): string {
  const loose = folded(path)
  return loose.includes('%2b') ? loose.replaceAll('%2b', '+') : loose
}

/** The readings of a path one of whose readings cannot be told (a query path the edge would refuse): a `deny` glob holds. */
export const UNTOLD: readonly string[] = Object.freeze([])

/**
 * The other ways an application may read `target`'s path (its query cut off), which a `deny` glob,
 * folded, is compared with: folded as a case-insensitive application reads it (only when that
 * changes it: most paths have no capital letter and no segment ending in `.` or `%20`), and that
 * reading as routers dispatch it (routedForms); and the same of a path a front controller takes from
 * the query (queryRoutedPath), made canonical as the edge makes a path: one that cannot be (an
 * encoded `/` or NUL), or whose dot or empty segments CodeIgniter reads its own way (it drops `..`
 * where the edge climbs), is not told ({@link UNTOLD}), and a `deny` glob holds on it. None when the path is not told.
 */
export function otherReadings (target: string | undefined): readonly string[] {
  if (target === undefined) return NO_READINGS
  const path = pathOf(target)
  const loose = foldable(path) ? denyFold(path) : path
  const readings = [loose, ...routedForms(loose)]
  const script = scriptRun(loose)
  if (script !== undefined) readings.push(script)
  const queried = queryReadings(target)
  if (queried === undefined) return UNTOLD
  for (const routed of queried) {
    const reading = denyFold(routed)
    readings.push(reading, ...routedForms(reading))
    const routedScript = scriptRun(reading)
    if (routedScript !== undefined) readings.push(routedScript)
  }
  return readings
}

/**
 * Whether `admits` admits what else `target` runs: the script its path runs (scriptRun: a public
 * `GET /site/*.css` must not make `/site/admin.php/x.css` public), and every path its query routes
 * to (queryReadings); false when one cannot be told.
 */
export function admitsWhatItRuns (target: string, admits: (path: string) => boolean): boolean {
  const path = pathOf(target)
  // The script as a file or as a directory: `/x/*` admits `/x` to an allow, not to a public rule.
  const script = scriptRun(path, admittedScript)
  if (script !== undefined && !admits(script) && !admits(`${script}/`)) return false
  if (path.length === target.length) return true
  const readings = queryReadings(target, false)
  return readings !== undefined && readings.every(admits)
}
