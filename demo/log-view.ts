// The demo's terminal: one readable line per request when a person watches (stdout is a TTY),
// `[12:03:04] INFO: GET /app/ 302 4 ms {"decision":"sign_in",...}`, and the gateway's JSON lines unchanged otherwise (piped to a file
// or another program). pino-pretty does the formatting; the gateway itself always logs JSON.
import type { Readable, Writable } from 'node:stream'
import { PinoPretty, type PrettyOptions } from 'pino-pretty'

/** A request line shows as method, address, status and time; any other line as its message and fields. */
export const DEMO_PRETTY_OPTIONS: PrettyOptions = {
  translateTime: 'SYS:HH:MM:ss',
  singleLine: true,
  // pino-pretty prints an `error` field on lines of its own by default; ours is an error code.
  errorLikeObjectKeys: ['err'],
  ignore: 'pid,hostname,reqId,method,url,statusCode,responseTime',
  messageFormat: (log, messageKey) => log.method === undefined
    ? String(log[messageKey])
    : `${String(log.method)} ${String(log.url)} ${String(log.statusCode)} ${String(log.responseTime)} ms`,
}

/** Sends the gateway's log lines to `out`: pretty when `tty`, as they are otherwise. */
export function showGatewayLogs (lines: Readable, out: Writable & { isTTY?: boolean }): void {
  if (!out.isTTY) {
    lines.pipe(out)
    return
  }
  lines.pipe(PinoPretty({ ...DEMO_PRETTY_OPTIONS, colorize: true, destination: out }))
}
