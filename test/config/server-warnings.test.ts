// A loopback baseUrl whose port is not the listening port: sign-ins would send browsers to a port
// nothing answers on. Warned only where nothing can stand between (plain http, no trusted proxy).
import { describe, expect, it } from 'vitest'
import { baseUrlPortWarnings, pickedPortWarnings } from '../../src/config/server-warnings.js'
import type { GatewayConfig } from '../../src/config/types.js'

const server = (baseUrl: string, port: number, trustProxy: boolean | string[] = false) => ({ baseUrl, port, trustProxy }) as unknown as GatewayConfig['server']

describe('server.baseUrl and server.port', () => {
  it.each([
    ['http://localhost:8080', 8081, 'port 8080, but the gateway listens on port 8081'],
    ['http://127.0.0.1:8080', 9000, 'port 8080, but the gateway listens on port 9000'],
    ['http://localhost', 8080, 'port 80, but the gateway listens on port 8080'],
    ['http://[::1]:8080', 8081, 'port 8080, but the gateway listens on port 8081'],
    ['http://app.localhost:3000', 8080, 'port 3000, but the gateway listens on port 8080'],
  ])('%s with port %i: warns', (baseUrl, port, says) => {
    const [warning, ...rest] = baseUrlPortWarnings(server(baseUrl, port))
    expect(rest).toEqual([])
    expect(warning).toContain(says)
  })

  it.each([
    ['the same port', server('http://localhost:8080', 8080)],
    ['port 80 for both', server('http://localhost', 80)],
    ['https: a TLS proxy in front', server('https://localhost:8443', 8080)],
    ['a trusted proxy in front', server('http://localhost:8443', 8080, ['loopback'])],
    ['trustProxy: true', server('http://localhost:8443', 8080, true)],
    ['a public host (a proxy or a port mapping decides)', server('http://gateway.example.com:8080', 3000)],
    ['port 0: any port the OS gives', server('http://localhost:8080', 0)],
  ])('%s: no warning', (_name, given) => {
    expect(baseUrlPortWarnings(given)).toEqual([])
  })

  // Port 0 is told once listening, with the port the OS picked.
  it.each([
    [server('http://localhost:8080', 0), 41000, 'port 8080, but the gateway listens on port 41000, which the OS picked'],
    [server('http://localhost', 0), 41000, 'port 80, but the gateway listens on port 41000, which the OS picked'],
  ])('port 0, picked %#: warns', (given, picked, says) => {
    expect(pickedPortWarnings(given, picked)).toEqual([expect.stringContaining(says)])
  })

  it.each([
    ['the picked port is baseUrl\'s', server('http://localhost:41000', 0), 41000],
    ['a fixed port: --check told it already', server('http://localhost:8080', 8081), 8081],
    ['https: a TLS proxy in front', server('https://localhost:8443', 0), 41000],
    ['a trusted proxy in front', server('http://localhost:8443', 0, ['loopback']), 41000],
  ])('%s: no warning once listening', (_name, given, picked) => {
    expect(pickedPortWarnings(given, picked)).toEqual([])
  })
})
