// An upstream MCP server built with the TypeScript SDK (@modelcontextprotocol/sdk), for the tests.
//
// Run: node elicit_server.mjs [--http PORT] [--standalone-stream]
//   (stdio by default; streamable HTTP at /mcp with --http)
//
// Tools:
//   echo {text}        -> text
//   ask_form {message?} -> one form-mode elicitation (name, age, color); the ElicitResult as JSON text
//   ask_url {url?, elicitationId?, complete?}
//                      -> one URL-mode elicitation; the ElicitResult as JSON text. With complete=true
//                         it sends notifications/elicitation/complete after an accept.
//   environment        -> the names of the environment variables this process got, as JSON
//   remove {path}      (annotated destructiveHint) -> "removed <path>"
//
// Elicitations are sent with `relatedRequestId` = the tool call's id, so over streamable HTTP they
// travel on that call's POST response stream (without it the SDK sends them on the standalone GET
// stream, which ties them to no call). --standalone-stream leaves it out for `ask_form`, as the SDK's
// own examples do.
const STANDALONE = process.argv.includes('--standalone-stream');
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

const FORM_SCHEMA = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1 },
    age: { type: 'integer', minimum: 0 },
    color: { type: 'string', enum: ['red', 'green'] },
  },
  required: ['name'],
};

const json = (value) => ({ content: [{ type: 'text', text: JSON.stringify(value) }] });

function build() {
  const server = new McpServer({ name: 'ts-elicit-server', version: '1.0.0' });
  server.registerTool('echo', { inputSchema: { text: z.string() } }, async ({ text }) => ({
    content: [{ type: 'text', text }],
  }));
  server.registerTool('environment', {}, async () => json(Object.keys(process.env).sort()));
  server.registerTool(
    'remove',
    { description: 'Remove a file', inputSchema: { path: z.string().describe('What to remove') }, annotations: { destructiveHint: true } },
    async ({ path }) => ({ content: [{ type: 'text', text: `removed ${path}` }] }),
  );
  server.registerTool('ask_form', { inputSchema: { message: z.string().optional() } }, async ({ message }, extra) => {
    const request = { mode: 'form', message: message ?? 'Who are you?', requestedSchema: FORM_SCHEMA };
    const options = STANDALONE ? {} : { relatedRequestId: extra.requestId };
    return json(await server.server.elicitInput(request, options));
  });
  server.registerTool(
    'ask_url',
    {
      inputSchema: { url: z.string().optional(), elicitationId: z.string().optional(), complete: z.boolean().optional() },
    },
    async ({ url, elicitationId, complete }, extra) => {
      const id = elicitationId ?? 'ts-url-1';
      const request = { mode: 'url', message: 'Sign in', url: url ?? 'https://example.com/login', elicitationId: id };
      const options = { relatedRequestId: extra.requestId };
      const result = await server.server.elicitInput(request, options);
      if (complete && result.action === 'accept') {
        await server.server.createElicitationCompletionNotifier(id, options)();
      }
      return json(result);
    },
  );
  return server;
}

async function serveHttp(port) {
  const sessions = new Map(); // session id -> transport; one McpServer per session
  const http = createServer(async (req, res) => {
    if (!req.url.startsWith('/mcp')) return res.writeHead(404).end();
    let transport = sessions.get(req.headers['mcp-session-id']);
    if (!transport) {
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: randomUUID,
        onsessioninitialized: (id) => sessions.set(id, transport),
      });
      transport.onclose = () => sessions.delete(transport.sessionId);
      await build().connect(transport);
    }
    await transport.handleRequest(req, res);
  });
  http.listen(port, '127.0.0.1');
}

const httpAt = process.argv.indexOf('--http');
if (httpAt >= 0) {
  await serveHttp(Number(process.argv[httpAt + 1]));
} else {
  await build().connect(new StdioServerTransport());
}
