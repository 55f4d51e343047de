// A 2025-11-25 MCP client that runs a tool as a task, built with the TypeScript SDK's tasks support
// (@modelcontextprotocol/sdk `client.experimental.tasks`), for the tests.
//
// Run: node task_client.mjs [options] -- COMMAND ARGS...   (the server over stdio)
//      node task_client.mjs [options] --url URL            (the server over streamable HTTP)
// Options:
//   --call NAME --args JSON   the tool to call as a task (default: none, only list tools)
//   --ttl MS                  the ttl to ask for (default 60000)
//   --answer JSON             content to accept form-mode elicitations with (default {})
//   --action ACTION           accept (default), decline or cancel
//   --no-elicitation          declare no elicitation at all
//   --async-elicitation       declare tasks.requests.elicitation.create (elicitations run as tasks)
//   --cancel                  cancel the task right after creating it instead of waiting for its result
//   --foreign                 a second client (its own session) tries the first one's task: prints
//                             its errors for tasks/get, tasks/result, tasks/cancel, its tasks/list,
//                             and its own call of `echo`
//   --token T                 a bearer token for --url (the first client's)
//   --foreign-token T         the second client's bearer token
//   --foreign-url URL         the second client connects there (another replica) instead of --url
//   --foreign-ops LIST        what the second client does, in order (default get,result,cancel); it answers
//                             the questions it gets like the first (prints them as foreign.elicitations)
//   --more N                  after the first task, ask for N more the same way (prints `more`: each
//                             CreateTaskResult or error), then go on with the first
//   --get ID                  also ask tasks/get for ID (prints `got`: its result or error)
//   --plain                   a client that knows no tasks: declares no `tasks` capability and calls the tool
//                             with callTool (no task), following its progress (prints `progress`)
//   --sampling TEXT           declare sampling and answer sampling/createMessage with TEXT (prints `sampled`:
//                             the params received)
//   --roots                   declare roots and answer roots/list with one root, file:///work
//
// Unless --plain, the client declares tasks: {list, cancel} (it knows tasks).
//
// Prints one JSON line: {"capabilities": server capabilities, "tools": [{name, execution}], "created":
// CreateTaskResult | null, "statuses": [status seen by tasks/get polls, in order], "result": the
// tasks/result result | null, "error": {code, message, data} | null, "elicitations": [params received],
// "listed": [task ids of tasks/list], "cancelled": tasks/cancel result | null, "foreign": {...} | null,
// "more": [...], "got": {...} | null, "notified": [notifications/tasks/status params], "progress": [...],
// "messages": [statusMessage of each tasks/get answer], "sampled": [...], "rooted": [roots/list params received]}.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema, CreateMessageRequestSchema, CreateTaskResultSchema, ElicitRequestSchema,
  ListRootsRequestSchema, TaskStatusNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

function parseArgs(argv) {
  const dash = argv.indexOf('--');
  const opts = { command: dash >= 0 ? argv.slice(dash + 1) : [], flags: new Set() };
  const own = dash >= 0 ? argv.slice(0, dash) : argv;
  for (let i = 0; i < own.length; i++) {
    const key = own[i].replace(/^--/, '');
    if (['async-elicitation', 'cancel', 'foreign', 'no-elicitation', 'plain', 'roots'].includes(key)) opts.flags.add(key);
    else opts[key] = own[++i];
  }
  return opts;
}

const opts = parseArgs(process.argv.slice(2));
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

function errorOf(error) {
  return { code: error.code ?? null, message: error.message, data: error.data ?? null };
}

async function connect(name, elicitations, token, notified = [], url = opts.url) {
  const capabilities = opts.flags.has('no-elicitation') ? {} : { elicitation: { form: {} } };
  if (!opts.flags.has('plain')) capabilities.tasks = { list: {}, cancel: {} };
  if (opts.flags.has('async-elicitation')) capabilities.tasks = { requests: { elicitation: { create: {} } } };
  if (opts.sampling !== undefined) capabilities.sampling = {};
  if (opts.flags.has('roots')) capabilities.roots = {};
  const client = new Client({ name, version: '1.0.0' }, { capabilities });
  if (capabilities.sampling) client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
    sampled.push(request.params);
    return { role: 'assistant', content: { type: 'text', text: opts.sampling }, model: 'ts-task-client' };
  });
  if (capabilities.roots) client.setRequestHandler(ListRootsRequestSchema, async (request) => {
    rooted.push(request.params ?? {});
    return { roots: [{ uri: 'file:///work', name: 'work' }] };
  });
  if (capabilities.elicitation) client.setRequestHandler(ElicitRequestSchema, async (request) => {
    elicitations.push(request.params);
    const action = opts.action ?? 'accept';
    if (action !== 'accept') return { action };
    return { action, content: JSON.parse(opts.answer ?? '{}') };
  });
  client.setNotificationHandler(TaskStatusNotificationSchema, (notification) => {
    notified.push(notification.params);
  });
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const transport = url
    ? new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } })
    : new StdioClientTransport({ command: opts.command[0], args: opts.command.slice(1), env: process.env });
  await client.connect(transport);
  return client;
}

async function attempt(run) {
  try {
    return { ok: await run() };
  } catch (error) {
    return { error: errorOf(error) };
  }
}

const elicitations = [];
const notified = [];
const sampled = [];
const rooted = [];
const messages = [];
const client = await connect('ts-task-client', elicitations, opts.token, notified);
const output = {
  capabilities: client.getServerCapabilities() ?? null,
  tools: [], created: null, statuses: [], result: null, error: null, elicitations, listed: [], cancelled: null,
  foreign: null, more: [], got: null, notified, progress: [], messages, sampled, rooted,
};
const callAsTask = () => client.request(
  { method: 'tools/call', params: { name: opts.call, arguments: JSON.parse(opts.args ?? '{}'), task: { ttl: Number(opts.ttl ?? 60000) } } },
  CreateTaskResultSchema,
);
if (opts.get) output.got = await attempt(() => client.experimental.tasks.getTask(opts.get));
output.tools = (await client.listTools()).tools.map((tool) => ({ name: tool.name, execution: tool.execution ?? null }));
if (opts.call && opts.flags.has('plain')) {
  try {
    output.result = await client.callTool(
      { name: opts.call, arguments: JSON.parse(opts.args ?? '{}') }, CallToolResultSchema,
      { onprogress: (progress) => output.progress.push(progress), timeout: 120000 },
    );
  } catch (error) {
    output.error = errorOf(error);
  }
} else if (opts.call) {
  try {
    const created = await callAsTask();
    output.created = created;
    for (let i = 0; i < Number(opts.more ?? 0); i++) output.more.push(await attempt(callAsTask));
    const taskId = created.task.taskId;
    output.listed = (await client.experimental.tasks.listTasks()).tasks.map((task) => task.taskId);
    if (opts.flags.has('foreign')) {
      const foreignElicitations = [];
      const other = await connect('ts-task-intruder', foreignElicitations, opts['foreign-token'], [],
        opts['foreign-url'] ?? opts.url);
      const ops = {
        get: () => other.experimental.tasks.getTask(taskId),
        result: () => other.experimental.tasks.getTaskResult(taskId, CallToolResultSchema),
        cancel: () => other.experimental.tasks.cancelTask(taskId),
      };
      output.foreign = { elicitations: foreignElicitations };
      for (const op of (opts['foreign-ops'] ?? 'get,result,cancel').split(',')) output.foreign[op] = await attempt(ops[op]);
      output.foreign.listedTasks = (await other.experimental.tasks.listTasks()).tasks;
      output.foreign.listed = output.foreign.listedTasks.map((task) => task.taskId);
      // A call of its own meanwhile (an upstream session of its own, through a gateway).
      output.foreign.call = await attempt(() => other.callTool({ name: 'echo', arguments: { message: 'hi' } }));
      await other.close();
    }
    if (opts.flags.has('cancel')) {
      output.cancelled = await client.experimental.tasks.cancelTask(taskId);
      output.statuses.push((await client.experimental.tasks.getTask(taskId)).status);
    } else {
      // Poll until the task waits for input or ends (the spec's input_required: call tasks/result).
      for (;;) {
        const task = await client.experimental.tasks.getTask(taskId);
        if (output.statuses.at(-1) !== task.status) output.statuses.push(task.status);
        if (task.statusMessage !== undefined && messages.at(-1) !== task.statusMessage) messages.push(task.statusMessage);
        if (task.status === 'input_required' || TERMINAL.has(task.status)) break;
        await new Promise((resolve) => setTimeout(resolve, Math.min(task.pollInterval ?? 200, 200)));
      }
      output.result = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
      const last = await client.experimental.tasks.getTask(taskId);
      if (output.statuses.at(-1) !== last.status) output.statuses.push(last.status);
      if (last.statusMessage !== undefined && messages.at(-1) !== last.statusMessage) messages.push(last.statusMessage);
    }
  } catch (error) {
    output.error = errorOf(error);
  }
}
await client.close();
process.stdout.write(JSON.stringify(output) + '\n');
