// A multipart body as PHP reads it (main/rfc1867.c), for the values of the fields it fills $_POST
// with: find_boundary skips lines up to one that starts with `--boundary`; multipart_buffer_headers
// reads header lines, looking for no boundary, up to an empty line or one that starts with a NUL,
// each line a C string (cut at its first NUL), a line that starts with white space or holds no `:`
// going on the line before it with nothing between; the value runs to the next `\n--boundary`, a
// `\r` before it dropped, but a part with no Content-Disposition has none read, and PHP looks for
// the next boundary in it line by line. get_line reads a line in a buffer of FILLUNIT bytes (more
// for a longer boundary): a longer line comes in pieces, so its own `\r\n` is an empty line that
// ends a header block, and a `--boundary` right after a piece starts a part. The gateway's own scan
// (form-fields.ts) starts a part at every `--boundary` and ends its block at the first empty line;
// each of these ways of PHP's let a part's value through unread there (outside testers' findings,
// checked against PHP 8.2), so this reading is judged too.

/** PHP's FILLUNIT: the bytes get_line reads a line in. */
const FILL_UNIT = 5120
/** The header text of a part read, at most (no form's is near it): past it, what PHP reads is not told. */
const HEADERS_MAX = 64 * 1024

/** A line get_line returns: from where it was asked to `end` (its `\r\n` or `\n` left out), and where the next starts. */
interface Line { readonly end: number, readonly next: number }

/**
 * get_line over `body`: the line at `at`, or undefined where PHP gets none (no `\n` within
 * `lineMax` bytes, before the body ends). The next `\n` is found once for every line before it: linear.
 */
function lineReader (body: Buffer, lineMax: number): (at: number) => Line | undefined {
  let lf = -1
  return (at) => {
    if (lf < at) {
      const next = body.indexOf(0x0a, at)
      lf = next === -1 ? body.length : next
    }
    if (lf < body.length && lf < at + lineMax) return { end: lf > at && body[lf - 1] === 0x0d ? lf - 1 : lf, next: lf + 1 }
    return body.length - at < lineMax ? undefined : { end: at + lineMax, next: at + lineMax }
  }
}

/** A part's header lines as PHP keeps them: a line that starts with white space (C's isspace) or holds no `:` goes on the line before, with nothing between; one before any header is dropped. */
function joinedHeaders (lines: readonly string[]): string[] {
  const joined: string[] = []
  for (const line of lines) {
    if (!/^[ \t\n\v\f\r]/.test(line) && line.includes(':')) joined.push(line)
    else if (joined.length > 0) joined[joined.length - 1] += line
  }
  return joined
}

/** Whether PHP finds a Content-Disposition among `headers` (its key, the text before the `:`, compared without case). */
function hasDisposition (headers: readonly string[]): boolean {
  return headers.some((header) => header.slice(0, header.indexOf(':')).toLowerCase() === 'content-disposition')
}

/**
 * The values PHP reads from the parts of `body` (split at `boundary`) whose header block `names`
 * says is the field, in order; a last `undefined` where what PHP reads cannot be told (more than
 * `partsMax` parts, a header block over HEADERS_MAX). Linear in the body: every step moves on.
 */
export function phpPartValues (body: Buffer, boundary: string, names: (headers: string) => boolean, partsMax: number): Array<string | undefined> {
  const lineAt = lineReader(body, Math.max(FILL_UNIT, boundary.length + 6))
  const start = Buffer.from(`--${boundary}`, 'latin1')
  const bound = Buffer.from(`\n--${boundary}`, 'latin1')
  const isBoundary = (at: number, line: Line) => line.end - at >= start.length && body.compare(start, 0, start.length, at, at + start.length) === 0
  const values: Array<string | undefined> = []
  let at = 0
  for (let parts = 1; ; parts++) {
    let read = lineAt(at)
    while (read !== undefined && !isBoundary(at, read)) read = lineAt(at = read.next)
    if (read === undefined) return values
    if (parts > partsMax) return [...values, undefined]
    const lines: string[] = []
    let size = 0
    for (at = read.next, read = lineAt(at); read !== undefined && read.end > at && body[at] !== 0; at = read.next, read = lineAt(at)) {
      // A C string: what follows a NUL is not part of the line.
      const line = body.toString('latin1', at, read.end).split('\0', 1)[0]!
      if ((size += line.length) > HEADERS_MAX) return [...values, undefined]
      lines.push(line)
    }
    if (read !== undefined) at = read.next
    const headers = joinedHeaders(lines)
    // No Content-Disposition: PHP reads no value, and looks for the next boundary from here.
    if (!hasDisposition(headers)) continue
    const found = body.indexOf(bound, at)
    const end = found === -1 ? body.length : found
    if (names(headers.join('\n'))) values.push(body.subarray(at, found !== -1 && end > at && body[end - 1] === 0x0d ? end - 1 : end).toString('utf8'))
    at = end
  }
}
