// The LangGraph adapter against a live vigil serve, with the real
// @langchain/langgraph and a scripted chat model (examples/support-graph.mjs).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { MemorySaver } from "@langchain/langgraph";
import { VigilClient } from "@vigilhq/client";
import { ThreadConflictError, VigilCheckpointer, invokeFenced, threadSessionKey } from "@vigilhq/langgraph";
import { buildSupportGraph } from "../examples/support-graph.mjs";
import { Gateway, OPERATOR, SUPPORT } from "../../testing/gateway.mjs";

const AGENT = "agent:support:main";
let gateway: Gateway;
before(async () => {
  gateway = await Gateway.start();
});
after(async () => {
  await gateway.stop();
});

const agentClient = () => new VigilClient(gateway.url, { token: SUPPORT, session: AGENT });
const newThread = () => `ticket-${randomUUID().slice(0, 8)}`;
const texts = (messages: BaseMessage[]) => messages.map((m) => String(m.content));
const PERSON = { vigil_person: "telegram:42", vigil_channel: "telegram" };

/** Checkpoint id -> how many checkpoints name it as their parent. */
async function childrenPerParent(saver: MemorySaver, threadId: string): Promise<{ count: number; children: Map<string, number>; ids: string[] }> {
  const children = new Map<string, number>();
  const ids: string[] = [];
  for await (const t of saver.list({ configurable: { thread_id: threadId } })) {
    ids.push(t.checkpoint.id);
    const parent = (t.parentConfig?.configurable?.["checkpoint_id"] as string | undefined) ?? "root";
    children.set(parent, (children.get(parent) ?? 0) + 1);
  }
  return { count: ids.length, children, ids };
}

/**
 * The race: the agent's run stores its input and waits on its model while
 * the person's run on the same thread goes to its end; then the agent's
 * model answers. `invokeAgent` runs the agent's side.
 */
async function race(agentSide: ReturnType<typeof buildSupportGraph>, personSide: ReturnType<typeof buildSupportGraph>,
  threadId: string, invokeAgent: () => Promise<unknown>) {
  let personDone!: () => void;
  agentSide.model.holdFirstAnswer(new Promise<void>((ok) => (personDone = ok)));
  const agentRun = invokeAgent();
  await agentSide.model.firstCall;
  await personSide.graph.invoke({ messages: [new HumanMessage("refund order 2")] },
    { configurable: { thread_id: threadId, ...PERSON }, durability: "sync" });
  personDone();
  await agentRun;
}

const refunds = (a: Map<string, number>, b: Map<string, number>) =>
  Object.fromEntries(["1", "2"].map((o) => [o, (a.get(o) ?? 0) + (b.get(o) ?? 0)]));

test("with the stock MemorySaver two writers fork the thread: a refund is issued twice and the person's message is lost", async () => {
  const saver = new MemorySaver();
  const agentSide = buildSupportGraph(saver);
  const personSide = buildSupportGraph(saver);
  const threadId = newThread();
  await race(agentSide, personSide, threadId, () =>
    agentSide.graph.invoke({ messages: [new HumanMessage("refund order 1")] }, { configurable: { thread_id: threadId }, durability: "sync" }));

  const { children } = await childrenPerParent(saver, threadId);
  assert.ok([...children.values()].some((n) => n === 2), "a checkpoint has two children: the chain forked");
  assert.deepEqual(refunds(agentSide.refunds, personSide.refunds), { "1": 2, "2": 0 }, "order 1 refunded by both writers");
  const state = await agentSide.graph.getState({ configurable: { thread_id: threadId } });
  assert.ok(!texts(state.values.messages).includes("refund order 2"), "the person's message is not in the thread");
});

test("with VigilCheckpointer nothing forks and nothing is lost: the refused writer is handed the change and the notice, and retries on top", async () => {
  const saver = new MemorySaver();
  const agentCp = new VigilCheckpointer(saver, { client: agentClient(), agentId: "support" });
  const personCp = new VigilCheckpointer(saver, { client: agentClient(), agentId: "support" });
  const agentSide = buildSupportGraph(agentCp);
  const personSide = buildSupportGraph(personCp);
  const threadId = newThread();
  const key = agentCp.sessionKeyOf(threadId);
  const conflicts: ThreadConflictError[] = [];
  await race(agentSide, personSide, threadId, () =>
    invokeFenced(agentSide.graph, { messages: [new HumanMessage("refund order 1")] }, { configurable: { thread_id: threadId } }, {
      checkpointer: agentCp,
      onConflict: (e) => void conflicts.push(e),
    }));

  // The agent's write was refused once, as a fork, with what happened.
  assert.equal(conflicts.length, 1);
  const change = conflicts[0]!.change;
  assert.equal(change.reason, "fork");
  assert.equal(change.refused.source, "loop", "its input was stored before the person's");
  assert.deepEqual([change.winner?.kind, change.winner?.actorType, change.winner?.actorId], ["human_direct_message", "human", "telegram:42"]);
  assert.equal(change.changes[0]?.sequence, change.winner?.sequence, "the changes start at the person's message");
  assert.equal(conflicts[0]!.stateVersion, change.stateVersion);
  // The person's message queued a notice for the agent, the threads' watcher;
  // the refusal carries it as vigil delivers it.
  const pending = await agentClient().sessionPending({ sessionKey: AGENT });
  const notice = pending.events?.find((e) => e.target === key);
  assert.ok(notice, "the agent has a notice about the thread");
  assert.equal(change.notice, notice.text);
  // The retry was told: its model's prompt starts with the notice.
  assert.ok(agentSide.model.prompts.some((p) => p[0]?.[0] === "system" && p[0][1].startsWith(notice.text!)));

  // No fork, both conversations in the thread, each refund issued once.
  const { children, count, ids } = await childrenPerParent(saver, threadId);
  assert.ok([...children.values()].every((n) => n === 1), "every checkpoint has at most one child");
  const state = await agentSide.graph.getState({ configurable: { thread_id: threadId } });
  const thread = texts(state.values.messages);
  assert.ok(thread.includes("refund order 1") && thread.includes("refund order 2"));
  assert.ok(thread.includes("refunded order 1") && thread.includes("refunded order 2"));
  assert.deepEqual(refunds(agentSide.refunds, personSide.refunds), { "1": 1, "2": 1 });

  // vigil recorded exactly the checkpoints the store holds.
  const { events } = await agentCp.changesSince(key, 0);
  assert.deepEqual(events.map((e) => e.runId).sort(), ids.map((id) => `langgraph:${id}`).sort());
  assert.equal(events.length, count);
});

test("a change made in vigil outside the graph refuses the next write once, and the graph is handed it before it retries", async () => {
  const saver = new MemorySaver();
  const cp = new VigilCheckpointer(saver, { client: agentClient(), agentId: "support" });
  const side = buildSupportGraph(cp);
  const threadId = newThread();
  const key = cp.sessionKeyOf(threadId);
  const config = { configurable: { thread_id: threadId } };
  await invokeFenced(side.graph, { messages: [new HumanMessage("refund order 1")] }, config, { checkpointer: cp });

  // A person writes into the thread through another channel, recorded in
  // vigil only: the agent, the thread's watcher, gets a notice.
  const person = new VigilClient(gateway.url, { token: OPERATOR });
  const rec = await person.sessionRecord({ sessionKey: key, kind: "human_direct_message", summary: "human message via email", parent: AGENT });
  assert.equal(rec.recorded, true);
  const notice = (await agentClient().sessionPending({ sessionKey: AGENT })).events?.find((e) => e.target === key);
  assert.ok(notice);

  const conflicts: ThreadConflictError[] = [];
  await invokeFenced(side.graph, { messages: [new HumanMessage("refund order 2")] }, config, {
    checkpointer: cp,
    onConflict: (e) => void conflicts.push(e),
  });
  assert.equal(conflicts.length, 1);
  const change = conflicts[0]!.change;
  assert.equal(change.reason, "changed");
  assert.equal(change.refused.source, "input", "refused before storing anything");
  assert.deepEqual(change.changes.map((e) => [e.sequence, e.kind, e.actorType, e.actorId]), [[rec.sequence, "human_direct_message", "human", "alice"]]);
  assert.equal(change.notice, notice.text);
  const told = side.model.prompts.find((p) => p[0]?.[0] === "system");
  assert.ok(told?.[0]?.[1].includes("human_direct_message by human alice: human message via email"));
  const state = await side.graph.getState(config);
  assert.equal(texts(state.values.messages).filter((t) => t === "refund order 2").length, 1, "the retried input is in the thread once");
  assert.deepEqual(refunds(side.refunds, new Map()), { "1": 1, "2": 1 });
});

test("a thread's next root checkpoint reads only what was recorded since the checkpointer last looked, not the thread's history from its start", async () => {
  const client = agentClient();
  const since: number[] = [];
  const status = client.sessionStatus.bind(client);
  client.sessionStatus = (input) => {
    if (typeof input.changesSince === "number") since.push(input.changesSince);
    return status(input);
  };
  const saver = new MemorySaver();
  const cp = new VigilCheckpointer(saver, { client, agentId: "support" });
  const side = buildSupportGraph(cp);
  const threadId = newThread();
  const config = { configurable: { thread_id: threadId } };
  const conflicts: ThreadConflictError[] = [];
  const run = (order: string) => invokeFenced(side.graph, { messages: [new HumanMessage(`refund order ${order}`)] }, config, {
    checkpointer: cp,
    onConflict: (e) => void conflicts.push(e),
  });
  // The first root checkpoint reads the thread from its start (empty
  // then); after a reset, the next one reads the run's records too.
  await run("1");
  await cp.deleteThread(threadId);
  await run("2");

  await cp.deleteThread(threadId);
  since.length = 0;
  await run("3");
  assert.ok(since.length > 0 && !since.includes(0), `read from ${JSON.stringify(since)}`);
  assert.deepEqual(conflicts, []);
  assert.deepEqual(Object.fromEntries(side.refunds), { "1": 1, "2": 1, "3": 1 });
});

test("a thread deleted through another checkpointer starts anew for this one too", async () => {
  const saver = new MemorySaver();
  const cp = new VigilCheckpointer(saver, { client: agentClient(), agentId: "support" });
  const other = new VigilCheckpointer(saver, { client: agentClient(), agentId: "support" });
  const side = buildSupportGraph(cp);
  const threadId = newThread();
  const config = { configurable: { thread_id: threadId } };
  await invokeFenced(side.graph, { messages: [new HumanMessage("refund order 1")] }, config, { checkpointer: cp });

  await other.deleteThread(threadId);
  const conflicts: ThreadConflictError[] = [];
  await invokeFenced(side.graph, { messages: [new HumanMessage("refund order 2")] }, config, {
    checkpointer: cp,
    onConflict: (e) => void conflicts.push(e),
  });
  assert.deepEqual(conflicts.map((e) => e.change.reason), [], "the new incarnation's first checkpoint is no fork of the old one's");
  const state = await side.graph.getState(config);
  assert.deepEqual(texts(state.values.messages).filter((t) => t.startsWith("refund order")), ["refund order 2"]);
});

test("a change recorded while a write is on its way to vigil refuses that very write", async () => {
  // The agent's record of its next input is held on its way to vigil
  // until a person's change has landed: the fence is in the record's own
  // write, so there is no window between a check and the record.
  let hold = false;
  let sent!: () => void;
  let release!: () => void;
  const onItsWay = new Promise<void>((ok) => (sent = ok));
  const released = new Promise<void>((ok) => (release = ok));
  const holding: typeof fetch = async (url, init) => {
    if (hold && String(url).endsWith("/v1/tools/session_record")) {
      hold = false;
      sent();
      await released;
    }
    return fetch(url, init);
  };
  const cp = new VigilCheckpointer(new MemorySaver(),
    { client: new VigilClient(gateway.url, { token: SUPPORT, session: AGENT, fetch: holding }), agentId: "support" });
  const side = buildSupportGraph(cp);
  const threadId = newThread();
  const config = { configurable: { thread_id: threadId } };
  await invokeFenced(side.graph, { messages: [new HumanMessage("refund order 1")] }, config, { checkpointer: cp });

  hold = true;
  const conflicts: ThreadConflictError[] = [];
  const run = invokeFenced(side.graph, { messages: [new HumanMessage("refund order 2")] }, config, {
    checkpointer: cp,
    onConflict: (e) => void conflicts.push(e),
  });
  await onItsWay;
  const person = new VigilClient(gateway.url, { token: OPERATOR });
  const rec = await person.sessionRecord({ sessionKey: cp.sessionKeyOf(threadId), kind: "goal_changed", summary: "goal updated" });
  release();
  await run;
  assert.equal(conflicts.length, 1, "the held write was refused");
  const change = conflicts[0]!.change;
  assert.equal(change.reason, "changed");
  assert.equal(change.refused.source, "input", "refused before storing anything");
  assert.deepEqual(change.changes.map((e) => [e.sequence, e.kind]), [[rec.sequence, "goal_changed"]]);
  const state = await side.graph.getState(config);
  assert.equal(texts(state.values.messages).filter((t) => t === "refund order 2").length, 1, "the retried input is in the thread once");
});

test("a refusal carries the pending notice of the watcher named as parent, not of the client's own session", async () => {
  const coordinator = "agent:support:coordinator";
  const cp = new VigilCheckpointer(new MemorySaver(), { client: agentClient(), agentId: "support", parent: coordinator });
  const side = buildSupportGraph(cp);
  const threadId = newThread();
  const key = cp.sessionKeyOf(threadId);
  const config = { configurable: { thread_id: threadId } };
  await invokeFenced(side.graph, { messages: [new HumanMessage("refund order 1")] }, config, { checkpointer: cp });

  const person = new VigilClient(gateway.url, { token: OPERATOR });
  await person.sessionRecord({ sessionKey: key, kind: "human_direct_message", summary: "human message via email", parent: coordinator });
  const notice = (await agentClient().as(coordinator).sessionPending({ sessionKey: coordinator })).events?.find((e) => e.target === key);
  assert.ok(notice, "the coordinator has a notice about the thread");

  const conflicts: ThreadConflictError[] = [];
  await invokeFenced(side.graph, { messages: [new HumanMessage("refund order 2")] }, config, {
    checkpointer: cp,
    onConflict: (e) => void conflicts.push(e),
  });
  assert.equal(conflicts.length, 1);
  assert.equal(conflicts[0]!.change.notice, notice.text);
});

test("a thread deleted in vigil refuses the graph's next write once, and the graph is handed the deletion before it retries", async () => {
  const saver = new MemorySaver();
  const cp = new VigilCheckpointer(saver, { client: agentClient(), agentId: "support" });
  const side = buildSupportGraph(cp);
  const threadId = newThread();
  const key = cp.sessionKeyOf(threadId);
  const config = { configurable: { thread_id: threadId } };
  // A person's input: the agent watches the thread from then on.
  await invokeFenced(side.graph, { messages: [new HumanMessage("refund order 1")] }, { configurable: { thread_id: threadId, ...PERSON } }, { checkpointer: cp });
  const before = (await agentClient().sessionStatus({ sessionKey: key })).stateVersion;

  await new VigilClient(gateway.url, { token: OPERATOR }).sessionDelete({ sessionKey: key });
  const notice = (await agentClient().sessionPending({ sessionKey: AGENT })).events?.find((e) => e.target === key);
  assert.equal(notice?.data?.type, "deleted");

  const conflicts: ThreadConflictError[] = [];
  await invokeFenced(side.graph, { messages: [new HumanMessage("refund order 2")] }, config, {
    checkpointer: cp,
    onConflict: (e) => void conflicts.push(e),
  });
  assert.equal(conflicts.length, 1, "refused once, then run on top of the deletion");
  const change = conflicts[0]!.change;
  assert.equal(change.reason, "changed");
  assert.equal(change.refused.source, "input", "refused before storing anything");
  assert.deepEqual([change.since, change.stateVersion, change.changes], [before, 0, []]);
  assert.equal(change.notice, notice.text);
  assert.ok(side.model.prompts.some((p) => p[0]?.[0] === "system" && p[0][1].startsWith(notice.text!)), "the retry's model was told");
  assert.deepEqual(refunds(side.refunds, new Map()), { "1": 1, "2": 1 });
});

test("each thread id maps to one session key vigil accepts; ids that are not plain lower case are hex-encoded", async () => {
  assert.equal(threadSessionKey("support", "ticket-42"), "agent:support:langgraph:ticket-42");
  assert.equal(threadSessionKey("support", "Ticket 42"), "agent:support:langgraph:hex:5469636b6574203432");
  assert.notEqual(threadSessionKey("support", "A"), threadSessionKey("support", "a"));
  assert.throws(() => threadSessionKey("support", ""), /thread_id/);
  assert.throws(() => threadSessionKey("sup:port", "t"), /agent id/);
  assert.throws(() => threadSessionKey("support", "x".repeat(600)), /longer than 512 bytes/);
  const st = await agentClient().sessionStatus({ sessionKey: threadSessionKey("support", "Ticket 42") });
  assert.equal(st.stateVersion, 0);
});

test("the example tells the two-writer story against a live gateway", async () => {
  const dir = fileURLToPath(new URL("../../../", import.meta.url)); // adapters/langgraph
  const { stdout } = await promisify(execFile)("node", ["examples/two-writers.mjs"], {
    cwd: dir, env: { ...process.env, VIGIL_ADDR: gateway.url, VIGIL_TOKEN: SUPPORT }, timeout: 60_000,
  });
  assert.match(stdout, /^refused: thread "ticket-\w+": another writer already extended this checkpoint \(human_direct_message by human telegram:42/m);
  assert.match(stdout, /^notice: Session "agent:support:langgraph:ticket-\w+" changed \(other actor\)\./m);
  assert.match(stdout, /^reconciled: #\d+ human_direct_message by human telegram:42: human message via telegram$/m);
  assert.match(stdout, /^refunds: order 1 x1, order 2 x1$/m);
  assert.match(stdout, /^checkpoints: \d+, each with its own parent: no fork$/m);
});

test("the example reaches a gateway at VIGIL_ADDR given as host:port, as the vigil CLI takes it", async () => {
  const dir = fileURLToPath(new URL("../../../", import.meta.url)); // adapters/langgraph
  const { stdout } = await promisify(execFile)("node", ["examples/two-writers.mjs"], {
    cwd: dir, env: { ...process.env, VIGIL_ADDR: new URL(gateway.url).host, VIGIL_TOKEN: SUPPORT }, timeout: 60_000,
  });
  assert.match(stdout, /^checkpoints: \d+, each with its own parent: no fork$/m);
});
