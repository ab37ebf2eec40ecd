// One HTTP/1.1 request written byte for byte on a real socket: fetch and node:http normalise the
// target and refuse the hostile headers the security tests need to send.
import { connect } from 'node:net'

export interface RawResponse {
  status: number
  /** Header names in lower case; repeated headers joined with ", ". */
  headers: Record<string, string>
  body: string
}

/** How long a raw exchange waits for the other side to close before it fails (instead of hanging). */
const NO_ANSWER_MS = 10_000

/**
 * Writes `bytes` to 127.0.0.1:`port` as they are and reads until the other side closes the
 * connection: everything it sent, as latin1 text ('' when it closed without an answer).
 */
export async function rawExchange (port: number, bytes: string | Buffer, what = 'the request'): Promise<string> {
  return await new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(bytes))
    let data = ''
    socket.setEncoding('latin1')
    socket.setTimeout(NO_ANSWER_MS, () => socket.destroy(new Error(`no answer to ${what} within ${NO_ANSWER_MS / 1000} s`)))
    socket.on('data', (chunk: string) => { data += chunk })
    socket.on('error', reject)
    socket.on('close', () => resolve(data))
  })
}

/** The status code of the first answer in `data` (0: none). */
export const statusOf = (data: string): number => Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1] ?? 0)

/**
 * Sends `GET target` (or `method`) with `headers` (raw "Name: value" lines) plus Host (`host`, else
 * 127.0.0.1:`port`), Accept: application/json (or `accept`), Connection: close and, with a `body`,
 * its Content-Length, then the body; reads until the other side closes the connection (status 0:
 * closed without an answer).
 */
export async function rawRequest (port: number, target: string, headers: string[] = [], options: { method?: string, accept?: string, host?: string, body?: string } = {}): Promise<RawResponse> {
  const length = options.body === undefined ? [] : [`Content-Length: ${Buffer.byteLength(options.body, 'latin1')}`]
  const data = await rawExchange(port, [`${options.method ?? 'GET'} ${target} HTTP/1.1`, `Host: ${options.host ?? `127.0.0.1:${port}`}`, `Accept: ${options.accept ?? 'application/json'}`,
    'Connection: close', ...length, ...headers, '', options.body ?? ''].join('\r\n'), target)
  const [head = '', ...rest] = data.split('\r\n\r\n')
  const [, ...lines] = head.split('\r\n')
  const out: Record<string, string> = {}
  for (const line of lines) {
    const name = line.slice(0, line.indexOf(':')).toLowerCase()
    const value = line.slice(line.indexOf(':') + 1).trim()
    out[name] = out[name] === undefined ? value : `${out[name]}, ${value}`
  }
  return { status: statusOf(data), headers: out, body: rest.join('\r\n\r\n') }
}
