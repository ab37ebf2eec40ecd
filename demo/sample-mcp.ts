// The sample app's MCP server at /mcp (streamable HTTP, stateless): what an agent (Claude Code, VS
// Code, a CLI) reaches through a route with `agents: true`. One tool, `whoami`, answers with the
// person the gateway says the agent acts for (its identity headers), so that a try-out shows the
// whole path: the agent's token at the gateway, the person's identity at the app.
import type { IncomingMessage, ServerResponse } from 'node:http'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'

/** The path the sample app serves its MCP server at (the route's path, no rewritePrefix). */
export const MCP_PATH = '/mcp'

/** Answers one request of the MCP server, a fresh server and transport per request (stateless). */
export function serveMcp (request: IncomingMessage, response: ServerResponse): void {
  const server = new McpServer({ name: 'demo-sample-app', version: '1.0.0' })
  server.registerTool('whoami', { description: 'Who the gateway says this agent acts for' }, async () => ({
    content: [{
      type: 'text',
      text: JSON.stringify({ user: request.headers['x-forwarded-user'] ?? null, email: request.headers['x-forwarded-email'] ?? null }),
    }],
  }))
  // JSON answers (not an event stream): readable as they come in a try-out with curl.
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true })
  response.on('close', () => { void transport.close(); void server.close() })
  server.connect(transport).then(async () => { await transport.handleRequest(request, response) }, (error: unknown) => { response.destroy(error as Error) })
}
