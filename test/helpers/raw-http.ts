// One HTTP/1.1 request written byte for byte on a real socket: fetch and node:http normalise the
// target and refuse the hostile headers the security tests need to send.
import { connect } from 'node:net'

export interface RawResponse {
  status: number
  /** Header names in lower case; repeated headers joined with ", ". */
  headers: Record<string, string>
  body: string
}

/**
 * Sends `GET target` (or `method`) with `headers` (raw "Name: value" lines) plus Host, Accept:
 * application/json and Connection: close, and reads until the gateway closes the connection.
 */
export async function rawRequest (port: number, target: string, headers: string[] = [], options: { method?: string, accept?: string } = {}): Promise<RawResponse> {
  return await new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write([`${options.method ?? 'GET'} ${target} HTTP/1.1`, `Host: 127.0.0.1:${port}`, `Accept: ${options.accept ?? 'application/json'}`,
        'Connection: close', ...headers, '', ''].join('\r\n'))
    })
    let data = ''
    socket.setEncoding('latin1')
    socket.setTimeout(10_000, () => socket.destroy(new Error(`no answer to ${target} within 10 s`)))
    socket.on('data', (chunk: string) => { data += chunk })
    socket.on('error', reject)
    socket.on('close', () => {
      const [head = '', ...rest] = data.split('\r\n\r\n')
      const [statusLine = '', ...lines] = head.split('\r\n')
      const out: Record<string, string> = {}
      for (const line of lines) {
        const name = line.slice(0, line.indexOf(':')).toLowerCase()
        const value = line.slice(line.indexOf(':') + 1).trim()
        out[name] = out[name] === undefined ? value : `${out[name]}, ${value}`
      }
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine)?.[1] ?? 0), headers: out, body: rest.join('\r\n\r\n') })
    })
  })
}
