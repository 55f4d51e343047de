// An MCP client built with the TypeScript SDK (@modelcontextprotocol/sdk), for the tests.
//
// Run: node elicit_client.mjs [options] -- COMMAND ARGS...   (the server over stdio)
//      node elicit_client.mjs [options] --url URL            (the server over streamable HTTP)
// Options:
//   --call NAME --args JSON   the tool to call (default: none, only list tools)
//   --answer JSON             content to accept form-mode elicitations with (default {})
//   --action ACTION           accept (default), decline or cancel
//   --modes form,url          the elicitation modes to declare (default form)
//   --wait-complete           after the call, wait for one notifications/elicitation/complete
//
// Prints one JSON line: {"tools": [names], "result": CallToolResult | null, "error": {code, message,
// data} | null, "elicitations": [params received], "rawElicitations": [params as on the wire, fields the
// SDK does not model (`ui`) included], "completions": [notification params]}.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitationCompleteNotificationSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

function parseArgs(argv) {
  const dash = argv.indexOf('--');
  const opts = { command: dash >= 0 ? argv.slice(dash + 1) : [], flags: new Set() };
  const own = dash >= 0 ? argv.slice(0, dash) : argv;
  for (let i = 0; i < own.length; i++) {
    const key = own[i].replace(/^--/, '');
    if (key === 'wait-complete') opts.flags.add(key);
    else opts[key] = own[++i];
  }
  return opts;
}

const opts = parseArgs(process.argv.slice(2));
const modes = (opts.modes ?? 'form').split(',');
const elicitations = [];
const rawElicitations = [];
const completions = [];
let completed;
const completion = new Promise((resolve) => (completed = resolve));

const client = new Client(
  { name: 'ts-elicit-client', version: '1.0.0' },
  { capabilities: { elicitation: Object.fromEntries(modes.map((mode) => [mode, {}])) } },
);
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  elicitations.push(request.params);
  const action = opts.action ?? 'accept';
  if (action !== 'accept' || request.params.mode === 'url') return { action };
  return { action, content: JSON.parse(opts.answer ?? '{}') };
});
client.setNotificationHandler(ElicitationCompleteNotificationSchema, (notification) => {
  completions.push(notification.params);
  completed();
});

const transport = opts.url
  ? new StreamableHTTPClientTransport(new URL(opts.url))
  : new StdioClientTransport({ command: opts.command[0], args: opts.command.slice(1), env: process.env });
await client.connect(transport);
// What a client that renders `ui` itself reads: the message before the SDK's schema strips unknown fields.
const onmessage = transport.onmessage;
transport.onmessage = (message, extra) => {
  if (message.method === 'elicitation/create') rawElicitations.push(message.params);
  onmessage(message, extra);
};

const output = { tools: [], result: null, error: null, elicitations, rawElicitations, completions };
output.tools = (await client.listTools()).tools.map((tool) => tool.name);
if (opts.call) {
  try {
    output.result = await client.callTool({ name: opts.call, arguments: JSON.parse(opts.args ?? '{}') });
  } catch (error) {
    output.error = { code: error.code ?? null, message: error.message, data: error.data ?? null };
  }
}
if (opts.flags.has('wait-complete')) await completion;
await client.close();
process.stdout.write(JSON.stringify(output) + '\n');
