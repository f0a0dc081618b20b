// One conversation of the OpenAI Agents SDK, fenced by vigil.
//
// A person talks to the support agent from their phone; while the agent's
// (scripted, slow) model works on their second message, the same person
// writes from their laptop, through another process keeping the same
// conversation store. The phone's turn is then a write on a stale picture:
// VigilSession refuses it (StaleSessionError, nothing stored); the app
// runs the turn again, and the agent is told what changed before its input.
// The agent's session, which watches the conversation, has a notice.
//
//   VIGIL_ADDR=http://127.0.0.1:7317 VIGIL_TOKEN=<agent token of "support", recordHuman> node examples/conversation.mjs
import { randomUUID } from "node:crypto";
import { MemorySession, Runner } from "@openai/agents";
import { VigilClient } from "@vigilhq/client";
import { StaleSessionError, VigilSession } from "@vigilhq/openai-agents";
import { supportAgent } from "./support-agent.mjs";

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
  session: "agent:support:main", // the agent: actor of its turns, watcher of its conversations
});
const sessionKey = `agent:support:chat:c-${randomUUID().slice(0, 8)}`;
const store = new MemorySession(); // the conversation store both processes share
const phone = new VigilSession({ client, sessionKey, store, person: { id: "telegram:42", channel: "telegram" } });
const laptop = new VigilSession({ client, sessionKey, store, person: { id: "telegram:42", channel: "web" } });
const phoneSide = supportAgent();
const laptopSide = supportAgent();
const runner = new Runner({ tracingDisabled: true });
console.log(`conversation is vigil session ${sessionKey}`);

await runner.run(phoneSide.agent, "Hi, I ordered the blue lamp.", { session: phone });
const pending = await client.sessionPending({ sessionKey: "agent:support:main" });
console.log(`notice: ${pending.events.find((e) => e.target === sessionKey)?.text ?? "none"}`);

let laptopDone;
phoneSide.holdFirstAnswer(new Promise((ok) => (laptopDone = ok)));
const phoneTurn = runner.run(phoneSide.agent, "Please ship it to my office instead.", { session: phone });
await phoneSide.firstCall;
await runner.run(laptopSide.agent, "Actually, cancel the order.", { session: laptop });
console.log("laptop: turn stored");
laptopDone();
try {
  await phoneTurn;
  console.log("phone: turn stored (not expected)");
} catch (err) {
  if (!(err instanceof StaleSessionError)) throw err;
  console.log(`refused: ${err.detail}`);
  for (const e of err.change.changes) console.log(`reconciled: #${e.sequence} ${e.kind} by ${e.actorType} ${e.actorId}: ${e.summary}`);
  // The app's handling: run the turn again, on the new history.
  await runner.run(phoneSide.agent, "Please ship it to my office instead.", { session: phone });
  const told = phoneSide.requests.at(-1).find((i) => i.role === "system");
  console.log(`phone: ran again; before its input the model was told: ${told ? told.content.split("\n").slice(1).join(" / ") : "nothing"}`);
}
for (const item of await store.getItems()) {
  const content = typeof item.content === "string" ? item.content : item.content.map((c) => c.text).join("");
  console.log(`history: ${item.role}: ${content}`);
}
