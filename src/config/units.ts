// Durations (`300`, `5m`, `8h`) and sizes (`64KiB`, `1MiB`) as gateway.yaml writes them, read
// into milliseconds and bytes, and written back as the docs write ranges.

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }

/** Parses `300`, `300s`, `5m`, `8h`, `250ms`, `1d` into milliseconds; a bare number is seconds. */
export function parseDuration (value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) && value >= 0 ? value * 1000 : undefined
  if (typeof value !== 'string') return undefined
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(value)
  if (!match) return undefined
  return Math.round(Number(match[1]) * UNITS[match[2] ?? 's']!)
}

const SIZE_UNITS: Record<string, number> = { '': 1, b: 1, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3, kb: 1000, mb: 1000 ** 2, gb: 1000 ** 3 }

/** Sizes are held to this (1 TiB): anything larger is a typo, and stays an exact integer. */
const MAX_SIZE = 1024 ** 4

/**
 * Parses a size into bytes: a whole number of bytes (`1048576`), or a string such as `64KiB`,
 * `1MiB`, `1.5MB`, `512 B` (units in any case; KiB/MiB/GiB are powers of 1024, KB/MB/GB of 1000).
 * Undefined for anything else, fractions of a byte and values above 1 TiB included. The pattern
 * has no nested repetition, so it runs in linear time on any input.
 */
export function parseSize (value: unknown): number | undefined {
  let bytes: number
  if (typeof value === 'number') {
    bytes = value
  } else if (typeof value === 'string') {
    const match = /^[ \t]*(\d{1,16}(?:\.\d{1,16})?)[ \t]*([kmg]i?b|b)?[ \t]*$/i.exec(value)
    if (!match) return undefined
    bytes = Number(match[1]) * SIZE_UNITS[(match[2] ?? '').toLowerCase()]!
  } else {
    return undefined
  }
  return Number.isSafeInteger(bytes) && bytes >= 0 && bytes <= MAX_SIZE ? bytes : undefined
}

/** `1048576` → `1MiB`, `65536` → `64KiB`, `1000` → `1000B`: the largest binary unit that divides it. */
export function formatSize (bytes: number): string {
  for (const [unit, size] of [['GiB', 1024 ** 3], ['MiB', 1024 ** 2], ['KiB', 1024]] as const) {
    if (bytes >= size && bytes % size === 0) return `${bytes / size}${unit}`
  }
  return `${bytes}B`
}

export function formatMs (ms: number): string {
  // Whole days past one day, as the docs write the ranges (30d, not 720h).
  if (ms > 86_400_000 && ms % 86_400_000 === 0) return `${ms / 86_400_000}d`
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`
  if (ms % 60_000 === 0) return `${ms / 60_000}m`
  if (ms % 1000 === 0) return `${ms / 1000}s`
  return `${ms}ms`
}
