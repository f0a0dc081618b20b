// The seed's story over A2A with the official JavaScript SDK as the
// client: the coordinator spawns a worker and keeps the stream open, a
// person writes into the worker, the coordinator is told once (one status
// update carrying stateVersion) and reconciles exactly with tasks/get.
// Usage: node story.mjs <base URL> <coordinator token> <operator token>
import { A2AClient } from "@a2a-js/sdk/client";

const [base, coordToken, personToken] = process.argv.slice(2);
const manager = "agent:main:main";

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
    console.error(`FAIL: ${what}: ${JSON.stringify(got)}`);
    process.exit(1);
  }
  console.log(`ok: ${what}`);
}

// The legacy client answers with the JSON-RPC response; take its result.
function result(r) {
  if (r && r.error) {
    console.error(`FAIL: JSON-RPC error ${JSON.stringify(r.error)}`);
    process.exit(1);
  }
  return r && "result" in r ? r.result : r;
}

const cardUrl = `${base}/.well-known/agent-card.json`;
const coord = await A2AClient.fromCardUrl(cardUrl, { fetchImpl: as(coordToken, manager) });
const person = await A2AClient.fromCardUrl(cardUrl, { fetchImpl: as(personToken) });
const card = await (await fetch(cardUrl)).json();
check(card.protocolVersion === "0.3.0" && card.capabilities.streaming === true, "agent card speaks A2A 0.3.0 with streaming", card);

const stream = coord.sendMessageStream({
  message: { kind: "message", messageId: crypto.randomUUID(), role: "user", parts: [{ kind: "text", text: "summarise the quarterly report" }] },
})[Symbol.asyncIterator]();
const first = (await stream.next()).value;
const child = first.id;
check(first.kind === "task" && child.startsWith("agent:main:subagent:") && first.metadata.stateVersion === 2,
  "spawn answers with the child's task at state version 2 (created, then child_spawned)", first);

const sent = result(await person.sendMessage({
  message: { kind: "message", messageId: crypto.randomUUID(), role: "user", taskId: child,
    parts: [{ kind: "text", text: "use the Q3 numbers, not Q2" }] },
}));
check(sent.metadata.sendStatus === "accepted" && sent.metadata.stateVersion === 3, "the person's message is accepted", sent);

const up = (await stream.next()).value;
check(up.kind === "status-update" && up.taskId === child && up.metadata.vigilEvent === "notice" &&
  up.metadata.stateVersion === 3 && up.metadata.changesSince === 2, "the coordinator is told, with stateVersion 3", up);

const task = result(await coord.getTask({ id: child, metadata: { changesSince: up.metadata.changesSince } }));
const changes = task.metadata.stateChanges;
check(changes.events.length === 1 && changes.events[0].kind === "human_direct_message" &&
  changes.events[0].actorId === "alice" && changes.historyGap === false,
  "tasks/get with changesSince lists exactly the person's message", changes);

// A cross-agent attempt is refused: another agent's token cannot read it.
const ops = await A2AClient.fromCardUrl(cardUrl, { fetchImpl: as(process.env.OPS_TOKEN) });
let refused;
try {
  const r = await ops.getTask({ id: child });
  refused = r.error;
} catch (e) {
  refused = { message: String(e) };
}
check(refused && JSON.stringify(refused).includes("cannot reach"), "another agent's read is refused", refused);

// A resubscribe from version 1 is told of the gap.
const again = coord.resubscribeTask({ id: child, metadata: { stateVersion: 1 } })[Symbol.asyncIterator]();
const snap = (await again.next()).value;
const gap = (await again.next()).value;
check(snap.kind === "task" && gap.kind === "status-update" && gap.metadata.gap === true && gap.metadata.changesSince === 1,
  "a resubscribe after a gap says so", gap);

await stream.return?.();
await again.return?.();
console.log("the story passes over A2A");
process.exit(0);
