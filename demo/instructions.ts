// What `npm run demo:provider` prints: the provider's address, its client and accounts, then the
// `providers:` and `routes:` blocks and the environment for the operator's own gateway.yaml, ready
// to paste, the machine client with a line that gets a token and calls the gateway (./machine.ts),
// and how agents reach the sample app's MCP server through the gateway (./sample-mcp.ts). Every value the operator needs is printed; none is generated where they cannot see it.
import { demoAccounts } from './authorization-server.js'
import { machineRoutesYaml, machineText } from './machine.js'
import { DEMO_CLIENT_ID, DEMO_PROVIDER, shellWord } from './options.js'
import { MCP_PATH } from './sample-mcp.js'

export interface LocalProvider {
  issuer: string
  clientSecret: string
  gatewayUrls: string[]
  appUrl: string
  rememberSignIn: boolean
  /** Lifetime of the machine client's access tokens, in seconds. */
  tokenTtl: number
}

function accountLines (): string[] {
  return demoAccounts().map((account) => {
    const groups = account.groups as string[]
    const verified = account.email_verified === true ? '' : ', not verified'
    return `${String(account.sub).padEnd(8)} ${String(account.email)}${verified}; groups: ${groups.length > 0 ? groups.join(', ') : 'none'}`
  }).concat('any other name signs in too, as <name>@example.test (no password)')
}

/** The gateway.yaml blocks, with the provider's values as `${VAR}` (see {@link gatewayEnvironment}). */
export function gatewayYaml (appUrl: string): string {
  return `providers:
  ${DEMO_PROVIDER}:
    issuer: \${DEMO_ISSUER}
    clientId: \${DEMO_CLIENT_ID}
    clientSecret: \${DEMO_CLIENT_SECRET}
    scope: "openid profile email groups"

routes:
  - path: /app/
    upstream: ${appUrl}   # the sample app; or your own application (it gets /app/...)
    provider: ${DEMO_PROVIDER}
${machineRoutesYaml(appUrl)}  - path: ${MCP_PATH}                      # the sample app's MCP server: agents sign in through the gateway
    upstream: ${appUrl}
    provider: ${DEMO_PROVIDER}
    agents: true

agents:
  deviceFlow: true                  # CLIs without a browser: a code entered on /oauth/agents/device
`
}

/** What the operator's gateway offers agents (MCP clients, CLIs) on the printed `/mcp` route. */
function agentsText (gatewayUrl: string): string {
  return `  Agents (MCP clients, CLIs) on ${MCP_PATH}: the gateway is their authorization server; people sign in here.
    Claude Code   claude mcp add --transport http demo ${gatewayUrl}${MCP_PATH}
    a CLI         the device flow: docs/agents.md, "Try it on your machine"
`
}

/** The `export` line that gives {@link gatewayYaml}'s variables their values. */
export function gatewayEnvironment (issuer: string, clientSecret: string): string {
  return `export DEMO_ISSUER=${shellWord(issuer)} DEMO_CLIENT_ID=${shellWord(DEMO_CLIENT_ID)} DEMO_CLIENT_SECRET=${shellWord(clientSecret)}`
}

export function localProviderText (provider: LocalProvider): string {
  const indent = (lines: string[]) => lines.join('\n                  ')
  const remember = provider.rememberSignIn
    ? 'It keeps your sign-in, as real providers do (--no-remember-sign-in asks every time).'
    : 'It asks for a user name at every sign-in (--remember-sign-in keeps it, as real providers do).'
  return `
  Local provider running. ${remember}
  It keeps everything in memory, on purpose: a restart forgets its sign-ins and tokens.
    issuer        ${provider.issuer}
    client id     ${DEMO_CLIENT_ID}
    client secret ${provider.clientSecret}
    callbacks     ${indent(provider.gatewayUrls.map((url) => `${url}/oauth/authorized/${DEMO_PROVIDER}/`))}
    sample app    ${provider.appUrl}  (an upstream to put behind your gateway)
    accounts      ${indent(accountLines())}

  For your gateway.yaml (the provider's name, ${DEMO_PROVIDER}, is part of the callback):

${gatewayYaml(provider.appUrl)}
  and the gateway's environment:

${gatewayEnvironment(provider.issuer, provider.clientSecret)}

${machineText(provider.issuer, provider.gatewayUrls[0]!, provider.tokenTtl)}
${agentsText(provider.gatewayUrls[0]!)}
  Ctrl-C stops it.
\n`
}
