// MCP tasks (the io.modelcontextprotocol/tasks extension of 2026-07-28)
// driven by the official TypeScript SDK against a running `vigil serve`:
// @modelcontextprotocol/client on 2026-07-28 with the extension's own
// requester, @modelcontextprotocol/ext-tasks. A coordinator's send to its
// child runs as a task, which the client follows through a
// subscriptions/listen for it and settles with the child's reply; a
// session_wait run as a task is cancelled and consumes nothing, as the
// next one shows.
//
// Usage: node tasks.mjs
// Environment: VIGIL_URL, VIGIL_AGENT (the coordinator's agent: it acts as
// that agent's main session), VIGIL_AGENT_TOKEN, VIGIL_OPERATOR_TOKEN (a
// person's token). The run wants an agent of its own.
//
// The SDK's client decodes only the results it knows, and a task is not
// one of them, so ext-tasks has its host send the requests that may
// answer a task (tools/call, tasks/*) itself: rawDispatch below posts
// them to /mcp as the transport would, with the same headers.
//
// It prints one "ok" or "not ok" line a step and exits 1 when any step
// failed. Every wait is bounded.

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createTaskSessionFromClient, resultFromTaskOutcome } from '@modelcontextprotocol/ext-tasks/client';
import { readAcceptedTaskIdsV2 } from '@modelcontextprotocol/ext-tasks/core/v2';

const revision = '2026-07-28';
const tasksExtension = 'io.modelcontextprotocol/tasks';
const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const base = env('VIGIL_URL');
const agentToken = env('VIGIL_AGENT_TOKEN');
const operatorToken = env('VIGIL_OPERATOR_TOKEN');
const manager = `agent:${env('VIGIL_AGENT')}:main`;
const hangGuardMs = 20000;

let failed = 0;
function check(what, ok, detail) {
  console.log(`${ok ? 'ok' : 'not ok'} - ${what}${ok || detail === undefined ? '' : ': ' + JSON.stringify(detail)}`);
  if (!ok) failed++;
  return ok;
}

function bounded(promise, what) {
  let timer;
  const guard = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within the hang guard`)), hangGuardMs);
  });
  return Promise.race([promise, guard]).finally(() => clearTimeout(timer));
}

// api calls a tool over vigil's HTTP API.
async function api(token, session, tool, input) {
  const headers = { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' };
  if (session) headers['Vigil-Session'] = session;
  const resp = await fetch(`${base}/v1/tools/${tool}`, {
    method: 'POST', headers, body: JSON.stringify(input), signal: AbortSignal.timeout(hangGuardMs),
  });
  const body = await resp.json();
  if (resp.status !== 200) throw new Error(`${tool} answered ${resp.status} ${JSON.stringify(body)}`);
  return body;
}

// rawDispatch posts one request to /mcp as the coordinator and returns its
// answer as ext-tasks wants it. The answer is plain JSON, or an event
// stream whose response to this request is the answer.
let nextId = 1;
async function rawDispatch(request, options = {}) {
  const id = `tasks-${nextId++}`;
  const name = request.method === 'tools/call' ? request.params?.name : request.params?.taskId;
  const headers = {
    ...(options.context?.headers ?? {}),
    Authorization: `Bearer ${agentToken}`,
    'Vigil-Session': manager,
    'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream',
    'Mcp-Protocol-Version': revision,
    'Mcp-Method': request.method,
  };
  if (name !== undefined) headers['Mcp-Name'] = name;
  const resp = await fetch(`${base}/mcp`, {
    method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id, ...request }),
    signal: options.signal ?? AbortSignal.timeout(hangGuardMs),
  });
  const text = await resp.text();
  const messages = (resp.headers.get('content-type') ?? '').startsWith('text/event-stream')
    ? text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)))
    : [JSON.parse(text)];
  const answer = messages.find((m) => m.id === id);
  if (answer === undefined) throw new Error(`${request.method} answered ${resp.status} without a response: ${text}`);
  return answer.error !== undefined ? { kind: 'error', error: answer.error } : { kind: 'result', result: answer.result };
}

// spyAcks keeps the params of each listen acknowledgement the transport
// hands the client: the SDK's own view of one keeps only the filters it
// knows, which taskIds is not.
function spyAcks(transport, acks) {
  let inner;
  Object.defineProperty(transport, 'onmessage', {
    configurable: true,
    get: () => inner,
    set: (f) => {
      inner = f && ((msg, extra) => {
        if (msg.method === 'notifications/subscriptions/acknowledged') acks.push(msg.params);
        return f(msg, extra);
      });
    },
  });
  return transport;
}

async function main() {
  const acks = [];
  const transport = spyAcks(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${agentToken}`, 'Vigil-Session': manager } },
  }), acks);
  // The client declares the extension, which a listen for tasks needs; it
  // makes its waiting calls through ext-tasks only.
  const client = new Client({ name: 'vigil-interop-tasks', version: '1' }, {
    versionNegotiation: { mode: { pin: revision } },
    capabilities: { extensions: { [tasksExtension]: {} } },
  });
  const told = [];
  client.fallbackNotificationHandler = async (n) => {
    if (n.method === 'notifications/tasks') told.push(n.params);
  };
  await bounded(client.connect(transport), 'connect');
  const session = createTaskSessionFromClient(client, {
    endpointId: 'vigil-interop-tasks',
    rawDispatch,
    v2RequestFraming: { protocolVersion: revision, clientInfo: { name: 'vigil-interop-tasks', version: '1' }, clientCapabilities: {} },
  });
  try {
    console.log(`# @modelcontextprotocol/client and @modelcontextprotocol/ext-tasks on ${revision} over http`);
    const caps = client.getServerCapabilities();
    check('server/discover declares the tasks extension', JSON.stringify(caps?.extensions?.[tasksExtension]) === '{}', caps);

    const spawn = await bounded(client.callTool({ name: 'sessions_spawn', arguments: { task: 'draft the Q3 report' } }), 'sessions_spawn');
    const child = spawn.structuredContent?.childSessionKey;
    if (!check('the coordinator spawns a child', !spawn.isError && typeof child === 'string', spawn)) return;

    // A send that waits for the reply runs as a task.
    const send = await bounded(session.callTool('sessions_send',
      { sessionKey: child, message: 'which figures?', timeoutSeconds: 60 }, { task: { preference: 'require' } }), 'sessions_send');
    if (!check('the waiting send is a task', send.kind === 'task' && typeof send.handle?.taskId === 'string', send.kind)) return;
    const taskId = send.handle.taskId;
    const listen = await bounded(client.listen({ taskIds: [taskId] }), 'subscriptions/listen');
    const honoured = acks.map(readAcceptedTaskIdsV2);
    check('subscriptions/listen honours the task', JSON.stringify(honoured) === JSON.stringify([[taskId]]), acks);

    await api(agentToken, child, 'session_reply', { sessionKey: child, text: 'the Q3 ones' });
    const settled = await bounded(send.settle(), 'the send task settling');
    const result = resultFromTaskOutcome(settled.outcome);
    check('the task completes with the reply', settled.outcome.status === 'completed' && result.structuredContent?.status === 'ok' &&
      result.structuredContent?.reply === 'the Q3 ones', settled.outcome);
    const heard = told.find((t) => t.taskId === taskId);
    check('the listen told the task completed, with its result', heard?.status === 'completed' &&
      heard?.result?.structuredContent?.reply === 'the Q3 ones', told);
    await listen.close();

    // A session_wait run as a task, cancelled, consumes nothing.
    const wait = await bounded(session.callTool('session_wait', { timeoutSeconds: 60 }, { task: { preference: 'require' } }), 'session_wait');
    if (!check('the waiting session_wait is a task', wait.kind === 'task', wait.kind)) return;
    await bounded(wait.cancel(), 'tasks/cancel');
    const cancelled = await bounded(wait.result(), 'the cancelled task');
    check('tasks/cancel cancels it', cancelled.status === 'cancelled', cancelled);

    await api(operatorToken, '', 'sessions_send', { sessionKey: child, message: 'use the revised figures', timeoutSeconds: 0 });
    const next = await bounded(session.callTool('session_wait', { timeoutSeconds: 30 }, { task: { preference: 'require' } }), 'session_wait');
    const turn = resultFromTaskOutcome((await bounded(next.settle(), 'the next wait settling')).outcome).structuredContent ?? {};
    const events = turn.systemEvents ?? [];
    check('the next session_wait task gets the notice the cancelled one left', turn.timedOut === false && events.length === 1 &&
      events[0].startsWith(`Session ${JSON.stringify(child)} changed (other actor).`), turn);
  } finally {
    await session.close().catch(() => {});
    await client.close().catch(() => {});
  }
}

try {
  await main();
} catch (err) {
  check('the tasks story ran to its end', false, String(err?.stack ?? err));
}
console.log(failed === 0 ? '# tasks: passed' : `# tasks: ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
