// A multipart body as PHP reads it (main/rfc1867.c), for the values of the fields it fills $_POST
// with: find_boundary skips lines up to one that starts with `--boundary`; multipart_buffer_headers
// reads header lines, looking for no boundary, up to an empty line or one that starts with a NUL,
// a line that starts with white space or holds no `:` going on the line before it with nothing
// between; the value runs to the next `\n--boundary`, a `\r` before it dropped. get_line reads a
// line in a buffer of FILLUNIT bytes (more for a longer boundary): a longer line comes in pieces, so
// its own `\r\n` is an empty line that ends the block. The gateway's own scan (form-fields.ts)
// starts a part at every `--boundary` and ends its block at the first empty line; each of these
// ways of PHP's let a part's value through unread there (an outside tester's findings: a NUL line,
// a 5,120-byte line, a header line split as `na` + `me="r"`), so this reading is judged too.

/** PHP's FILLUNIT: the bytes get_line reads a line in. */
const FILL_UNIT = 5120

/** get_line at `at`: the line without its `\r\n`, and where the next starts; undefined where PHP gets none (no `\n` within `lineMax` bytes, before the body ends). */
function lineAt (body: Buffer, at: number, lineMax: number): { line: Buffer, next: number } | undefined {
  // Looked for within the line's buffer only: the scan stays linear in the body.
  const found = body.subarray(at, at + lineMax).indexOf(0x0a)
  const lf = found === -1 ? -1 : at + found
  if (lf !== -1) return { line: body.subarray(at, lf > at && body[lf - 1] === 0x0d ? lf - 1 : lf), next: lf + 1 }
  return body.length - at < lineMax ? undefined : { line: body.subarray(at, at + lineMax), next: at + lineMax }
}

/** A part's header lines as PHP keeps them: a line that starts with white space (C's isspace) or holds no `:` goes on the line before, with nothing between; one before any header is dropped. */
function joinedHeaders (lines: readonly string[]): string {
  const joined: string[] = []
  for (const line of lines) {
    if (!/^[ \t\n\v\f\r]/.test(line) && line.includes(':')) joined.push(line)
    else if (joined.length > 0) joined[joined.length - 1] += line
  }
  return joined.join('\n')
}

/**
 * The values PHP reads from the parts of `body` (split at `boundary`) whose header block `names`
 * says is the field, in order; a last `undefined` past `partsMax` parts (what PHP reads then
 * cannot be told). Linear in the body: every step moves on.
 */
export function phpPartValues (body: Buffer, boundary: string, names: (headers: string) => boolean, partsMax: number): Array<string | undefined> {
  const lineMax = Math.max(FILL_UNIT, boundary.length + 6)
  const start = Buffer.from(`--${boundary}`, 'latin1')
  const bound = Buffer.from(`\n--${boundary}`, 'latin1')
  const values: Array<string | undefined> = []
  let at = 0
  for (let parts = 1; ; parts++) {
    let read = lineAt(body, at, lineMax)
    while (read !== undefined && !read.line.subarray(0, start.length).equals(start)) read = lineAt(body, at = read.next, lineMax)
    if (read === undefined) return values
    if (parts > partsMax) return [...values, undefined]
    const lines: string[] = []
    for (read = lineAt(body, at = read.next, lineMax); read !== undefined; read = lineAt(body, at, lineMax)) {
      at = read.next
      if (read.line.length === 0 || read.line[0] === 0) break
      lines.push(read.line.toString('latin1'))
    }
    const found = body.indexOf(bound, at)
    const end = found === -1 ? body.length : found
    if (names(joinedHeaders(lines))) values.push(body.subarray(at, found !== -1 && end > at && body[end - 1] === 0x0d ? end - 1 : end).toString('utf8'))
    at = end
  }
}
