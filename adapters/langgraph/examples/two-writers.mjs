// Two writers on one LangGraph thread, fenced by vigil.
//
// The support agent's run on a ticket has stored its input and waits on its
// (scripted, slow) model; meanwhile a person's message to the same ticket
// arrives through another process and runs to its end. Both processes keep
// their checkpoints in one store (here a MemorySaver they share). Without
// vigil the agent's next checkpoint would fork the thread and one of the
// two conversations would be lost; with VigilCheckpointer its write is
// refused, it is told what changed (and the notice vigil queued for the
// agent), and it runs again on top of the person's turn.
//
//   VIGIL_ADDR=http://127.0.0.1:7317 VIGIL_TOKEN=<agent token of "support"> node examples/two-writers.mjs
import { randomUUID } from "node:crypto";
import { HumanMessage } from "@langchain/core/messages";
import { MemorySaver } from "@langchain/langgraph";
import { VigilClient } from "@vigilhq/client";
import { VigilCheckpointer, invokeFenced } from "@vigilhq/langgraph";
import { buildSupportGraph, describeChange } from "./support-graph.mjs";

// The gateway: VIGIL_ADDR, as the vigil CLI reads it (host:port, or a URL);
// VIGIL_URL, its older name, still works, with a note that it is deprecated.
function gatewayAddress() {
  let addr = process.env.VIGIL_ADDR;
  if (!addr && process.env.VIGIL_URL) {
    console.error("VIGIL_URL is deprecated; set VIGIL_ADDR instead");
    addr = process.env.VIGIL_URL;
  }
  addr ||= "127.0.0.1:7317";
  return addr.includes("://") ? addr : `http://${addr}`;
}

const client = new VigilClient(gatewayAddress(), {
  token: process.env.VIGIL_TOKEN,
  session: "agent:support:main", // the agent: the actor of its checkpoints, and the watcher of its threads
});
const saver = new MemorySaver(); // the checkpoint store both processes share
const agentCp = new VigilCheckpointer(saver, { client, agentId: "support" });
const personCp = new VigilCheckpointer(saver, { client, agentId: "support" });
const agentSide = buildSupportGraph(agentCp);
const personSide = buildSupportGraph(personCp);

const threadId = `ticket-${randomUUID().slice(0, 8)}`;
console.log(`thread ${threadId} is vigil session ${agentCp.sessionKeyOf(threadId)}`);

let personDone;
agentSide.model.holdFirstAnswer(new Promise((ok) => (personDone = ok)));
const agentRun = invokeFenced(agentSide.graph, { messages: [new HumanMessage("refund order 1")] }, { configurable: { thread_id: threadId } }, {
  checkpointer: agentCp,
  onConflict(err) {
    const change = err.change;
    console.log(`refused: ${err.detail}`);
    if (change.notice) console.log(`notice: ${change.notice}`);
    for (const line of describeChange(change).split("\n").slice(1)) console.log(`reconciled: ${line}`);
  },
});

await agentSide.model.firstCall;
console.log('agent: run started for "refund order 1"; a person writes "refund order 2" meanwhile');
await personSide.graph.invoke({ messages: [new HumanMessage("refund order 2")] },
  { configurable: { thread_id: threadId, vigil_person: "telegram:42", vigil_channel: "telegram" }, durability: "sync" });
console.log("person: run finished");
personDone();
await agentRun;

const told = agentSide.model.prompts.find((p) => p[0][0] === "system");
console.log(`agent: ran again on top; its model was told: ${told ? told[0][1].split("\n")[0] : "nothing"}`);
const state = await agentSide.graph.getState({ configurable: { thread_id: threadId } });
for (const m of state.values.messages) console.log(`thread: ${m.getType()}: ${m.content || JSON.stringify(m.tool_calls)}`);
const refunds = [...new Map([...agentSide.refunds, ...personSide.refunds].map(([k]) => [k, (agentSide.refunds.get(k) ?? 0) + (personSide.refunds.get(k) ?? 0)]))]
  .sort().map(([order, n]) => `order ${order} x${n}`);
console.log(`refunds: ${refunds.join(", ")}`);
const parents = new Map();
let count = 0;
for await (const t of saver.list({ configurable: { thread_id: threadId } })) {
  count++;
  const p = t.parentConfig?.configurable?.checkpoint_id ?? "none";
  parents.set(p, (parents.get(p) ?? 0) + 1);
}
const forked = [...parents.values()].some((n) => n > 1);
console.log(`checkpoints: ${count}, ${forked ? "FORKED: a checkpoint has two children" : "each with its own parent: no fork"}`);
