// A request whose body the gateway has read, handed on to a handler that reads the body itself
// (oidc-provider, for the agents' token endpoint): its body would otherwise be gone, and the
// handler's fallback for a parsed body writes a warning outside the log.
import { IncomingMessage } from 'node:http'

/**
 * `req` again, its body `body`: the same method, target, headers and socket (the answer is written
 * on the original's response), then the end.
 */
export function withBody (req: IncomingMessage, body: Buffer): IncomingMessage {
  const replayed = new IncomingMessage(req.socket)
  replayed.method = req.method
  replayed.url = req.url
  replayed.headers = req.headers
  replayed.rawHeaders = req.rawHeaders
  replayed.httpVersion = req.httpVersion
  replayed.httpVersionMajor = req.httpVersionMajor
  replayed.httpVersionMinor = req.httpVersionMinor
  replayed.push(body)
  replayed.push(null)
  replayed.complete = true
  return replayed
}
