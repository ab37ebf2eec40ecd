// Shared by the sections: the filled file's types, and durations, sizes and URLs held to their
// ranges.
import { Issues, checkUrl, describe, type Path } from '../problems.js'
import { formatMs, formatSize, parseDuration, parseSize } from '../units.js'
import type { FilledYaml } from '../schema.js'
import { secretProblem, shippedSecretProblem } from '../safety.js'

export const DAY = 86_400_000

// What the sections read: every key the schema gives a default is present (schema.ts, `Filled`), so
// no default is written here; the few that are computed from other keys say so where they are made.
export type Sections = FilledYaml

export type ProviderRaw = NonNullable<FilledYaml['providers']>[string]

export type RouteRaw = NonNullable<FilledYaml['routes']>[number]

/** The key path of one key of the provider or route being checked: `at('issuer')` is `providers.<name>.issuer`. */
export type KeyPath = (key: string) => Path

/** One DNS label of letters, digits and hyphens (RFC 1123 §2.1). */
export const LABEL = '[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?'

/** A duration the schema has let through (or its default), held to its range. */
export function duration (issues: Issues, path: Path, value: string | number, minMs: number, maxMs: number): number {
  const ms = parseDuration(value)
  if (ms === undefined) {
    // Not reached (the schema's pattern and minimum are parseDuration's); if it were, the file is refused.
    if (!issues.touched(path)) issues.add(path, `must be a duration such as 300, 300s, 5m or 8h, got ${describe(value)}`)
    return minMs
  }
  if (ms < minMs || ms > maxMs) {
    issues.add(path, `must be between ${formatMs(minMs)} and ${formatMs(maxMs)}, got ${describe(value)}`)
    return Math.min(Math.max(ms, minMs), maxMs)
  }
  return ms
}

/** A size the schema has let through (or its default), in bytes, held to its range. */
export function size (issues: Issues, path: Path, value: string | number, min: number, max: number): number {
  const bytes = parseSize(value)
  if (bytes === undefined) {
    // Above 1 TiB, or a fraction of a byte: the schema's pattern lets it through, parseSize does not.
    if (!issues.touched(path)) issues.add(path, `must be a size such as 65536, 64KiB or 1MiB, got ${describe(value)}`)
    return min
  }
  if (bytes < min || bytes > max) {
    issues.add(path, `must be between ${formatSize(min)} and ${formatSize(max)}, got ${describe(value)}`)
    return Math.min(Math.max(bytes, min), max)
  }
  return bytes
}

/** A URL with one of `protocols`, or undefined (with a problem) when it is not one. */
export function url (issues: Issues, path: Path, value: string | undefined, protocols: readonly string[]): string | undefined {
  return value === undefined ? undefined : checkUrl(issues, path, value, protocols)
}

/** The secret a list of previous ones follows (session.secret, forwardAuth.proxySecret). */
export interface CurrentSecret {
  /** As a problem names it: `session.secret`. */
  name: string
  value: string | undefined
  /** Why previous values need it, said when it is absent. */
  why: string
}

/**
 * Earlier values of a secret (session.previousSecrets, forwardAuth.previousProxySecrets): each
 * follows the rules for the secret, none repeats it or another (a repeat would only cost a try),
 * and they need a secret to be previous to.
 */
export function previousSecrets (issues: Issues, path: Path, raw: string[], current: CurrentSecret, loopbackOnly: boolean): string[] {
  if (raw.length > 0 && !current.value) {
    issues.add(path, `needs ${current.name}: ${current.why}`)
    return []
  }
  const seen = new Set(current.value ? [current.value] : [])
  raw.forEach((previous, i) => {
    const at = [...path, i]
    if (seen.has(previous)) {
      issues.add(at, previous === current.value ? `is the same as ${current.name}: a previous secret must be the one it replaced` : 'repeats an earlier entry')
      return
    }
    seen.add(previous)
    const weakness = shippedSecretProblem(previous, loopbackOnly) ?? secretProblem(previous)
    if (weakness) issues.add(at, weakness)
  })
  return raw
}
