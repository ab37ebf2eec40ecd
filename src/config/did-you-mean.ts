// "did you mean `x`?": the nearest of the known names to a misspelt key or value.

/** Optimal string alignment distance (Levenshtein with adjacent transpositions), case-insensitive. */
export function editDistance (a: string, b: string): number {
  const s = a.toLowerCase()
  const t = b.toLowerCase()
  const d: number[][] = Array.from({ length: s.length + 1 }, (_, i) => [i, ...new Array<number>(t.length).fill(0)])
  for (let j = 1; j <= t.length; j++) d[0]![j] = j
  for (let i = 1; i <= s.length; i++) {
    for (let j = 1; j <= t.length; j++) {
      const cost = s[i - 1] === t[j - 1] ? 0 : 1
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost)
      if (i > 1 && j > 1 && s[i - 1] === t[j - 2] && s[i - 2] === t[j - 1]) best = Math.min(best, d[i - 2]![j - 2]! + 1)
      d[i]![j] = best
    }
  }
  return d[s.length]![t.length]!
}

/** The closest of `candidates` to `word`, when it is close enough to be a typo of it. */
export function closest (word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined
  let bestDistance = Infinity
  for (const candidate of candidates) {
    const distance = editDistance(word, candidate)
    if (distance < bestDistance) [best, bestDistance] = [candidate, distance]
  }
  const allowed = Math.max(1, Math.min(3, Math.floor(Math.max(word.length, best?.length ?? 0) / 3)))
  return bestDistance <= allowed ? best : undefined
}

/** "did you mean `x`?" for a value or key that is close to one of `candidates`. */
export function didYouMean (word: string, candidates: readonly string[]): string | undefined {
  const match = closest(word, candidates)
  return match === undefined ? undefined : `did you mean \`${match}\`?`
}
