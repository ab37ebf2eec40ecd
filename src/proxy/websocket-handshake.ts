// A client's websocket handshake, judged as `ws` judges it (WebSocketServer.handleUpgrade, RFC 6455
// section 4.2.1) before the upstream's leg is opened: a handshake ws would refuse once the upstream
// had answered its own (a key that is no 16 bytes in base64, a version other than 13 or 8, a
// sub-protocol list it cannot read) would have reached the upstream's application for nothing, as a
// connection opened and closed at once. test/proxy/websocket-handshake.test.ts holds the two
// judgements together: whatever this one lets through, ws accepts.

/** Sec-WebSocket-Key: 16 bytes in base64 (ws's own pattern). */
const KEY = /^[+/0-9A-Za-z]{22}==$/
/** One sub-protocol name: an RFC 7230 token, with the blanks ws allows around it (none before the first). */
const FIRST_PROTOCOL = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+)[ \t]*$/
const NEXT_PROTOCOL = /^[ \t]*([!#$%&'*+\-.^_`|~0-9A-Za-z]+)[ \t]*$/

/** What a handshake needs: its method and headers as Node parsed them. */
export interface Handshake {
  readonly method?: string | undefined
  readonly headers: { readonly [name: string]: string | string[] | undefined }
}

/** Why ws would refuse this handshake (a sentence for the 400), or undefined when it would accept it. */
export function handshakeProblem ({ method, headers }: Handshake): string | undefined {
  if (method !== 'GET') return 'A websocket handshake is a GET request.'
  const upgrade = headers.upgrade
  if (typeof upgrade !== 'string' || upgrade.toLowerCase() !== 'websocket') return 'A websocket handshake has "Upgrade: websocket".'
  const key = headers['sec-websocket-key']
  if (typeof key !== 'string' || !KEY.test(key)) return 'The Sec-WebSocket-Key header is missing or is not 16 bytes in base64.'
  // As ws reads it: `+value`, so " 13" and "13.0" are 13 and a repeated header ("13, 13") is not.
  const version = Number(headers['sec-websocket-version'])
  if (version !== 13 && version !== 8) return 'The Sec-WebSocket-Version header is missing or is not 13.'
  if (offeredProtocols(headers['sec-websocket-protocol']) === undefined) return 'The Sec-WebSocket-Protocol header is not a list of distinct sub-protocol names.'
  return undefined
}

/**
 * The sub-protocols a handshake offers (Sec-WebSocket-Protocol), in its order: what the upstream's
 * leg offers in turn. Undefined when ws could not read the list: distinct tokens separated by
 * commas, blanks allowed around each but not before the first or after the last.
 */
export function offeredProtocols (header: string | string[] | undefined): string[] | undefined {
  if (header === undefined) return []
  if (typeof header !== 'string' || /[ \t]$/.test(header)) return undefined
  const names: string[] = []
  for (const [i, item] of header.split(',').entries()) {
    const name = (i === 0 ? FIRST_PROTOCOL : NEXT_PROTOCOL).exec(item)?.[1]
    if (name === undefined || names.includes(name)) return undefined
    names.push(name)
  }
  return names
}
