// An upstream written the way the TypeScript SDK's own examples write servers, with everything the MCP
// conformance server suite calls (its data from the JSON that tests/conformance/run.py writes from
// tests/conformance/fixtures.py).
//
// Run: node everything_server.mjs --fixtures FILE [--http PORT]   (stdio without --http)
//
// As in the SDK's examples (toolWithSampleServer, elicitationFormExample), tools ask with
// `server.elicitInput(...)` and `server.createMessage(...)` without `relatedRequestId`: over streamable
// HTTP those requests travel on the session's standalone GET stream, tied to no POST. Log messages and
// progress go with the request (`extra.sendNotification`). One Server per HTTP session, behind the
// SDK's Express app (DNS-rebinding protection for localhost).
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';
import {
  CallToolRequestSchema,
  CompleteRequestSchema,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
  SetLevelRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  isInitializeRequest,
} from '@modelcontextprotocol/sdk/types.js';

const arg = (name) => {
  const at = process.argv.indexOf(name);
  return at >= 0 ? process.argv[at + 1] : undefined;
};
const fx = JSON.parse(readFileSync(arg('--fixtures'), 'utf8'));
const text = (value, isError = false) => ({ content: [{ type: 'text', text: value }], ...(isError ? { isError } : {}) });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'];

function getServer() {
  const server = new Server(
    { name: 'ts-everything-server', version: '1.0.0' },
    { capabilities: { tools: {}, resources: { subscribe: true }, prompts: {}, logging: {}, completions: {} } },
  );
  let level = 'debug';
  const subscriptions = new Set();

  const log = async (extra, data) => {
    if (LEVELS.indexOf('info') >= LEVELS.indexOf(level)) {
      await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', logger: 'conformance', data } });
    }
  };

  const elicit = async (message, requestedSchema) => {
    const result = await server.elicitInput({ mode: 'form', message, requestedSchema });
    return text(`Elicitation completed: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`);
  };

  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: Object.entries(fx.tools).map(([name, [description, inputSchema]]) => ({ name, description, inputSchema })),
  }));

  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const { name, arguments: args = {} } = request.params;
    switch (name) {
      case 'test_simple_text':
        return text('This is a simple text response for testing.');
      case 'test_image_content':
        return { content: [{ type: 'image', data: fx.image, mimeType: 'image/png' }] };
      case 'test_audio_content':
        return { content: [{ type: 'audio', data: fx.audio, mimeType: 'audio/wav' }] };
      case 'test_embedded_resource':
        return {
          content: [{ type: 'resource', resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' } }],
        };
      case 'test_multiple_content_types':
        return {
          content: [
            { type: 'text', text: 'Multiple content types test:' },
            { type: 'image', data: fx.image, mimeType: 'image/png' },
            { type: 'resource', resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: '{"test":"data","value":123}' } },
          ],
        };
      case 'test_tool_with_logging':
        for (const [step, message] of ['Tool execution started', 'Tool processing data', 'Tool execution completed'].entries()) {
          if (step) await sleep(50);
          await log(extra, message);
        }
        return text('Tool with logging executed successfully');
      case 'test_tool_with_progress': {
        const progressToken = request.params._meta?.progressToken;
        for (const [step, progress] of [0, 50, 100].entries()) {
          if (step) await sleep(50);
          if (progressToken !== undefined) {
            await extra.sendNotification({
              method: 'notifications/progress',
              params: { progressToken, progress, total: 100, message: `Completed step ${progress} of 100` },
            });
          }
        }
        return text(String(progressToken ?? 0));
      }
      case 'test_error_handling':
        return text('This tool intentionally returns an error for testing', true);
      case 'test_reconnection':
        await log(extra, 'Before disconnect');
        await sleep(200);
        await log(extra, 'After reconnect');
        return text('Reconnection test completed (stream kept)');
      case 'test_sampling': {
        const response = await server.createMessage({
          messages: [{ role: 'user', content: { type: 'text', text: String(args.prompt ?? '') } }],
          maxTokens: 100,
        });
        return text(`LLM response: ${response.content.type === 'text' ? response.content.text : 'No response'}`);
      }
      case 'test_elicitation':
        return elicit(String(args.message ?? 'Please provide your information'), fx.userInfoSchema);
      case 'json_schema_2020_12_tool':
        return text(`JSON Schema 2020-12 tool called with: ${JSON.stringify(args, Object.keys(args).sort())}`);
      default:
        if (fx.elicitations[name]) return elicit(...fx.elicitations[name]);
        throw new Error(`Unknown tool: ${name}`);
    }
  });

  server.setRequestHandler(ListResourcesRequestSchema, async () => ({
    resources: Object.entries(fx.resources).map(([uri, [name, description, mimeType]]) => ({ uri, name, description, mimeType })),
  }));
  server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({
    resourceTemplates: [{ uriTemplate: fx.template, name: 'template', description: 'Parameter substitution', mimeType: 'application/json' }],
  }));
  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    const { uri } = request.params;
    if (uri === 'test://static-text') return { contents: [{ uri, mimeType: 'text/plain', text: fx.staticText }] };
    if (uri === 'test://static-binary') return { contents: [{ uri, mimeType: 'image/png', blob: fx.image }] };
    if (uri === 'test://watched-resource') return { contents: [{ uri, mimeType: 'text/plain', text: fx.watchedText }] };
    const [prefix, suffix] = fx.templateParts;
    if (uri.startsWith(prefix) && uri.endsWith(suffix)) {
      const id = uri.slice(prefix.length, uri.length - suffix.length);
      return { contents: [{ uri, mimeType: 'application/json', text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) }] };
    }
    throw new Error(`Resource not found: ${uri}`);
  });
  server.setRequestHandler(SubscribeRequestSchema, async (request) => {
    subscriptions.add(request.params.uri);
    return {};
  });
  server.setRequestHandler(UnsubscribeRequestSchema, async (request) => {
    subscriptions.delete(request.params.uri);
    return {};
  });

  server.setRequestHandler(ListPromptsRequestSchema, async () => ({
    prompts: Object.entries(fx.prompts).map(([name, [description, args]]) => ({
      name,
      description,
      ...(args.length ? { arguments: args.map(([argName, argDescription]) => ({ name: argName, description: argDescription, required: true })) } : {}),
    })),
  }));
  server.setRequestHandler(GetPromptRequestSchema, async (request) => {
    const { name, arguments: args = {} } = request.params;
    const user = (content) => ({ role: 'user', content });
    switch (name) {
      case 'test_simple_prompt':
        return { messages: [user({ type: 'text', text: 'This is a simple prompt for testing.' })] };
      case 'test_prompt_with_arguments':
        return { messages: [user({ type: 'text', text: `Prompt with arguments: arg1='${args.arg1}', arg2='${args.arg2}'` })] };
      case 'test_prompt_with_embedded_resource':
        return {
          messages: [
            user({ type: 'resource', resource: { uri: args.resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } }),
            user({ type: 'text', text: 'Please process the embedded resource above.' }),
          ],
        };
      case 'test_prompt_with_image':
        return {
          messages: [user({ type: 'image', data: fx.image, mimeType: 'image/png' }), user({ type: 'text', text: 'Please analyze the image above.' })],
        };
      default:
        throw new Error(`Unknown prompt: ${name}`);
    }
  });
  server.setRequestHandler(CompleteRequestSchema, async () => ({ completion: { values: [], total: 0, hasMore: false } }));
  server.setRequestHandler(SetLevelRequestSchema, async (request) => {
    level = request.params.level;
    return {};
  });
  return server;
}

async function serveHttp(port) {
  const app = createMcpExpressApp();
  const transports = {};
  app.post('/mcp', async (req, res) => {
    const sessionId = req.headers['mcp-session-id'];
    let transport = sessionId ? transports[sessionId] : undefined;
    if (!transport && !sessionId && isInitializeRequest(req.body)) {
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        eventStore: new InMemoryEventStore(),
        onsessioninitialized: (id) => {
          transports[id] = transport;
        },
      });
      transport.onclose = () => delete transports[transport.sessionId];
      await getServer().connect(transport);
    }
    if (!transport) {
      return res.status(400).json({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: No valid session ID provided' }, id: null });
    }
    await transport.handleRequest(req, res, req.body);
  });
  const existing = async (req, res) => {
    const transport = transports[req.headers['mcp-session-id']];
    if (!transport) return res.status(400).send('Invalid or missing session ID');
    await transport.handleRequest(req, res);
  };
  app.get('/mcp', existing);
  app.delete('/mcp', existing);
  app.listen(port, '127.0.0.1');
}

const port = arg('--http');
if (port) {
  await serveHttp(Number(port));
} else {
  await getServer().connect(new StdioServerTransport());
}
