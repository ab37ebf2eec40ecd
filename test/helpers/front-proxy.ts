// The forward-auth tests' nginx and Caddy: demo/front-proxy.ts (which `npm run demo -- --forward-auth`
// runs too), and docs/deployment.md's nginx block in front of the gateway.
import { readFile } from 'node:fs/promises'
import { frontBinary, holdFrontPort, runFront, type FrontAddresses, type FrontProxy } from '../../demo/front-proxy.js'

export { FRONT_TEMPLATES, frontBinary, holdFrontPort, startFrontProxy, type FrontKind, type FrontProxy, type HeldPort } from '../../demo/front-proxy.js'

/**
 * docs/deployment.md's nginx server block in front of the gateway (`gateway`: its host:port), as
 * written there, on a held loopback port without TLS (the block's certificate lines left out).
 */
export async function startNginxInFront (gateway: string): Promise<FrontProxy> {
  const binary = frontBinary('nginx')
  if (!binary) throw new Error('nginx is not installed (.ci/run installs it)')
  const held = await holdFrontPort()
  const addresses: FrontAddresses = { port: held.port, gateway, upstream: gateway }
  const docs = await readFile('docs/deployment.md', 'utf8')
  const block = /A minimal nginx server block:\n\n```nginx\n([\s\S]*?)```/.exec(docs)?.[1]
  if (block === undefined) throw new Error('docs/deployment.md no longer has its minimal nginx server block')
  let config = block.replace(/^\s*ssl_certificate.*\n/gm, '')
  const replacements: Array<[string, string]> = [
    ['listen 443 ssl;', `listen 127.0.0.1:${held.port} default_server;`],
    ['server_name gateway.example.com;', 'server_name 127.0.0.1;'],
    ['X-Forwarded-Host gateway.example.com;', `X-Forwarded-Host 127.0.0.1:${held.port};`],
    ['127.0.0.1:8080', gateway],
  ]
  for (const [from, to] of replacements) {
    if (!config.includes(from)) throw new Error(`docs/deployment.md's nginx block no longer contains "${from}"`)
    config = config.replaceAll(from, to)
  }
  return await runFront('nginx', binary, config, addresses, held)
}
