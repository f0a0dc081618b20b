// The seed's story over A2A 1.0 with the official JavaScript SDK 1.x as
// the client: the coordinator spawns a worker and keeps the stream open, a
// person writes into the worker, the coordinator is told once (one status
// update carrying stateVersion) and reconciles exactly with GetTask; then
// ListTasks, a cross-agent read refused, a subscription after a gap, and
// (with an admin token) a push config created, listed and deleted.
//
// Usage: node story10.mjs <base URL> <coordinator token> <operator token> <plain|compat>
//   plain:  the SDK as it comes (A2A 1.0 only);
//   compat: its 0.3 compatibility layer switched on (card resolver and
//           transport factory), which must still choose 1.0 against vigil;
//           then the layer's own 0.3 transport plays the story's first
//           steps over vigil's 0.3 interface.
// OPS_TOKEN and ADMIN_TOKEN name another agent's and an admin's tokens.
import { Client, ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } from "@a2a-js/sdk/client";
import { LegacyJsonRpcTransport } from "@a2a-js/sdk/compat/v0_3/client";
import { Role, TaskState } from "@a2a-js/sdk";

const [base, coordToken, personToken, mode] = process.argv.slice(2);
const manager = "agent:main:main";
const compat = mode === "compat" ? { legacyCompat: { enabled: true } } : {};

function as(token, session) {
  return (url, init = {}) => {
    const headers = new Headers(init.headers);
    headers.set("Authorization", `Bearer ${token}`);
    if (session) headers.set("Vigil-Session", session);
    return fetch(url, { ...init, headers });
  };
}

function check(ok, what, got) {
  if (!ok) {
    console.error(`FAIL (${mode}): ${what}: ${JSON.stringify(got)}`);
    process.exit(1);
  }
  console.log(`ok (${mode}): ${what}`);
}

async function clientFor(token, session) {
  const fetchImpl = as(token, session);
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    cardResolver: new DefaultAgentCardResolver({ fetchImpl, ...compat }),
    transports: [new JsonRpcTransportFactory({ fetchImpl, ...compat })],
  }));
  return factory.createFromUrl(base);
}

function text(s, taskId) {
  return { message: { messageId: crypto.randomUUID(), role: Role.ROLE_USER, taskId: taskId ?? "", parts: [{ content: { $case: "text", value: s } }] } };
}

const coord = await clientFor(coordToken, manager);
const person = await clientFor(personToken);
check(coord.protocolVersion === "1.0", "the client chose vigil's A2A 1.0 interface", coord.protocolVersion);

const stream = coord.sendMessageStream(text("summarise the quarterly report"))[Symbol.asyncIterator]();
const first = (await stream.next()).value;
check(first?.payload?.$case === "task", "the stream starts with the task", first);
const child = first.payload.value.id;
check(child.startsWith("agent:main:subagent:") && first.payload.value.metadata.stateVersion === 2 &&
  first.payload.value.status.state === TaskState.TASK_STATE_WORKING,
  "spawn answers with the child's task at state version 2 (created, then child_spawned), working", first.payload.value);

const sent = await person.sendMessage(text("use the Q3 numbers, not Q2", child));
check(sent.metadata?.sendStatus === "accepted" && sent.metadata?.stateVersion === 3, "the person's message is accepted", sent);

const up = (await stream.next()).value;
check(up?.payload?.$case === "statusUpdate" && up.payload.value.taskId === child && up.payload.value.metadata.vigilEvent === "notice" &&
  up.payload.value.metadata.stateVersion === 3 && up.payload.value.metadata.changesSince === 2,
  "the coordinator is told, with stateVersion 3", up);

const task = await coord.getTask({ id: child }, { serviceParameters: { "Vigil-Changes-Since": String(up.payload.value.metadata.changesSince) } });
const changes = task.metadata.stateChanges;
check(changes.events.length === 1 && changes.events[0].kind === "human_direct_message" && changes.events[0].actorId === "alice" &&
  changes.historyGap === false, "GetTask with Vigil-Changes-Since lists exactly the person's message", changes);

// The SDK encodes what it is given as is: every field is spelled out.
const listed = await coord.listTasks({ tenant: "", contextId: "", status: TaskState.TASK_STATE_UNSPECIFIED, pageSize: 10, pageToken: "" });
check(listed.tasks.length === 2 && listed.tasks[0].id === child && listed.totalSize === 2 && listed.nextPageToken === "",
  "ListTasks gives the coordinator's tasks, the worker first", listed);

const ops = await clientFor(process.env.OPS_TOKEN);
let refused;
try {
  await ops.getTask({ id: child });
} catch (e) {
  refused = String(e?.message ?? e);
}
check(refused && refused.includes("cannot reach"), "another agent's read is refused", refused);

const again = coord.resubscribeTask({ id: child }, { serviceParameters: { "Vigil-State-Version": "1" } })[Symbol.asyncIterator]();
const snap = (await again.next()).value;
const gap = (await again.next()).value;
check(snap?.payload?.$case === "task" && gap?.payload?.$case === "statusUpdate" && gap.payload.value.metadata.gap === true &&
  gap.payload.value.metadata.changesSince === 1, "a subscription after a gap says so", gap);
await stream.return?.();
await again.return?.();

const admin = await clientFor(process.env.ADMIN_TOKEN);
const created = await admin.createTaskPushNotificationConfig({ taskId: child, id: "ci-hook", url: "http://127.0.0.1:9/hook",
  token: "a-push-secret-of-some-length" });
check(created.id === "ci-hook" && created.taskId === child && !created.token, "a push config is created, its token not shown back", created);
const configs = await admin.listTaskPushNotificationConfig({ taskId: child });
check(configs.configs.length === 1 && configs.configs[0].id === "ci-hook", "the push config is listed", configs);
await admin.deleteTaskPushNotificationConfig({ taskId: child, id: "ci-hook" });
const none = await admin.listTaskPushNotificationConfig({ taskId: child });
check(none.configs.length === 0, "the deleted push config is gone", none);

if (mode === "compat") {
  // The compatibility layer's own 0.3 transport, against vigil's 0.3
  // interface: the same operations, in the 0.3 wire shapes.
  const card = await (await fetch(`${base}/.well-known/agent-card.json`)).json();
  const legacy = (token, session) => new Client(new LegacyJsonRpcTransport({ endpoint: `${base}/a2a`, fetchImpl: as(token, session) }), card);
  const lcoord = legacy(coordToken, manager);
  check(lcoord.protocolVersion === "0.3", "the compatibility layer's transport speaks 0.3", lcoord.protocolVersion);
  const lstream = lcoord.sendMessageStream(text("a second worker"))[Symbol.asyncIterator]();
  const lfirst = (await lstream.next()).value;
  check(lfirst?.payload?.$case === "task" && lfirst.payload.value.id.startsWith("agent:main:subagent:"),
    "over 0.3, spawn answers with the task", lfirst);
  const lchild = lfirst.payload.value.id;
  const v0 = lfirst.payload.value.metadata.stateVersion;
  await legacy(personToken).sendMessage(text("over 0.3: a person's word", lchild));
  const lup = (await lstream.next()).value;
  check(lup?.payload?.$case === "statusUpdate" && lup.payload.value.taskId === lchild && lup.payload.value.metadata.vigilEvent === "notice" &&
    lup.payload.value.metadata.changesSince === v0 && lup.payload.value.metadata.stateVersion > v0, "over 0.3, the coordinator is told", lup);
  await lstream.return?.();
}

console.log(`the story passes over A2A 1.0 (${mode})`);
process.exit(0);
