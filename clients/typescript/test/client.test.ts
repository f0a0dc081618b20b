// The TypeScript client against a live vigil serve (see live.ts).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { inspect } from "node:util";
import { readFileSync } from "node:fs";
import { join } from "node:path";

import { APIError, ConflictError, MAX_RETRY_AFTER, TransportError, VigilClient, toolMethods, type StreamEvent, type StreamOptions } from "../src/index.js";
import { readEvents } from "../src/sse.js";
import { ADMIN, Gateway, MAIN, MANAGER, OPERATOR, OPERATOR_ID, OPS, Proxy, REPO, RUNTIME, createdText, noticeText } from "./live.js";

let gateway: Gateway;
let names = 0;

before(async () => {
  gateway = await Gateway.start("--bookmark-interval", "200ms");
});
after(async () => {
  await gateway.stop();
});

const as = (token: string, session?: string, url?: string) =>
  new VigilClient(url ?? gateway.url, session === undefined ? { token } : { token, session });

/** The main session of an agent of the test's own (an admin acts as it). */
const managerKey = () => `agent:m${++names}:main`;
const agentOf = (key: string) => key.split(":")[1]!;

/**
 * A worker of manager: its key, run and state version (versions are
 * positions in the gateway's one log; tests run one at a time, so each
 * change a test makes is the next one).
 */
async function spawnWorker(manager: string, label?: string) {
  const c = as(manager === MANAGER ? MAIN : ADMIN, manager);
  const out = await c.sessionsSpawn(label ? { task: "draft the report", label } : { task: "draft the report" });
  const v = (await as(ADMIN).sessionStatus({ sessionKey: out.childSessionKey })).stateVersion;
  return { worker: out.childSessionKey, run: out.runId, v };
}

/** The data of the notice of a person's message into worker, from version v. */
const changedData = (worker: string, v: number) => ({
  type: "changed", target: worker, targetAgentId: agentOf(worker), changesSince: v,
  kinds: ["human_direct_message"], actors: [{ type: "human", id: OPERATOR_ID }],
});

const personWrites = (key: string, message: string) =>
  as(OPERATOR).sessionsSend({ sessionKey: key, message, timeoutSeconds: 0 });

/** The stream's next event of the given type. */
async function next<T extends StreamEvent["type"]>(it: AsyncIterator<StreamEvent>, type: T): Promise<Extract<StreamEvent, { type: T }>> {
  for (;;) {
    const r = await it.next();
    if (r.done) throw new Error(`the stream ended before a ${type}`);
    if (r.value.type === type) return r.value as Extract<StreamEvent, { type: T }>;
  }
}

async function rejects<E>(p: Promise<unknown>, cls: new (...a: never[]) => E): Promise<E> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof cls, `got ${String(e)}, want a ${cls.name}`);
    return e;
  }
  assert.fail(`resolved, want a ${cls.name}`);
}

describe("the story", () => {
  // The story every client of the repository tells: a manager spawns a
  // worker (and is told it was created), a person writes into it, the
  // manager gets exactly one notice of the change and reconciles with
  // changesSince, a stale write gets the typed conflict
  // with the current version, and a stream resumes after a drop.
  test("a manager hears once, reconciles, has a stale write refused, and its stream resumes after a drop", async () => {
    const proxy = await Proxy.start(gateway.url);
    const stop = new AbortController();
    try {
      const mgr = as(MAIN, MANAGER);
      const log = as(OPERATOR, undefined, proxy.url).events({ after: 0, signal: stop.signal })[Symbol.asyncIterator]();
      const { worker, v } = await spawnWorker(MANAGER, "writer");
      await personWrites(worker, "Use the revised figures");

      const turn = await mgr.sessionTurn({ sessionKey: MANAGER, waitSeconds: 5 });
      assert.deepEqual(turn.systemEvents, [createdText(worker, MANAGER, "writer"), noticeText(worker, v)]);
      assert.deepEqual(turn.acknowledged, [worker]);
      // The same entries as data: the position to reconcile from is a field.
      assert.deepEqual((turn.events ?? []).map((e) => e.text), turn.systemEvents);
      const notice = turn.events?.[1]?.data;
      assert.deepEqual(notice, changedData(worker, v));
      const again = await mgr.sessionTurn({ sessionKey: MANAGER, waitSeconds: 0 });
      assert.deepEqual([again.systemEvents, again.timedOut], [[], true]);

      const status = await mgr.sessionStatus({ sessionKey: notice!.target, changesSince: notice!.changesSince! });
      assert.equal(status.stateVersion, v + 1);
      const changes = status.stateChanges?.events ?? [];
      assert.deepEqual(changes.map((e) => [e.kind, e.actorType, e.actorId]), [["human_direct_message", "human", OPERATOR_ID]]);

      const refused = await rejects(mgr.sessionGoal({ sessionKey: worker, action: "set", objective: "old plan", ifStateVersion: v }), ConflictError);
      assert.deepEqual([refused.precondition, refused.stateVersion, refused.status], [true, v + 1, 409]);

      // The log, cut after the person's message, resumes after it.
      let last = 0;
      while (last !== v + 1) {
        const s = await next(log, "signal");
        if (s.event.sessionKey === worker) last = s.event.sequence;
      }
      proxy.cutAndHold();
      const resumed = next(log, "resumed");
      assert.equal(await proxy.resumedWith(), String(v + 1));
      await mgr.sessionGoal({ sessionKey: worker, action: "set", objective: "revised plan", ifStateVersion: refused.stateVersion });
      proxy.release();
      assert.equal((await resumed).position, v + 1);
      const after = await next(log, "signal");
      assert.deepEqual([after.event.sequence, after.event.kind], [v + 2, "goal_changed"]);
    } finally {
      stop.abort();
      await proxy.close();
    }
  });
});

describe("tools", () => {
  test("a spawned worker is listed with its parent and transcript", async () => {
    const manager = managerKey();
    const { worker, v } = await spawnWorker(manager, "writer");
    const rows = (await as(ADMIN, manager).sessionsList({ agentId: agentOf(manager), kind: "subagent" })).sessions ?? [];
    assert.deepEqual(rows.map((r) => [r.sessionKey, r.label, r.spawnedBy, r.stateVersion]), [[worker, "writer", manager, v]]);
    const hist = await as(ADMIN, manager).sessionsHistory({ sessionKey: worker });
    assert.deepEqual((hist.messages ?? []).map((m) => m.content), ["draft the report"]);
  });

  test("history before an id above every one reads back from the newest", async () => {
    const manager = managerKey();
    const { worker } = await spawnWorker(manager);
    await personWrites(worker, "one");
    const c = as(ADMIN, manager);
    const newest = await c.sessionsHistory({ sessionKey: worker, beforeId: Number.MAX_SAFE_INTEGER, limit: 1 });
    assert.deepEqual([(newest.messages ?? []).map((m) => m.content), newest.truncated], [["one"], true]);
    const older = await c.sessionsHistory({ sessionKey: worker, beforeId: newest.nextBeforeId, limit: 1 });
    assert.deepEqual([(older.messages ?? []).map((m) => m.content), older.truncated], [["draft the report"], false]);
  });

  test("the graph and pending show the manager's notice, pending beside the creation notice", async () => {
    const manager = managerKey();
    const { worker, v } = await spawnWorker(manager);
    await personWrites(worker, "one");
    const cursors = (await as(OPERATOR).sessionsGraph({ agentId: agentOf(manager) })).cursors ?? [];
    assert.deepEqual(cursors.map((c) => [c.watcher, c.pending, c.notice]), [[manager, true, noticeText(worker, v)]]);
    const pending = await as(ADMIN, manager).sessionPending({ sessionKey: manager });
    assert.deepEqual((pending.events ?? []).map((e) => [e.text, e.target]), [
      [createdText(worker, manager), undefined],
      [noticeText(worker, v), worker],
    ]);
  });

  test("a send waits for the reply the worker gives on its turn", async () => {
    const manager = managerKey();
    const { worker } = await spawnWorker(manager);
    const rt = as(ADMIN);
    assert.deepEqual(((await rt.sessionTurn({ sessionKey: worker, waitSeconds: 0 })).messages ?? []).map((m) => m.content), ["draft the report"]);
    const answered = (async () => {
      const turn = await rt.sessionTurn({ sessionKey: worker, waitSeconds: 30 });
      return rt.sessionReply({ sessionKey: worker, text: "half done", replyTo: turn.messages![0]!.id });
    })();
    const sent = await as(ADMIN, manager).sessionsSend({ sessionKey: worker, message: "how far along?", timeoutSeconds: 15 });
    assert.deepEqual([sent.status, sent.reply], ["ok", "half done"]);
    assert.equal((await answered).delivered, true);
  });

  test("goal changes by a person notify the manager once", async () => {
    const manager = managerKey();
    const { worker, v } = await spawnWorker(manager);
    const set = await as(OPERATOR).sessionGoal({ sessionKey: worker, action: "set", objective: "Q3 report" });
    assert.deepEqual([set.goal?.objective, set.goal?.status, set.stateVersion], ["Q3 report", "active", v + 1]);
    await as(OPERATOR).sessionGoal({ sessionKey: worker, action: "edit", objective: "Q3 report, revised" });
    const mgr = as(ADMIN, manager);
    await mgr.sessionGoal({ sessionKey: worker, action: "status", status: "blocked" });
    assert.equal((await mgr.sessionGoal({ sessionKey: worker, action: "clear" })).goal ?? null, null);
    assert.deepEqual((await mgr.sessionWait({ timeoutSeconds: 0 })).systemEvents, [createdText(worker, manager), noticeText(worker, v)]);
  });

  test("unwatching drops the notice and the next ones", async () => {
    const { worker } = await spawnWorker(managerKey());
    const ops = as(ADMIN, "agent:ops:main");
    assert.equal((await ops.sessionsSend({ sessionKey: worker, message: "ping", timeoutSeconds: 0, watch: true })).watched, true);
    await personWrites(worker, "one");
    assert.equal((await ops.sessionsUnwatch({ sessionKey: worker })).unwatched, true);
    await personWrites(worker, "two");
    assert.deepEqual((await ops.sessionPending({ sessionKey: "agent:ops:main" })).events, []);
  });

  test("a run's end, a compaction, a reset and a delete are recorded", async () => {
    const manager = managerKey();
    const { worker, run, v } = await spawnWorker(manager);
    const mgr = as(ADMIN, manager);
    const ended = await mgr.runEnd({ runId: run, outcome: "timeout" });
    assert.deepEqual([ended.recorded, ended.sessionKey], [true, worker]);
    const compacted = await mgr.as(worker).sessionCompact({ sessionKey: worker, summary: "asked for a draft", operationId: "c1" });
    assert.deepEqual([compacted.replaced, compacted.recorded], [1, true]);
    assert.ok((await as(OPERATOR).sessionReset({ sessionKey: worker })).sessionId);
    const status = await mgr.sessionStatus({ sessionKey: worker, changesSince: v });
    const events = status.stateChanges?.events ?? [];
    assert.deepEqual(events.map((e) => e.kind), ["run_failed", "compacted", "session_reset"]);
    assert.deepEqual(events[0]!.payload, { outcome: "timeout" });
    assert.equal((await as(OPERATOR).sessionDelete({ sessionKey: worker })).deleted, true);
    const gone = await mgr.sessionStatus({ sessionKey: worker });
    assert.deepEqual([gone.exists, gone.stateVersion], [false, 0]);
  });

  test("a recorded message of a session elsewhere notifies its watcher", async () => {
    const rt = as(RUNTIME, "agent:ext:main");
    const worker = `agent:ext:subagent:w${++names}`;
    const v = (await rt.sessionRecord({ sessionKey: worker, kind: "child_spawned", parent: "agent:ext:main" })).stateVersion;
    const rec = await rt.sessionRecord({ sessionKey: worker, kind: "human_direct_message", actorType: "human", actorId: "bob", dedupeKey: "m-1" });
    assert.deepEqual([rec.recorded, rec.stateVersion], [true, v + 1]);
    assert.equal((await rt.sessionRecord({ sessionKey: worker, kind: "human_direct_message", actorType: "human", actorId: "bob", dedupeKey: "m-1" })).recorded, false);
    const changes = (await rt.sessionStatus({ sessionKey: worker, changesSince: v })).stateChanges?.events ?? [];
    assert.deepEqual(changes.map((e) => e.actorId), ["bob"]);
    const pending = (await rt.sessionPending({ sessionKey: "agent:ext:main" })).events ?? [];
    assert.ok(pending.some((e) => e.text === noticeText(worker, v)));
  });

  test("a session recorded elsewhere is listed and says who hosts it, and its agent acts as it", async () => {
    const rt = as(RUNTIME, "agent:ext:main");
    const worker = `agent:ext:subagent:w${++names}`;
    const v = (await rt.sessionRecord({ sessionKey: worker, kind: "child_spawned", parent: "agent:ext:main", hostedBy: "langgraph" })).stateVersion;
    const st = await rt.sessionStatus({ sessionKey: worker });
    assert.deepEqual([st.exists, st.state, st.hostedBy, st.stateVersion], [true, "recorded", "langgraph", v]);
    const row = ((await rt.sessionsList({ agentId: "ext", limit: 200 })).sessions ?? []).find((r) => r.sessionKey === worker);
    assert.deepEqual([row?.state, row?.hostedBy], ["recorded", "langgraph"]);
    assert.deepEqual((await rt.as(worker).sessionPending({ sessionKey: worker })).events, []);
    await rt.sessionDelete({ sessionKey: worker });
    const gone = await rt.sessionStatus({ sessionKey: worker });
    assert.deepEqual([gone.exists, gone.state], [false, "absent"]);
  });

  test("a record fenced with a version the session has moved past is a conflict that stores nothing", async () => {
    const rt = as(RUNTIME, "agent:ext:main");
    const worker = `agent:ext:subagent:w${++names}`;
    const v = (await rt.sessionRecord({ sessionKey: worker, kind: "child_spawned", parent: "agent:ext:main" })).stateVersion;
    await rt.sessionRecord({ sessionKey: worker, kind: "human_direct_message", actorType: "human", actorId: "bob" });
    const e = await rejects(rt.sessionRecord({ sessionKey: worker, kind: "run_completed", ifStateVersion: v }), ConflictError);
    assert.deepEqual([e.precondition, e.stateVersion], [true, v + 1]);
    const rec = await rt.sessionRecord({ sessionKey: worker, kind: "run_completed", ifStateVersion: e.stateVersion });
    assert.deepEqual([rec.recorded, rec.stateVersion], [true, v + 2]);
  });

  test("a session whose key is not ASCII takes its turn and is acted as", async () => {
    const rt = as(RUNTIME, "agent:ext:main");
    for (const key of [`agent:ext:chat:müller${++names}`, `agent:ext:chat:日本${++names}`]) {
      await rt.sessionRecord({ sessionKey: key, kind: "child_spawned", parent: "agent:ext:main" });
      assert.equal((await rt.sessionTurn({ sessionKey: key, waitSeconds: 0 })).sessionKey, key);
      assert.deepEqual((await rt.as(key).sessionPending({ sessionKey: key })).events, []);
    }
  });

  test("call reaches a tool by name, and tools lists every tool the client has a method for", async () => {
    const admin = as(ADMIN);
    await admin.health();
    const names = (await admin.tools()).map((t) => t.name).sort();
    assert.deepEqual(names, Object.keys(toolMethods).sort());
    for (const method of Object.values(toolMethods)) assert.equal(typeof admin[method], "function", method);
    assert.equal((await admin.call("session_status", { sessionKey: "agent:main:nobody" })).exists, false);
  });
});

describe("errors", () => {
  const code = async (p: Promise<unknown>, status: number, c: string) => {
    const e = await rejects(p, APIError);
    assert.deepEqual([e.status, e.code], [status, c]);
    return e;
  };

  test("bad input is an invalid argument naming the field", async () => {
    const e = await code(as(MAIN).sessionStatus({ sessionKey: MANAGER, changesSince: -1 }), 400, "invalid_argument");
    assert.match(e.detail, /changesSince/);
    const unknown = await code(as(MAIN).call("session_status", { sessionKey: MANAGER, since: 3 } as never), 400, "invalid_argument");
    assert.match(unknown.detail, /unknown field "since"/);
  });

  test("input JSON cannot carry is an invalid argument naming it, and nothing is sent or stored", async () => {
    const { worker } = await spawnWorker(MANAGER);
    const before = (await as(ADMIN).sessionStatus({ sessionKey: worker })).stateVersion;
    let sent = 0;
    const counting = new VigilClient(gateway.url, { token: OPERATOR, fetch: (...a) => (sent++, fetch(...a)) });
    const cycle: Record<string, unknown> = { sessionKey: worker };
    cycle["self"] = cycle;
    for (const [input, named] of [
      [{ sessionKey: worker, action: "set", objective: "ship", ifStateVersion: NaN }, /ifStateVersion: NaN/],
      [{ sessionKey: worker, action: "set", objective: "ship", ifStateVersion: -Infinity }, /ifStateVersion: -Infinity/],
      [{ sessionKey: worker, action: "set", objective: "ship", ifStateVersion: BigInt(before) }, /ifStateVersion: \d+n is a BigInt/],
      [cycle, /circular/],
    ] as const) {
      const e = await rejects(counting.sessionGoal(input as never), APIError);
      assert.equal(e.code, "invalid_argument");
      assert.match(e.detail, /cannot be sent as JSON/);
      assert.match(e.detail, named);
    }
    assert.equal(sent, 0);
    assert.equal((await as(ADMIN).sessionStatus({ sessionKey: worker })).stateVersion, before);
  });

  test("a turn or reply without a key is refused before anything is sent, as a rejection like any call's", async () => {
    // A promise's caller handles it with .catch: a throw before there is a promise escapes that.
    for (const refused of [() => as(MAIN).sessionTurn({ sessionKey: "" }), () => as(MAIN).sessionReply({ sessionKey: "", text: "done" })]) {
      let p: Promise<unknown> | undefined;
      assert.doesNotThrow(() => void (p = refused()));
      await rejects(p!, APIError);
    }
  });

  test("a session key that is not a string is an invalid argument, not a TypeError", async () => {
    const key = 5 as unknown as string; // what a caller without the types can pass
    const notString = (e: unknown) => e instanceof APIError && e.code === "invalid_argument" && /not a string/.test(e.detail);
    assert.throws(() => as(ADMIN).sessionEvents(key), notString);
    await assert.rejects(as(ADMIN).sessionTurn({ sessionKey: key }), notString);
    await assert.rejects(as(ADMIN).sessionReply({ sessionKey: key, text: "done" }), notString);
  });

  test("a missing input, options left null, an acting session or a filter that is not a string are invalid arguments, nothing sent", async () => {
    let sent = 0;
    const counting = (session?: unknown) =>
      new VigilClient(gateway.url, { token: ADMIN, session: session as string, fetch: (...a) => (sent++, fetch(...a)) });
    const invalid = (named: RegExp) => (e: unknown) => e instanceof APIError && e.code === "invalid_argument" && named.test(e.detail);
    for (const input of [undefined, null]) {
      await assert.rejects(counting().sessionTurn(input as never), invalid(/sessionKey is required/));
      await assert.rejects(counting().sessionReply(input as never), invalid(/sessionKey is required/));
    }
    // An array's text is the key it holds: it would act as that session.
    for (const session of [[MANAGER], 5, { toString: () => MANAGER }]) {
      const e = await rejects(counting(session).sessionStatus({ sessionKey: MANAGER }), APIError);
      assert.ok(invalid(/acting session .* is not a string/)(e), inspect(e));
    }
    assert.throws(() => counting().events({ session: [MANAGER] as never }), invalid(/session filter .* is not a string/));
    // URLSearchParams would send the surrogate as U+FFFD, a filter on another key.
    assert.throws(() => counting().events({ session: "agent:main:\ud800" }), invalid(/session filter .* is not valid Unicode/));
    assert.throws(() => counting().events({ agent: "ma\udc00in" }), invalid(/agent filter .* is not valid Unicode/));
    assert.equal(sent, 0);
    // Options left null are no options.
    for (const stream of [as(ADMIN).events(null as never), as(ADMIN).sessionEvents(MANAGER, null as never)]) {
      const it = stream[Symbol.asyncIterator]();
      assert.equal((await next(it, "bookmark")).type, "bookmark");
      await it.return?.();
    }
  });

  test("a tool's name a URL would not carry as it is is an invalid argument, not another tool's call", async () => {
    let sent = 0;
    const counting = new VigilClient(gateway.url, { token: ADMIN, fetch: (...a) => (sent++, fetch(...a)) });
    // The URL parser drops the newline (reaching sessions_list) and resolves the dots (reaching another route).
    for (const name of ["sessions_list\n", "sessions\t_list", "..", ".", "a b", "x\ud800", 5, ""]) {
      const e = await rejects(counting.call(name as never, {} as never), APIError);
      assert.ok(e.code === "invalid_argument" && /is not a tool's name/.test(e.detail), `${JSON.stringify(name)}: ${inspect(e)}`);
    }
    assert.equal(sent, 0);
  });

  test("a session's route refuses a key of dots, which a URL resolves to another route", async () => {
    for (const key of [".", ".."]) {
      await assert.rejects(as(ADMIN).sessionTurn({ sessionKey: key }), APIError);
      assert.throws(() => as(ADMIN).sessionEvents(key), APIError);
    }
  });

  test("a session key that is not valid Unicode is an invalid argument, not sent nor retried", async () => {
    const key = "agent:main:\ud800"; // a surrogate without its pair, which no URL can carry
    const notUnicode = (e: unknown) => e instanceof APIError && e.code === "invalid_argument" && /not valid Unicode/.test(e.detail);
    await assert.rejects(as(ADMIN).sessionTurn({ sessionKey: key }), notUnicode);
    assert.throws(() => as(ADMIN).sessionEvents(key), notUnicode);
    const acting = await rejects(as(ADMIN, key).sessionStatus({ sessionKey: MANAGER }), APIError);
    assert.equal(acting.code, "invalid_argument");
    assert.match(acting.detail, /not valid Unicode/);
    const stream = as(ADMIN, key).events()[Symbol.asyncIterator]();
    const streamed = await rejects(stream.next(), APIError);
    assert.equal(streamed.code, "invalid_argument");
  });

  test("a wrong token is unauthenticated", async () => {
    await code(as("not-a-real-token-at-all").sessionsList(), 401, "unauthenticated");
  });

  test("reaching another agent's session is permission denied", async () => {
    const e = await code(as(OPS).sessionStatus({ sessionKey: MANAGER }), 403, "permission_denied");
    assert.match(e.detail, /agent "ops"/);
  });

  test("an unknown run or tool is not found", async () => {
    await code(as(MAIN).runEnd({ runId: "run-nope", outcome: "completed" }), 404, "not_found");
    await code(as(MAIN).call("sessions_teleport" as never, {} as never), 404, "not_found");
  });

  test("an ifSynced write with a notice pending is a conflict carrying the notice", async () => {
    const manager = managerKey();
    const { worker, v } = await spawnWorker(manager);
    await personWrites(worker, "one");
    const e = await rejects(as(ADMIN, manager).sessionsSend({ sessionKey: worker, message: "go on", timeoutSeconds: 0, ifSynced: true }), ConflictError);
    assert.deepEqual([e.precondition, e.stateVersion, e.notice, e.noticeData], [true, v + 1, noticeText(worker, v), changedData(worker, v)]);
  });

  test("a label in use is a conflict without a precondition", async () => {
    const manager = managerKey();
    await spawnWorker(manager, "writer");
    const e = await rejects(as(ADMIN, manager).sessionsSpawn({ task: "again", label: "writer" }), ConflictError);
    assert.equal(e.precondition, false);
  });

  test("a body over the limit is payload too large", async () => {
    await code(as(OPERATOR).sessionsSend({ sessionKey: MANAGER, message: "x".repeat(2 << 20) }), 413, "payload_too_large");
  });

  test("limits are too many requests or unavailable, with Retry-After", async () => {
    const limited = await Gateway.start("--max-waits", "1", "--max-waits-per-credential", "1");
    try {
      const main = as(MAIN, undefined, limited.url);
      const parked = main.sessionTurn({ sessionKey: MANAGER, waitSeconds: 2 });
      await limited.waitForMetric("vigil_parked_requests", 1, ADMIN);
      const own = await code(main.sessionTurn({ sessionKey: MANAGER, waitSeconds: 2 }), 429, "too_many_requests");
      assert.equal(own.retryAfter, 1);
      const all = await code(as(ADMIN, "agent:ops:main", limited.url).sessionWait({ timeoutSeconds: 2 }), 503, "unavailable");
      assert.equal(all.retryAfter, 1);
      await parked;
    } finally {
      await limited.stop();
    }
  });

  test("a call the caller aborts is the abort, whether before the answer or while it is read", { timeout: 20_000 }, async () => {
    const srv = createServer((_req, res) => {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.write(`{"sessions":[`); // and no more
    });
    await new Promise<void>((ok) => srv.listen(0, "127.0.0.1", ok));
    try {
      const url = `http://127.0.0.1:${(srv.address() as { port: number }).port}`;
      const early = new AbortController();
      early.abort();
      const before = await new VigilClient(url).sessionsList({}, early.signal).catch((e: unknown) => e);
      assert.ok(before === early.signal.reason, inspect(before));
      const stop = new AbortController();
      // Aborted once the answer's head is in, while its body is read.
      const abortOnAnswer: typeof fetch = async (...a) => {
        const resp = await fetch(...a);
        stop.abort();
        return resp;
      };
      const during = await new VigilClient(url, { fetch: abortOnAnswer }).sessionsList({}, stop.signal).catch((e: unknown) => e);
      assert.ok(during === stop.signal.reason, inspect(during));
    } finally {
      srv.closeAllConnections();
      await new Promise((ok) => srv.close(ok));
    }
  });

  test("an unreachable gateway is a transport error", async () => {
    await rejects(new VigilClient("http://127.0.0.1:9").sessionsList(), TransportError);
  });

  test("a gateway that never answers is a transport error after the client's timeout, not a wait without end", { timeout: 20_000 }, async () => {
    const srv = createServer((req) => void req.resume()); // reads the request, never answers
    await new Promise<void>((ok) => srv.listen(0, "127.0.0.1", ok));
    try {
      const url = `http://127.0.0.1:${(srv.address() as { port: number }).port}`;
      const options = { fetch: globalThis.fetch, timeout: 0.2 };
      await assert.rejects(new VigilClient(url, options).sessionStatus({ sessionKey: MANAGER }),
        (e: unknown) => e instanceof TransportError && /no answer within 0\.2s/.test(e.message));
    } finally {
      srv.closeAllConnections();
      await new Promise((ok) => srv.close(ok));
    }
  });

  test("a timeout of a fraction of a second or a long wait is a timer the platform takes", { timeout: 20_000 }, async () => {
    const { worker, v } = await spawnWorker(MANAGER);
    // 2.2 s beyond the turn's default wait of 30 is 32200.000000000004 ms; the worker's task is there, so it answers at once.
    const turn = await new VigilClient(gateway.url, { token: ADMIN, timeout: 2.2 }).sessionTurn({ sessionKey: worker });
    assert.equal(turn.messages?.length, 1);
    // A wait past what a timer holds is the gateway's to refuse, not a RangeError nor a timeout at once.
    const e = await rejects(as(ADMIN).sessionStatus({ sessionKey: worker, waitForVersion: v + 1, timeoutSeconds: 1e9 }), APIError);
    assert.equal(e.code, "invalid_argument");
    assert.match(e.detail, /timeoutSeconds/);
    for (const timeout of [86400.5, 3e6, 1e12]) {
      assert.throws(() => new VigilClient(gateway.url, { timeout }), (e: unknown) => e instanceof TypeError && /at most 86400/.test(e.message));
    }
  });

  test("a long poll is given the wait it asks for on top of the client's timeout", { timeout: 20_000 }, async () => {
    const { worker, v } = await spawnWorker(MANAGER);
    const options = { fetch: globalThis.fetch, token: ADMIN, timeout: 0.2 };
    const st = await new VigilClient(gateway.url, options).sessionStatus({ sessionKey: worker, waitForVersion: v + 1, timeoutSeconds: 1 });
    assert.equal(st.timedOut, true);
  });

  test("a turn taken through the generic call is given the wait it asks for on top of the client's timeout", { timeout: 20_000 }, async () => {
    const { worker } = await spawnWorker(MANAGER);
    const rt = new VigilClient(gateway.url, { fetch: globalThis.fetch, token: ADMIN, timeout: 0.2 });
    await rt.sessionTurn({ sessionKey: worker, waitSeconds: 0 }); // takes the task, so the next turn waits
    const turn = await rt.call("session_turn", { sessionKey: worker, waitSeconds: 1 });
    assert.deepEqual(turn.messages ?? [], []);
  });

  test("an answer larger than any the gateway sends is refused, not held in memory", { timeout: 20_000 }, async () => {
    // What answers is not the gateway: a body of 80 MiB.
    const srv = createServer((req, res) => {
      req.resume();
      res.writeHead(200, { "Content-Type": "application/json" });
      const block = Buffer.alloc(1 << 20, 32);
      let sent = 0;
      const more = () => {
        while (sent < 80) {
          sent++;
          if (!res.write(block)) return void res.once("drain", more);
        }
        res.end();
      };
      res.on("error", () => undefined);
      more();
    });
    await new Promise<void>((ok) => srv.listen(0, "127.0.0.1", ok));
    try {
      const url = `http://127.0.0.1:${(srv.address() as { port: number }).port}`;
      await assert.rejects(new VigilClient(url).sessionStatus({ sessionKey: MANAGER }),
        (e: unknown) => e instanceof TransportError && /larger than 64 MiB/.test(e.message));
    } finally {
      srv.closeAllConnections();
      await new Promise((ok) => srv.close(ok));
    }
  });

  test("a call answered with a page is an API error naming its Content-Type, never a success", { timeout: 20_000 }, async () => {
    // A proxy's login page at a wrong base URL is not the gateway's answer
    // (health reads no output).
    for (const [contentType, says] of [["text/html; charset=utf-8", 'Content-Type "text/html; charset=utf-8"'], [undefined, "no Content-Type"]] as const) {
      const srv = createServer((req, res) => {
        req.resume();
        res.writeHead(200, contentType ? { "Content-Type": contentType } : {});
        res.end("<html><body>Sign in</body></html>");
      });
      await new Promise<void>((ok) => srv.listen(0, "127.0.0.1", ok));
      try {
        const c = new VigilClient(`http://127.0.0.1:${(srv.address() as { port: number }).port}/vigil`, { token: "s3cret-token" });
        const calls = [["/vigil/v1/tools/sessions_list", () => c.sessionsList({})], ["/vigil/healthz", () => c.health()]] as const;
        for (const [path, call] of calls) {
          const e = await rejects(call(), APIError);
          assert.deepEqual([e.status, e.code], [200, ""]);
          for (const part of [says, path, "not application/json"]) assert.ok(e.detail.includes(part), `${e.detail} does not say ${part}`);
          assert.ok(!e.message.includes("s3cret-token"), e.message);
        }
      } finally {
        srv.closeAllConnections();
        await new Promise((ok) => srv.close(ok));
      }
    }
  });

  /** A server answering every request 200 with body as JSON, and its URL. */
  async function jsonServer(body: string, status = 200, headers: Record<string, string> = {}) {
    const srv = createServer((req, res) => {
      req.resume();
      res.writeHead(status, { "Content-Type": "application/json", ...headers });
      res.end(body);
    });
    await new Promise<void>((ok) => srv.listen(0, "127.0.0.1", ok));
    return {
      url: `http://127.0.0.1:${(srv.address() as { port: number }).port}`,
      close: async () => {
        srv.closeAllConnections();
        await new Promise((ok) => srv.close(ok));
      },
    };
  }

  test("an error answered with 200 is the error it says, never an empty output", async () => {
    const coded = await jsonServer(JSON.stringify({ error: { code: "not_found", message: "no session agent:ops:main" } }));
    const uncoded = await jsonServer(JSON.stringify({ error: { reason: "upstream rejected" } }));
    try {
      const e = await rejects(new VigilClient(coded.url).sessionStatus({ sessionKey: "agent:ops:main" }), APIError);
      assert.deepEqual([e.status, e.code, e.detail], [200, "not_found", "no session agent:ops:main"]);
      const u = await rejects(new VigilClient(uncoded.url).sessionStatus({ sessionKey: "agent:ops:main" }), APIError);
      assert.deepEqual([u.status, u.code], [200, ""]);
      assert.match(u.detail, /holding an error, not an output: .*upstream rejected/);
    } finally {
      await coded.close();
      await uncoded.close();
    }
  });

  test("a failure of the gateway's own carries the request id of its log line", async () => {
    const failed = { error: { code: "unavailable", message: "the store is unavailable; retry", requestId: "4f2a9c" } };
    const srv = await jsonServer(JSON.stringify(failed), 503, { "Retry-After": "1", "Vigil-Request-Id": "4f2a9c" });
    try {
      const e = await rejects(new VigilClient(srv.url).sessionStatus({ sessionKey: "agent:ops:main" }), APIError);
      assert.deepEqual([e.status, e.code, e.requestId], [503, "unavailable", "4f2a9c"]);
    } finally {
      await srv.close();
    }
  });

  test("an answer holding an error without a code keeps the request id its header gives", async () => {
    const srv = await jsonServer(JSON.stringify({ error: { reason: "upstream failed" } }), 200, { "Vigil-Request-Id": "4f2a9c" });
    try {
      const e = await rejects(new VigilClient(srv.url).sessionStatus({ sessionKey: "agent:ops:main" }), APIError);
      assert.deepEqual([e.status, e.code, e.requestId], [200, "", "4f2a9c"]);
    } finally {
      await srv.close();
    }
  });

  test("an error with a code but no message keeps its code and names the status", async () => {
    const srv = await jsonServer(JSON.stringify({ error: { code: "not_found" } }), 404);
    try {
      const e = await rejects(new VigilClient(srv.url).sessionStatus({ sessionKey: "agent:ops:main" }), APIError);
      assert.deepEqual([e.status, e.code, e.detail], [404, "not_found", "HTTP 404: not_found"]);
    } finally {
      await srv.close();
    }
  });

  test("a Retry-After past the longest wait is the longest wait, so that nothing sleeps for weeks", async () => {
    for (const after of ["3000000", "Fri, 01 Jan 2100 00:00:00 GMT", "18446744073709551616"]) {
      const srv = await jsonServer(JSON.stringify({ error: { code: "unavailable", message: "draining" } }), 503, { "Retry-After": after });
      try {
        const e = await rejects(new VigilClient(srv.url).sessionsList(), APIError);
        assert.deepEqual([e.code, e.retryAfter], ["unavailable", MAX_RETRY_AFTER], `Retry-After ${after}`);
        assert.equal(MAX_RETRY_AFTER, 30);
      } finally {
        await srv.close();
      }
    }
  });

  test("a send that failed is an output, not an error answer", async () => {
    const srv = await jsonServer(JSON.stringify({ status: "error", sessionKey: "agent:ops:main", error: "the agent is down" }));
    try {
      const out = await new VigilClient(srv.url).sessionsSend({ sessionKey: "agent:ops:main", message: "hi" });
      assert.deepEqual([out.status, out.error], ["error", "the agent is down"]);
    } finally {
      await srv.close();
    }
  });

  test("a base URL the client cannot use whole is refused, naming it, when the client is made", () => {
    for (const url of ["", "127.0.0.1:7317", "ftp://127.0.0.1", 7317 as unknown as string]) {
      assert.throws(() => new VigilClient(url), (e: unknown) => e instanceof TypeError && /^vigil: base URL .*want http\(s\):\/\/host/.test(e.message));
    }
    for (const url of [`${gateway.url}/?as=agent:main:main`, `${gateway.url}/vigil#top`]) {
      assert.throws(() => new VigilClient(url), (e: unknown) => e instanceof TypeError && /a query or fragment is not sent/.test(e.message));
    }
    assert.throws(() => new VigilClient(gateway.url.replace("//", "//ann:hunter2@")),
      (e: unknown) => e instanceof TypeError && /holds credentials/.test(e.message) && !e.message.includes("hunter2"));
    assert.equal(new VigilClient(`${gateway.url}/vigil/`).baseUrl, `${gateway.url}/vigil`);
  });

  test("a base URL refused does not show its password", () => {
    for (const url of ["ftp://bob:s3cret-pw@host:21", "bob:s3cret-pw@host:7317", "http://bob:s3cret-pw@[::1"]) {
      assert.throws(() => new VigilClient(url),
        (e: unknown) => e instanceof TypeError && /base URL/.test(e.message) && !e.message.includes("s3cret-pw"), url);
    }
  });

  test("a token a header cannot carry is refused when the client is made, without showing it", () => {
    for (const token of [`${ADMIN}\r\nX-Forged: 1`, "t\u00f6ken", "tab\there", 42 as unknown as string]) {
      assert.throws(() => new VigilClient(gateway.url, { token }),
        (e: unknown) => e instanceof TypeError && /token must be a string of printable ASCII/.test(e.message) && !e.message.includes(ADMIN));
    }
  });

  test("a printed or serialised client never shows its token", () => {
    const token = "agent-token-never-printed-0001";
    const client = new VigilClient("http://127.0.0.1:7317", { token, session: MANAGER });
    for (const shown of [inspect(client, { showHidden: true, depth: 5 }), JSON.stringify(client), String(Object.values(client))]) {
      assert.ok(!shown.includes(token), `shown as ${shown}`);
    }
    assert.ok(inspect(client).includes(MANAGER));
  });
});

describe("streams", () => {
  test("a session stream cut and resumed gets every change once", async () => {
    const { worker, v } = await spawnWorker(managerKey());
    await personWrites(worker, "one");
    const proxy = await Proxy.start(gateway.url);
    const stop = new AbortController();
    try {
      const it = as(OPERATOR, undefined, proxy.url).sessionEvents(worker, { after: v, signal: stop.signal })[Symbol.asyncIterator]();
      assert.equal((await next(it, "change")).event.sequence, v + 1);
      proxy.cutAndHold();
      const resumed = next(it, "resumed");
      assert.equal(await proxy.resumedWith(), String(v + 1));
      await personWrites(worker, "two");
      await personWrites(worker, "three");
      proxy.release();
      assert.equal((await resumed).position, v + 1);
      assert.deepEqual([(await next(it, "change")).event.sequence, (await next(it, "change")).event.sequence], [v + 2, v + 3]);
    } finally {
      stop.abort();
      await proxy.close();
    }
  });

  test("a session stream carries the manager's notice and wake", async () => {
    const manager = managerKey();
    const { worker, v } = await spawnWorker(manager);
    const stop = new AbortController();
    try {
      const it = as(ADMIN, manager).sessionEvents(manager, { signal: stop.signal })[Symbol.asyncIterator]();
      await next(it, "bookmark"); // the stream is open
      await personWrites(worker, "one");
      const notice = await next(it, "live");
      assert.deepEqual([notice.event.type, notice.event.notice],
        ["notice", { text: noticeText(worker, v), target: worker, data: changedData(worker, v) }]);
      assert.equal((await next(it, "live")).event.type, "wake");
    } finally {
      stop.abort();
    }
  });

  test("a quiet session stream gives bookmarks of its state version", async () => {
    const { worker, v } = await spawnWorker(managerKey());
    await personWrites(worker, "one");
    const stop = new AbortController();
    const it = as(OPERATOR).sessionEvents(worker, { signal: stop.signal })[Symbol.asyncIterator]();
    assert.equal((await next(it, "bookmark")).position, v + 1);
    stop.abort();
  });

  test("a session stream of a bare key names its agent", async () => {
    // A bare key (one not agent-qualified) is a session of the agent named
    // beside it, as the tools' agentId names it.
    const key = `global-${++names}`;
    const { stateVersion } = await as(RUNTIME).sessionRecord({ sessionKey: key, agentId: "ext", kind: "child_spawned", parent: "agent:ext:main" });
    const stop = new AbortController();
    const it = as(ADMIN).sessionEvents(key, { agent: "ext", signal: stop.signal })[Symbol.asyncIterator]();
    try {
      assert.equal((await next(it, "bookmark")).position, stateVersion);
    } finally {
      stop.abort();
    }
  });

  test("a session stream ends with a deleted item when its session is deleted, and does not resume", { timeout: 20_000 }, async () => {
    const { worker, v } = await spawnWorker(managerKey());
    const stop = new AbortController();
    try {
      const it = as(OPERATOR).sessionEvents(worker, { signal: stop.signal })[Symbol.asyncIterator]();
      await next(it, "bookmark"); // the stream is open
      await as(OPERATOR).sessionDelete({ sessionKey: worker });
      const gone = await next(it, "deleted");
      assert.deepEqual([gone.sessionKey, gone.agentId, gone.stateVersion], [worker, agentOf(worker), v]);
      assert.equal((await it.next()).done, true);
    } finally {
      stop.abort();
    }
  });

  test("a refused stream throws the error", async () => {
    const it = as(OPS).sessionEvents(MANAGER)[Symbol.asyncIterator]();
    const e = await rejects(it.next(), APIError);
    assert.equal(e.code, "permission_denied");
  });

  test("aborting ends a waiting stream", async () => {
    const stop = new AbortController();
    const it = as(ADMIN).events({ signal: stop.signal })[Symbol.asyncIterator]();
    await next(it, "bookmark");
    const pending = it.next();
    stop.abort();
    for (let r = await pending; !r.done; r = await it.next()) assert.equal(r.value.type, "bookmark");
  });

  test("an event too large for any the gateway sends is a dropped connection, not memory held without bound", { timeout: 20_000 }, async () => {
    // What answers is not the gateway (a proxy's page, a wrong URL): a line
    // that never ends. The stream drops the connection and reconnects.
    let opened = 0;
    const srv = createServer((_req, res) => {
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      if (++opened === 1) {
        res.write("data: " + "x".repeat(5 << 20)); // and never a line's end
      } else {
        res.write(`: connected\n\nid: 7\nevent: bookmark\ndata: {"sequence":7}\n\n`);
      }
    });
    await new Promise<void>((ok) => srv.listen(0, "127.0.0.1", ok));
    const stop = new AbortController();
    try {
      const url = `http://127.0.0.1:${(srv.address() as { port: number }).port}`;
      const it = new VigilClient(url).events({ after: 1, signal: stop.signal, idleTimeout: 3600 })[Symbol.asyncIterator]();
      const first = (await it.next()).value as StreamEvent;
      assert.equal(first.type, "resumed");
      assert.match(String((first as { cause: unknown }).cause), /larger than 4 MiB/);
      assert.deepEqual((await it.next()).value, { type: "bookmark", position: 7 });
    } finally {
      stop.abort();
      srv.closeAllConnections();
      await new Promise((ok) => srv.close(ok));
    }
  });

  test("an event too large for any the gateway sends, twice at one position, ends the stream with an error", { timeout: 20_000 }, async () => {
    const opened: (string | undefined)[] = [];
    const srv = createServer((req, res) => {
      opened.push(req.headers["last-event-id"] as string | undefined);
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      res.end(`id: 7\nevent: bookmark\ndata: {"sequence":7}\n\nevent: signal\ndata: ` + "x".repeat(5 << 20) + "\n\n");
    });
    await new Promise<void>((ok) => srv.listen(0, "127.0.0.1", ok));
    const stop = new AbortController();
    try {
      const url = `http://127.0.0.1:${(srv.address() as { port: number }).port}`;
      const got: unknown[] = [];
      await assert.rejects(async () => {
        for await (const ev of new VigilClient(url).events({ after: 1, signal: stop.signal })) got.push(ev.type);
      }, (e: unknown) => e instanceof TransportError && /larger than 4 MiB after position 7/.test(e.message));
      assert.deepEqual(got, ["bookmark", "resumed", "bookmark"]);
      assert.deepEqual(opened, ["1", "7"]);
    } finally {
      stop.abort();
      srv.closeAllConnections();
      await new Promise((ok) => srv.close(ok));
    }
  });

  test("a stream answered with a page ends at once, naming its Content-Type", { timeout: 20_000 }, async () => {
    // A proxy's login page (a wrong base URL) read as a stream holds no
    // event, and every reconnection would get it again.
    for (const [contentType, says] of [["text/html; charset=utf-8", 'Content-Type "text/html; charset=utf-8"'], [undefined, "no Content-Type"]] as const) {
      const asked: string[] = [];
      const srv = createServer((req, res) => {
        asked.push(req.url ?? "");
        res.writeHead(200, contentType ? { "Content-Type": contentType } : {});
        res.end("<html><body>Sign in</body></html>");
      });
      await new Promise<void>((ok) => srv.listen(0, "127.0.0.1", ok));
      const stop = new AbortController();
      try {
        const c = new VigilClient(`http://127.0.0.1:${(srv.address() as { port: number }).port}/vigil`, { token: "s3cret-token" });
        const streams = [
          ["/vigil/v1/events", c.events({ signal: stop.signal })],
          ["/vigil/v1/sessions/agent:ops:x/events", c.sessionEvents("agent:ops:x", { signal: stop.signal })],
        ] as const;
        for (const [path, stream] of streams) {
          asked.length = 0;
          const got: string[] = [];
          const e = await rejects((async () => {
            for await (const ev of stream) {
              got.push(ev.type);
              break; // a stream that took the page for a drop has resumed: enough
            }
          })(), APIError);
          assert.deepEqual([e.status, e.code, got], [200, "", []]);
          for (const part of [says, path, "not text/event-stream"]) assert.ok(e.detail.includes(part), `${e.detail} does not say ${part}`);
          assert.ok(!e.message.includes("s3cret-token"), e.message);
          assert.deepEqual(asked, [path]);
        }
      } finally {
        stop.abort();
        srv.closeAllConnections();
        await new Promise((ok) => srv.close(ok));
      }
    }
  });

  test("a history gap that leaves nothing to resume from ends the stream with an error, not a loop", { timeout: 20_000 }, async () => {
    // A gateway never answers so; something else in its place might, and
    // reconnecting at once to the same gap would never end.
    const srv = createServer((_req, res) => {
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      res.end(`: connected\n\nevent: history_gap\ndata: ${JSON.stringify({ requested: 5, prunedWatermark: 5, message: "pruned" })}\n\n`);
    });
    await new Promise<void>((ok) => srv.listen(0, "127.0.0.1", ok));
    const stop = new AbortController();
    try {
      const url = `http://127.0.0.1:${(srv.address() as { port: number }).port}`;
      const it = new VigilClient(url).events({ after: 5, signal: stop.signal, idleTimeout: 3600 })[Symbol.asyncIterator]();
      assert.equal(((await it.next()).value as StreamEvent).type, "history_gap");
      await assert.rejects(it.next(), (e: unknown) => e instanceof TransportError && /nothing retained to resume from/.test(e.message));
    } finally {
      stop.abort();
      srv.closeAllConnections();
      await new Promise((ok) => srv.close(ok));
    }
  });

  test("a Retry-After longer than a timer holds is a long wait, not a reconnection every millisecond", { timeout: 20_000 }, async () => {
    let asked = 0;
    const srv = createServer((_req, res) => {
      asked++;
      res.writeHead(503, { "Retry-After": "3000000", "Content-Type": "application/json" });
      res.end(`{"error":{"code":"unavailable","message":"draining"}}`);
    });
    await new Promise<void>((ok) => srv.listen(0, "127.0.0.1", ok));
    const stop = new AbortController();
    try {
      const it = new VigilClient(`http://127.0.0.1:${(srv.address() as { port: number }).port}`).events({ signal: stop.signal })[Symbol.asyncIterator]();
      const first = it.next();
      await new Promise((ok) => setTimeout(ok, 1000));
      stop.abort();
      assert.deepEqual(await first, { value: undefined, done: true });
      assert.equal(asked, 1);
    } finally {
      srv.closeAllConnections();
      await new Promise((ok) => srv.close(ok));
    }
  });

  test("a CRLF split between two reads ends one line, not two", async () => {
    const enc = new TextEncoder();
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(enc.encode("event: signal\r\ndata: a\r"));
        c.enqueue(enc.encode("\ndata: b\r\n\r\n"));
        c.close();
      },
    });
    const got = [];
    for await (const e of readEvents(body, () => undefined)) got.push(e);
    assert.deepEqual(got, [{ event: "signal", id: undefined, data: "a\nb" }]);
  });

  test("a resume position or idle timeout a stream cannot use is refused at once, not retried", { timeout: 20_000 }, async () => {
    let sent = 0;
    const counting = new VigilClient(gateway.url, { token: ADMIN, fetch: (...a) => (sent++, fetch(...a)) });
    const bad: [StreamOptions, RegExp][] = [
      [{ after: "7\r\nX-Forged: 1" as never }, /after must be an integer/],
      [{ after: -1 }, /after must be an integer/],
      [{ after: 1.5 }, /after must be an integer/],
      [{ after: NaN }, /after must be an integer/],
      [{ idleTimeout: 3e6 }, /idleTimeout must be a number of seconds from 0 to 86400/],
    ];
    for (const [options, named] of bad) {
      for (const open of [(o: StreamOptions) => counting.events(o), (o: StreamOptions) => counting.sessionEvents(MANAGER, o)]) {
        const abort = new AbortController();
        const it = open({ ...options, signal: abort.signal })[Symbol.asyncIterator]();
        const late = new Promise((ok) => setTimeout(ok, 2000, "no answer within 2s"));
        const got = await Promise.race([it.next().then((r) => r.value, (e: unknown) => e), late]);
        abort.abort();
        assert.ok(got instanceof APIError && got.code === "invalid_argument" && named.test(got.detail), `${JSON.stringify(options)}: got ${inspect(got)}`);
      }
    }
    assert.equal(sent, 0);
  });

  test("an idle timeout of 0 is the default, as in the Go client, and a negative one is refused", { timeout: 20_000 }, async () => {
    const srv = createServer((_req, res) => {
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      res.write(`: connected\n\nid: 7\nevent: bookmark\ndata: {"sequence":7}\n\n`);
    });
    await new Promise<void>((ok) => srv.listen(0, "127.0.0.1", ok));
    const stop = new AbortController();
    try {
      const url = `http://127.0.0.1:${(srv.address() as { port: number }).port}`;
      const it = new VigilClient(url).events({ after: 1, signal: stop.signal, idleTimeout: 0 })[Symbol.asyncIterator]();
      assert.deepEqual((await it.next()).value, { type: "bookmark", position: 7 });
      const refused = new VigilClient(url).events({ after: 1, idleTimeout: -1 })[Symbol.asyncIterator]();
      await assert.rejects(refused.next(), (e: unknown) => e instanceof APIError && e.code === "invalid_argument" && /idleTimeout/.test(e.message));
    } finally {
      stop.abort();
      srv.closeAllConnections();
      await new Promise((ok) => srv.close(ok));
    }
  });

  test("a caller slow to take an event keeps the connection: the idle timeout is the gateway's silence", { timeout: 20_000 }, async () => {
    // A coordinator's model turn may outlast the idle timeout; a
    // reconnection then would drop the live events the connection holds
    // and say resumed for nothing.
    let requests = 0;
    let settle!: (how: "kept" | "cut") => void;
    const held = new Promise<"kept" | "cut">((ok) => (settle = ok));
    const srv = createServer((req, res) => {
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      res.write(": connected\n\n");
      if (++requests > 1) return;
      res.write(`id: 1\nevent: bookmark\ndata: {"sequence":1}\n\n`);
      // A gateway's keepalives, faster than the idle timeout, while the
      // caller holds the event.
      let ticks = 0;
      const tick = setInterval(() => {
        if (++ticks <= 25) {
          res.write(": keepalive\n\n");
          return;
        }
        clearInterval(tick);
        res.write(`id: 2\nevent: bookmark\ndata: {"sequence":2}\n\n`);
        settle("kept");
      }, 100);
      req.socket.on("close", () => {
        clearInterval(tick);
        settle("cut");
      });
    });
    await new Promise<void>((ok) => srv.listen(0, "127.0.0.1", ok));
    const stop = new AbortController();
    try {
      const url = `http://127.0.0.1:${(srv.address() as { port: number }).port}`;
      const it = new VigilClient(url).events({ signal: stop.signal, idleTimeout: 1 })[Symbol.asyncIterator]();
      assert.deepEqual((await it.next()).value, { type: "bookmark", position: 1 });
      await held; // the caller is busy with the event meanwhile
      assert.deepEqual((await it.next()).value, { type: "bookmark", position: 2 });
      assert.equal(requests, 1);
    } finally {
      stop.abort();
      srv.closeAllConnections();
      await new Promise((ok) => srv.close(ok));
    }
  });

  test("a gateway silent before it answers is dropped as silent, then resumed", { timeout: 20_000 }, async () => {
    let requests = 0;
    const srv = createServer((_req, res) => {
      if (++requests === 1) return; // and never an answer
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      res.write(`: connected\n\nid: 7\nevent: bookmark\ndata: {"sequence":7}\n\n`);
    });
    await new Promise<void>((ok) => srv.listen(0, "127.0.0.1", ok));
    const stop = new AbortController();
    try {
      const url = `http://127.0.0.1:${(srv.address() as { port: number }).port}`;
      const it = new VigilClient(url).events({ after: 1, signal: stop.signal, idleTimeout: 1 })[Symbol.asyncIterator]();
      const resumed = await next(it, "resumed");
      assert.equal(resumed.position, 1);
      assert.equal((resumed.cause as Error).message, "vigil: log events: nothing heard for 1s");
      assert.deepEqual((await it.next()).value, { type: "bookmark", position: 7 });
    } finally {
      stop.abort();
      srv.closeAllConnections();
      await new Promise((ok) => srv.close(ok));
    }
  });

  /** A server answering a stream's nth connection (from 1) with answer(n, res), until done. */
  async function fakeStream(answer: (n: number, res: import("node:http").ServerResponse) => void, done: (url: string) => Promise<void>) {
    let n = 0;
    const srv = createServer((_req, res) => answer(++n, res));
    await new Promise<void>((ok) => srv.listen(0, "127.0.0.1", ok));
    try {
      await done(`http://127.0.0.1:${(srv.address() as { port: number }).port}`);
    } finally {
      srv.closeAllConnections();
      await new Promise((ok) => srv.close(ok));
    }
  }

  test("a stream refused at its limit is reported as dropped when asked", { timeout: 20_000 }, async () => {
    await fakeStream((n, res) => {
      if (n === 1) {
        res.writeHead(429, { "Content-Type": "application/json" });
        res.end(`{"error":{"code":"too_many_requests","message":"stream limit reached"}}`);
        return;
      }
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      res.write(`id: 7\nevent: bookmark\ndata: {"sequence":7}\n\n`);
    }, async (url) => {
      const stop = new AbortController();
      try {
        const it = new VigilClient(url).events({ after: 1, signal: stop.signal, reportDrops: true })[Symbol.asyncIterator]();
        const dropped = (await it.next()).value as StreamEvent;
        assert.equal(dropped.type, "dropped");
        const cause = (dropped as { cause: unknown }).cause;
        assert.ok(cause instanceof APIError && cause.status === 429 && cause.code === "too_many_requests", inspect(cause));
        assert.equal(((await it.next()).value as StreamEvent).type, "resumed");
        assert.deepEqual((await it.next()).value, { type: "bookmark", position: 7 });
      } finally {
        stop.abort();
      }
    });
  });

  test("an event whose data is corrupt ends the stream naming its id", { timeout: 20_000 }, async () => {
    let opened = 0;
    await fakeStream((n, res) => {
      opened = n;
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      res.end(`id: 7\nevent: bookmark\ndata: {"sequence":7}\n\nid: 8\nevent: signal\ndata: {"sequence":8,\n\n`);
    }, async (url) => {
      const stop = new AbortController();
      const got: string[] = [];
      try {
        await assert.rejects(async () => {
          for await (const ev of new VigilClient(url).events({ signal: stop.signal })) got.push(ev.type);
        }, (e: unknown) => e instanceof TransportError && e.message.includes("a corrupt signal event (last event id 8)"));
      } finally {
        stop.abort();
      }
      assert.deepEqual([got, opened], [["bookmark"], 1]);
    });
  });

  test("a bookmark without a position ends the stream as corrupt, as in the Go client", { timeout: 20_000 }, async () => {
    await fakeStream((_n, res) => {
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      res.end(`id: 7\nevent: bookmark\ndata: {}\n\n`);
    }, async (url) => {
      const stop = new AbortController();
      try {
        const it = new VigilClient(url).events({ signal: stop.signal })[Symbol.asyncIterator]();
        await assert.rejects(it.next(), (e: unknown) => e instanceof TransportError && e.message.includes("a corrupt bookmark event (last event id 7): no position"));
      } finally {
        stop.abort();
      }
    });
  });

  test("an event of a type the client does not know is skipped whatever its data", { timeout: 20_000 }, async () => {
    await fakeStream((_n, res) => {
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      res.write(`event: forecast\ndata: rain\n\nid: 7\nevent: bookmark\ndata: {"sequence":7}\n\n`);
    }, async (url) => {
      const stop = new AbortController();
      try {
        const it = new VigilClient(url).events({ signal: stop.signal })[Symbol.asyncIterator]();
        assert.deepEqual((await it.next()).value, { type: "bookmark", position: 7 });
      } finally {
        stop.abort();
      }
    });
  });

  test("a base URL that is not a well-formed URL is refused when the client is made", () => {
    for (const url of ["http://127.0.0.1:1/?", "http://127.0.0.1:1/#", "http://127.0.0.1:1/a b", "http://127.0.0.1:1/a\tb",
      "http://127.0.0.1:1/a%zz", "http://127.0.0.1:1/é"]) {
      assert.throws(() => new VigilClient(url), (e: unknown) => e instanceof TypeError && e.message.includes("base URL"), url);
    }
    assert.equal(new VigilClient("http://127.0.0.1:1/a%20b/").baseUrl, "http://127.0.0.1:1/a%20b");
  });

  test("a history gap is reported and the stream goes on after the watermark", async () => {
    // vigil serve keeps 50,000 events and has no retention flag, so the gap
    // comes from a server that sends what the gateway sends for a pruned
    // position (httpapi/stream.go), then the retained events.
    const asked: (string | undefined)[] = [];
    const srv = createServer((req, res) => {
      asked.push(req.headers["last-event-id"] as string | undefined);
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      if (asked.length === 1) {
        res.write(`: connected\n\nevent: history_gap\ndata: ${JSON.stringify({ requested: 1, prunedWatermark: 3, message: "pruned" })}\n\n`);
        res.end();
      } else {
        const sig = { sequence: 4, sessionKey: MANAGER, agentId: "main", kind: "goal_changed", actorType: "human", occurredAt: 1, recordedAt: 1, summary: "goal updated" };
        res.write(`: connected\n\nid: 4\nevent: signal\ndata: ${JSON.stringify(sig)}\n\n`);
      }
    });
    await new Promise<void>((ok) => srv.listen(0, "127.0.0.1", ok));
    const stop = new AbortController();
    try {
      const url = `http://127.0.0.1:${(srv.address() as { port: number }).port}`;
      const it = new VigilClient(url).events({ after: 1, signal: stop.signal })[Symbol.asyncIterator]();
      const gap = await next(it, "history_gap");
      assert.deepEqual([gap.requested, gap.prunedWatermark, gap.resumeAfter], [1, 3, 3]);
      assert.equal((await next(it, "signal")).event.sequence, 4);
      assert.deepEqual(asked.slice(0, 2), ["1", "3"]);
    } finally {
      stop.abort();
      srv.closeAllConnections();
      await new Promise((ok) => srv.close(ok));
    }
  });
});

describe("types", () => {
  // The tools' types are generated from docs/openapi.json, so tsc checks
  // the client against it; the streams' events are described only in an
  // extension of the document, so their fields are checked here.
  test("the streams' events have the document's fields", () => {
    const doc = JSON.parse(readFileSync(join(REPO, "docs", "openapi.json"), "utf8"));
    const groups = [
      ...doc.paths["/v1/events"].get.responses["200"].content["text/event-stream"]["x-vigil-events"],
      ...doc.paths["/v1/sessions/{key}/events"].get.responses["200"].content["text/event-stream"]["x-vigil-events"],
    ] as { events: string[]; data: { properties: Record<string, unknown> } }[];
    const fields = (e: string) => Object.keys(groups.find((g) => g.events.includes(e))!.data.properties).sort();
    const logEvent: Record<keyof import("../src/index.js").LogEvent, true> = {
      sequence: true, sessionKey: true, agentId: true, sessionId: true, kind: true, actorType: true, actorId: true,
      runId: true, occurredAt: true, recordedAt: true, summary: true, payload: true,
    };
    const liveEvent: Record<keyof import("../src/index.js").LiveEvent, true> = { type: true, sessionKey: true, notice: true, message: true };
    assert.deepEqual(fields("signal"), Object.keys(logEvent).sort());
    assert.deepEqual(fields("wake"), Object.keys(liveEvent).sort());
  });
});
