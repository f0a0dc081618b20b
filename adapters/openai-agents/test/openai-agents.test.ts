// The OpenAI Agents SDK adapter against a live vigil serve, with the real
// Runner and the SDK's ScriptedModel (examples/support-agent.mjs).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { MemorySession, Runner, type AgentInputItem } from "@openai/agents";
import { ConflictError, VigilClient } from "@vigilhq/client";
import { StaleSessionError, VigilSession } from "@vigilhq/openai-agents";
import { supportAgent } from "../examples/support-agent.mjs";
import { Gateway, OPERATOR, SUPPORT } from "../../testing/gateway.mjs";

const AGENT = "agent:support:main";
const PERSON = { id: "telegram:42", channel: "telegram" };
let gateway: Gateway;
before(async () => {
  gateway = await Gateway.start();
});
after(async () => {
  await gateway.stop();
});

const client = (fetchImpl?: typeof fetch) =>
  new VigilClient(gateway.url, fetchImpl ? { token: SUPPORT, session: AGENT, fetch: fetchImpl } : { token: SUPPORT, session: AGENT });
const newKey = () => `agent:support:chat:c-${randomUUID().slice(0, 8)}`;
const runner = new Runner({ tracingDisabled: true });
const said = (items: AgentInputItem[]) => items.map((i) => {
  const m = i as { role?: string; content?: unknown };
  const content = typeof m.content === "string" ? m.content : (m.content as { text?: string }[]).map((c) => c.text ?? "").join("");
  return `${m.role}: ${content}`;
});
/** One conversation in one store, written from a phone and from a laptop by the same person. */
const phoneAndLaptop = () => {
  const key = newKey();
  const store = new MemorySession();
  const phone = new VigilSession({ client: client(), sessionKey: key, store, person: PERSON });
  const laptop = new VigilSession({ client: client(), sessionKey: key, store, person: { id: "telegram:42", channel: "web" } });
  return { key, store, phone, laptop };
};
const changesOf = async (key: string) =>
  (await client().sessionStatus({ sessionKey: key, changesSince: 0 })).stateChanges?.events?.map((e) => [e.kind, e.actorType, e.actorId, e.summary]);

test("a person's message is recorded in vigil, and the conversation's watcher gets a notice", async () => {
  const key = newKey();
  const session = new VigilSession({ client: client(), sessionKey: key, person: PERSON });
  const side = supportAgent();
  await runner.run(side.agent, "Hi, I ordered the blue lamp.", { session });

  assert.deepEqual(await changesOf(key), [["human_direct_message", "human", "telegram:42", "human message via telegram"]]);
  const notice = (await client().sessionPending({ sessionKey: AGENT })).events?.find((e) => e.target === key);
  assert.ok(notice?.text?.startsWith(`Session "${key}" changed (other actor).`));
  assert.deepEqual(said(await session.store.getItems()), ["user: Hi, I ordered the blue lamp.", "assistant: Noted: Hi, I ordered the blue lamp."]);
});

test("a turn written on a stale picture is refused and stores nothing; run again, the model is told what changed right before its input", async () => {
  const { key, store, phone, laptop } = phoneAndLaptop();
  const phoneSide = supportAgent();
  const laptopSide = supportAgent();
  await runner.run(phoneSide.agent, "Hi, I ordered the blue lamp.", { session: phone });
  const seen = phone.lastSeenVersion!;

  let laptopDone!: () => void;
  phoneSide.holdFirstAnswer(new Promise<void>((ok) => (laptopDone = ok)));
  const phoneTurn = runner.run(phoneSide.agent, "Please ship it to my office instead.", { session: phone });
  await phoneSide.firstCall;
  await runner.run(laptopSide.agent, "Actually, cancel the order.", { session: laptop });
  laptopDone();
  const err = await phoneTurn.then(() => assert.fail("the stale turn was stored"), (e: unknown) => e);
  assert.ok(err instanceof StaleSessionError, `got ${String(err)}`);
  assert.ok(err instanceof ConflictError, "one handler serves the gateway's conflicts and this one");
  assert.equal(err.change.since, seen);
  assert.deepEqual(err.change.changes.map((e) => [e.kind, e.actorId, e.summary]), [["human_direct_message", "telegram:42", "human message via web"]]);
  assert.equal(err.stateVersion, err.change.changes[0]!.sequence);
  const notice = (await client().sessionPending({ sessionKey: AGENT })).events?.find((e) => e.target === key);
  assert.equal(err.notice, notice?.text);
  assert.deepEqual(said(await store.getItems()).slice(2), ["user: Actually, cancel the order.", "assistant: Noted: Actually, cancel the order."],
    "the refused turn stored nothing");

  await runner.run(phoneSide.agent, "Please ship it to my office instead.", { session: phone });
  const input = phoneSide.requests.at(-1) as AgentInputItem[];
  const system = input.at(-2) as { role: string; content: string };
  assert.equal(system.role, "system", "the change comes right before the turn's input");
  assert.equal(system.content, `${notice?.text}\n#${err.stateVersion} human_direct_message by human telegram:42: human message via web`);
  assert.deepEqual(said([input.at(-1)!]), ["user: Please ship it to my office instead."]);
  assert.deepEqual(said(await store.getItems()), [
    "user: Hi, I ordered the blue lamp.", "assistant: Noted: Hi, I ordered the blue lamp.",
    "user: Actually, cancel the order.", "assistant: Noted: Actually, cancel the order.",
    "user: Please ship it to my office instead.", "assistant: Noted: Please ship it to my office instead.",
  ], "the told system line is not stored");
});

test("of two writers that read the same version and write at once, vigil stores the one that lands first and refuses the other", async () => {
  const key = newKey();
  const store = new MemorySession();
  // The first writer's record is sent, and held until the second has written.
  let release!: () => void;
  const released = new Promise<void>((ok) => (release = ok));
  let checked!: () => void;
  const firstChecked = new Promise<void>((ok) => (checked = ok));
  const holding: typeof fetch = async (url, init) => {
    if (String(url).endsWith("/v1/tools/session_record")) {
      checked();
      await released;
    }
    return fetch(url, init);
  };
  const first = new VigilSession({ client: client(holding), sessionKey: key, store, person: PERSON });
  const second = new VigilSession({ client: client(), sessionKey: key, store, person: PERSON });
  await first.getItems();
  await second.getItems();
  const firstWrite = first.addItems([{ type: "message", role: "user", content: "first" }]);
  await firstChecked;
  await second.addItems([{ type: "message", role: "user", content: "second" }]);
  release();
  const err = await firstWrite.then(() => assert.fail("both stored"), (e: unknown) => e);
  assert.ok(err instanceof StaleSessionError, `got ${String(err)}`);
  assert.deepEqual(said(await store.getItems()), ["user: second"]);
  assert.equal((await changesOf(key))?.length, 1);
});

test("reading the history outside a run, while a turn is in flight, does not let that stale turn be stored", async () => {
  const { key, store, phone, laptop } = phoneAndLaptop();
  const phoneSide = supportAgent();
  await runner.run(phoneSide.agent, "Hi, I ordered the blue lamp.", { session: phone });

  let laptopDone!: () => void;
  phoneSide.holdFirstAnswer(new Promise<void>((ok) => (laptopDone = ok)));
  const phoneTurn = runner.run(phoneSide.agent, "Please ship it to my office instead.", { session: phone });
  await phoneSide.firstCall;
  await runner.run(supportAgent().agent, "Actually, cancel the order.", { session: laptop });
  // The phone's app shows the conversation while its model still works.
  await phone.getItems();
  laptopDone();
  const err = await phoneTurn.then(() => assert.fail("the stale turn was stored"), (e: unknown) => e);
  assert.ok(err instanceof StaleSessionError, `got ${String(err)}`);
});

test("reading the history outside a run does not keep the next run from being told what changed", async () => {
  const { key, store, phone, laptop } = phoneAndLaptop();
  const phoneSide = supportAgent();
  await runner.run(phoneSide.agent, "Hi, I ordered the blue lamp.", { session: phone });
  await runner.run(supportAgent().agent, "Actually, cancel the order.", { session: laptop });
  await phone.getItems(); // the phone's app shows the conversation

  await runner.run(phoneSide.agent, "Please ship it to my office instead.", { session: phone });
  const system = (phoneSide.requests.at(-1) as AgentInputItem[]).at(-2) as { role: string; content: string };
  assert.equal(system.role, "system", "the laptop's message comes right before the turn's input");
  assert.match(system.content, /human_direct_message by human telegram:42: human message via web/);
});

test("a write outside a run is fenced with what the app last read", async () => {
  const { key, store, phone, laptop } = phoneAndLaptop();
  await runner.run(supportAgent().agent, "Hi, I ordered the blue lamp.", { session: phone });
  await runner.run(supportAgent().agent, "Actually, cancel the order.", { session: laptop });
  await assert.rejects(phone.popItem(), StaleSessionError, "the app had not seen the laptop's turn");

  await phone.getItems();
  assert.equal(said([(await phone.popItem())!])[0], "assistant: Noted: Actually, cancel the order.");
});

test("clearing the history is recorded as a reset, so the watcher is told it is gone", async () => {
  const key = newKey();
  const session = new VigilSession({ client: client(), sessionKey: key, person: PERSON });
  await runner.run(supportAgent().agent, "Hi.", { session });
  await session.clearSession();
  assert.deepEqual((await changesOf(key))?.map((c) => c[0]), ["human_direct_message", "session_reset"]);
  assert.deepEqual(await session.store.getItems(), []);
});

test("a conversation deleted in vigil since the last run is told to the next run, right before its input", async () => {
  const key = newKey();
  const session = new VigilSession({ client: client(), sessionKey: key, person: PERSON });
  const side = supportAgent();
  await runner.run(side.agent, "Hi, I ordered the blue lamp.", { session });
  await new VigilClient(gateway.url, { token: OPERATOR }).sessionDelete({ sessionKey: key });
  const notice = (await client().sessionPending({ sessionKey: AGENT })).events?.find((e) => e.target === key);
  assert.equal(notice?.data?.type, "deleted");

  await runner.run(side.agent, "Is my order still there?", { session });
  const input = side.requests.at(-1) as AgentInputItem[];
  const system = input.at(-2) as { role: string; content: string };
  assert.equal(system.role, "system", "the deletion comes right before the turn's input");
  assert.equal(system.content, notice?.text);
});

test("the example tells the conversation's story against a live gateway", async () => {
  const dir = fileURLToPath(new URL("../../../", import.meta.url)); // adapters/openai-agents
  const { stdout } = await promisify(execFile)(process.execPath, ["examples/conversation.mjs"], {
    cwd: dir, env: { ...process.env, VIGIL_ADDR: gateway.url, VIGIL_TOKEN: SUPPORT }, timeout: 60_000,
  });
  assert.match(stdout, /^notice: Session "agent:support:chat:c-\w+" changed \(other actor\)\./m);
  assert.match(stdout, /^refused: agent:support:chat:c-\w+ changed after version \d+ \(1 change\(s\), now at \d+\): nothing was stored/m);
  assert.match(stdout, /^reconciled: #\d+ human_direct_message by human telegram:42: human message via web$/m);
  assert.match(stdout, /^phone: ran again; before its input the model was told: #\d+ human_direct_message by human telegram:42: human message via web$/m);
  assert.match(stdout, /^history: user: Please ship it to my office instead\.$/m);
});

test("the example reaches a gateway at VIGIL_ADDR given as host:port, as the vigil CLI takes it", async () => {
  const dir = fileURLToPath(new URL("../../../", import.meta.url)); // adapters/openai-agents
  const { stdout } = await promisify(execFile)(process.execPath, ["examples/conversation.mjs"], {
    cwd: dir, env: { ...process.env, VIGIL_ADDR: new URL(gateway.url).host, VIGIL_TOKEN: SUPPORT }, timeout: 60_000,
  });
  assert.match(stdout, /^history: user: Please ship it to my office instead\.$/m);
});
