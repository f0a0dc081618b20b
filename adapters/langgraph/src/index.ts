/**
 * vigil for LangGraph: a checkpointer that fences every write of a thread,
 * so two writers on one thread cannot fork its checkpoint chain, and a
 * writer whose picture of the thread is stale is refused, told exactly
 * what changed, and retries on top of it.
 *
 * A thread is a session vigil does not host (its state lives in the
 * checkpointer): each checkpoint is recorded in vigil with session_record,
 * so watchers, notices and `session_status changesSince` work for threads
 * as for any session.
 */
import { createHash } from "node:crypto";
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  BaseCheckpointSaver,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointTuple,
  type PendingWrite,
} from "@langchain/langgraph-checkpoint";
import { Annotation } from "@langchain/langgraph";
import { APIError, ConflictError, type AgentEvent, type ToolInput, type ToolOutput, type VigilClient } from "@vigilhq/client";

/** What a refused writer is told: the exact changes after the version it had seen. */
export interface ThreadChange {
  threadId: string;
  checkpointNs: string;
  /** The thread's vigil session key. */
  sessionKey: string;
  /**
   * "fork": another writer already extended the checkpoint this write
   * extends; "changed": the thread changed in vigil outside the graph (a
   * person's message, a goal, a reset) after this writer's picture of it.
   */
  reason: "fork" | "changed";
  /** The version this writer had seen: `changes` are those after it. */
  since: number;
  /**
   * The thread's version when the changes were read; below `since` when
   * the thread was deleted in vigil (its log with it) after `since`.
   */
  stateVersion: number;
  /** The typed changes after `since`, oldest first (never message content). */
  changes: AgentEvent[];
  /** True when retention removed part of the changes: re-read the thread. */
  historyGap: boolean;
  /** For a fork, the write that extended the same checkpoint first. */
  winner?: AgentEvent;
  /**
   * The refused checkpoint: when its source is "input", the run stored
   * nothing; otherwise its input and earlier steps are in the thread, and
   * only the steps from this one on were lost.
   */
  refused: { checkpointId: string; source: CheckpointMetadata["source"]; step: number };
  /** The watcher's pending notice about the thread, as vigil delivers it, when there is one. */
  notice?: string;
}

/**
 * A write of a thread refused because the writer's picture of it is stale.
 * Nothing was stored. It is a ConflictError of the vigil client, with
 * `stateVersion` the thread's version, so one handler serves both.
 */
export class ThreadConflictError extends ConflictError {
  override name = "ThreadConflictError";
  constructor(readonly change: ThreadChange) {
    const what = change.reason === "fork"
      ? `another writer already extended this checkpoint (${describe(change.winner)})`
      : `the thread changed after version ${change.since} (${change.changes.length} change(s))`;
    super("checkpoint put", 409, `thread ${JSON.stringify(change.threadId)}: ${what}: nothing was stored; ` +
      `reconciled up to version ${change.stateVersion}: run the graph again`, change.stateVersion, change.notice);
  }
}

function describe(e: AgentEvent | undefined): string {
  return e ? `${e.kind} by ${e.actorType} ${e.actorId ?? ""}`.trim() + ` at version ${e.sequence}` : "unknown";
}

/** The prefix of the runId of every checkpoint recorded by this package. */
export const RUN_ID_PREFIX = "langgraph:";

/** What vigil shows as hosting the threads (session_record's hostedBy). */
const HOSTED_BY = "langgraph";

/** How often a put is fenced again while only other checkpoints move its thread. */
const MAX_FENCE_ATTEMPTS = 32;

const isCheckpointRecord = (e: AgentEvent) => (e.runId ?? "").startsWith(RUN_ID_PREFIX);

/**
 * The vigil session key of a LangGraph thread: `agent:<agentId>:langgraph:<threadId>`.
 * vigil keys are lower case, so a thread id that is not already made of
 * lower-case letters, digits, '.', '_' and '-' (a UUID or a slug is) is
 * written as `agent:<agentId>:langgraph:hex:<hex of its UTF-8>`; the two
 * forms cannot meet, since a plain id has no ':'.
 */
export function threadSessionKey(agentId: string, threadId: string): string {
  if (!agentId || /[:\s]/.test(agentId)) throw new TypeError(`agent id ${JSON.stringify(agentId)}: want a non-empty id without ':' or spaces`);
  if (typeof threadId !== "string" || threadId === "") throw new TypeError("thread_id: want a non-empty string");
  const plain = /^[a-z0-9._-]+$/.test(threadId);
  const part = plain ? threadId : "hex:" + Buffer.from(threadId, "utf8").toString("hex");
  const key = `agent:${agentId.toLowerCase()}:langgraph:${part}`;
  if (Buffer.byteLength(key) > 512) throw new TypeError(`thread_id ${JSON.stringify(threadId.slice(0, 40))}…: its session key is longer than 512 bytes`);
  return key;
}

export interface VigilCheckpointerOptions {
  /**
   * The client the writer records with: an agent token (with `recordHuman`
   * in its config when runs carry `vigil_person`), acting as the writer's
   * session (its `session`), which is recorded as the actor.
   */
  client: VigilClient;
  /** The agent the threads belong to; their keys are `agent:<agentId>:langgraph:<threadId>`. */
  agentId: string;
  /** Maps a thread id to its session key instead (must stay under agentId's reach). */
  sessionKey?: (threadId: string) => string;
  /**
   * The session that watches the threads: it gets a notice when someone
   * other than itself changes one (a person's input, say). Default: the
   * client's acting session.
   */
  parent?: string;
}

type VigilMetadata = { vigil?: { sessionKey: string; version: number } };

const configurable = (config: RunnableConfig) => (config.configurable ?? {}) as Record<string, unknown>;

/**
 * Wraps any checkpointer so every checkpoint put of a thread is fenced in
 * vigil, where the thread is a session of its own (threadSessionKey):
 *
 * - Each put is recorded (session_record) before the inner saver stores
 *   it, under a dedupe key naming the checkpoint it extends, which vigil
 *   accepts once: of two writers extending the same checkpoint, the second
 *   is refused and stores nothing, so the chain cannot fork.
 * - The record is fenced with the version this writer last saw
 *   (ifStateVersion, in the record's own write): a change made outside the
 *   graph since refuses the write too, once, with no window between the
 *   check and the record; the refusal hands it over.
 *
 * A refused put rejects with ThreadConflictError (the graph's invoke
 * rejects with it), carrying the exact changes. invokeFenced retries on it.
 * Every checkpoint's metadata carries `vigil: {sessionKey, version}`, the
 * thread's version its record made.
 *
 * A run given `configurable.vigil_person` (a person's handle, e.g.
 * "telegram:42") records its input checkpoint as that person's message, so
 * the thread's watchers get a notice; its other checkpoints, and every
 * checkpoint of other runs, are recorded as the writer's own progress
 * (run_completed, which notifies nobody).
 */
export class VigilCheckpointer extends BaseCheckpointSaver {
  readonly inner: BaseCheckpointSaver;
  readonly client: VigilClient;
  private readonly agentId: string;
  private readonly keyOf: (threadId: string) => string;
  private readonly parent: string | undefined;
  /** Checkpoint id -> the version its record made (known ones only). */
  private readonly versions = new Map<string, number>();
  /**
   * Thread -> the version up to which changes were handed to the graph in
   * a refusal (`through`), and, once a deletion of the thread in vigil was
   * handed, the last version before it (`deletedAfter`): checkpoints
   * recorded up to it belong to the deleted thread.
   */
  private readonly handed = new Map<string, { through: number; deletedAfter?: number }>();
  /** Checkpoint id -> the refusal of its put, so its pending writes are refused too. */
  private readonly refused = new Map<string, ThreadConflictError>();
  /** Session key -> its last session_reset, as of the version its changes were read through. */
  private readonly incarnations = new Map<string, { reset: number; through: number }>();

  constructor(inner: BaseCheckpointSaver, options: VigilCheckpointerOptions) {
    super(inner.serde);
    this.inner = inner;
    this.client = options.client;
    this.agentId = options.agentId;
    this.keyOf = options.sessionKey ?? ((threadId) => threadSessionKey(this.agentId, threadId));
    this.parent = options.parent ?? options.client.session;
  }

  /** The thread's vigil session key. */
  sessionKeyOf(threadId: string): string {
    return this.keyOf(threadId);
  }

  override async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const tuple = await this.inner.getTuple(config);
    if (tuple) this.remember(tuple);
    return tuple;
  }

  override list(config: RunnableConfig, options?: CheckpointListOptions): AsyncGenerator<CheckpointTuple> {
    return this.inner.list(config, options);
  }

  override async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    const c = configurable(config);
    const threadId = c["thread_id"];
    if (typeof threadId !== "string" || threadId === "") throw new TypeError("VigilCheckpointer: configurable.thread_id must be a non-empty string");
    const ns = typeof c["checkpoint_ns"] === "string" ? c["checkpoint_ns"] : "";
    const parentId = typeof c["checkpoint_id"] === "string" && c["checkpoint_id"] ? c["checkpoint_id"] : undefined;
    const sessionKey = this.keyOf(threadId);

    // A checkpoint extends its parent; a thread's first checkpoint extends
    // the thread's current incarnation (its last reset).
    const base = parentId !== undefined ? await this.versionOf(config, parentId) : await this.incarnation(sessionKey);
    const handed = this.handed.get(threadId);
    const seen = handed?.deletedAfter !== undefined && base <= handed.deletedAfter ? handed.through : Math.max(base, handed?.through ?? 0);
    const refuse = async (reason: ThreadChange["reason"], winner?: AgentEvent): Promise<never> => {
      const refused = { checkpointId: checkpoint.id, source: metadata.source, step: metadata.step };
      const change = await this.reconcile(threadId, ns, sessionKey, seen, reason, refused, winner);
      const before = this.handed.get(threadId);
      this.handed.set(threadId, change.stateVersion < seen
        ? { through: change.stateVersion, deletedAfter: Math.max(seen, before?.deletedAfter ?? 0) }
        : { ...before, through: Math.max(before?.through ?? 0, change.stateVersion) });
      const err = new ThreadConflictError(change);
      this.refused.set(checkpoint.id, err);
      trim(this.refused, 256);
      throw err;
    };

    const person = typeof c["vigil_person"] === "string" && c["vigil_person"] ? c["vigil_person"] : undefined;
    const channel = typeof c["vigil_channel"] === "string" && c["vigil_channel"] ? c["vigil_channel"] : "langgraph";
    const fromPerson = person !== undefined && metadata.source === "input";
    const runId = RUN_ID_PREFIX + checkpoint.id;
    const record: ToolInput<"session_record"> = {
      sessionKey,
      hostedBy: HOSTED_BY,
      runId,
      dedupeKey: dedupeKey(ns, parentId === undefined ? `root@${base}` : `after:${parentId}`),
      ...(this.parent ? { parent: this.parent } : {}),
      ...(fromPerson
        ? { kind: "human_direct_message", actorType: "human", actorId: person, summary: `human message via ${channel}` }
        : { kind: "run_completed", summary: `langgraph checkpoint (${metadata.source}, step ${metadata.step})${ns ? ` in ${ns.slice(0, 80)}` : ""}` }),
    };
    const out = await this.recordFenced(sessionKey, record, seen, () => refuse("changed"));
    if (!out.recorded) {
      if (!out.sequence) {
        throw new Error(`VigilCheckpointer: ${sessionKey}: vigil did not record the put (${out.reason ?? "no reason given"}); ` +
          "a person's input is recorded only for a watched thread: give the checkpointer a parent");
      }
      const winner = await this.eventAt(sessionKey, out.sequence);
      // The same checkpoint recorded before (a retried put) is ours.
      if (winner?.runId !== runId) await refuse("fork", winner);
    }
    const version = out.sequence!;
    this.versions.set(checkpoint.id, version);
    trim(this.versions, 4096);
    const meta = { ...metadata, vigil: { sessionKey, version } } as CheckpointMetadata;
    return this.inner.put(config, checkpoint, meta, newVersions);
  }

  override async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void> {
    const id = configurable(config)["checkpoint_id"];
    const refusal = typeof id === "string" ? this.refused.get(id) : undefined;
    if (refusal) throw refusal;
    return this.inner.putWrites(config, writes, taskId, taskPath);
  }

  /** Deletes the thread's checkpoints and records a session_reset, so its watchers are told and its next root is fenced anew. */
  override async deleteThread(threadId: string): Promise<void> {
    await this.inner.deleteThread(threadId);
    await this.client.sessionRecord({
      sessionKey: this.keyOf(threadId), hostedBy: HOSTED_BY, kind: "session_reset", summary: "langgraph thread deleted",
      ...(this.parent ? { parent: this.parent } : {}),
    });
    this.handed.delete(threadId);
  }

  override getNextVersion(current: number | undefined): number {
    return this.inner.getNextVersion(current);
  }

  override getDeltaChannelHistory(options: Parameters<BaseCheckpointSaver["getDeltaChannelHistory"]>[0]) {
    return this.inner.getDeltaChannelHistory(options);
  }

  /**
   * Records `record` only while the thread is at version `seen`, in one
   * call (ifStateVersion). When it moved, the changes since are read: any
   * made outside the graph (or pruned), or a version that went back (the
   * thread deleted in vigil), calls `changed`, which refuses the write;
   * checkpoints alone (the thread's other namespaces, or another
   * writer, whose fork the record's dedupe key refuses) fence the record
   * again from the version they left.
   */
  private async recordFenced(sessionKey: string, record: ToolInput<"session_record">, seen: number,
    changed: () => Promise<never>): Promise<ToolOutput<"session_record">> {
    let expect = seen;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.client.sessionRecord({ ...record, ifStateVersion: expect });
      } catch (e) {
        if (!(e instanceof ConflictError && e.precondition)) throw e;
      }
      const since = await this.changesSince(sessionKey, expect);
      if (since.historyGap || since.stateVersion < expect || since.events.some((e) => !isCheckpointRecord(e))) await changed();
      if (attempt >= MAX_FENCE_ATTEMPTS) {
        throw new Error(`VigilCheckpointer: ${sessionKey} kept moving with other checkpoints (${attempt} attempts to record after version ${seen})`);
      }
      expect = since.stateVersion;
    }
  }

  /**
   * The typed changes of the thread after version `since`, read in pages
   * (at most `maxPages` of 200); `historyGap` when retention removed some.
   */
  async changesSince(sessionKey: string, since: number, maxPages = 50): Promise<{ stateVersion: number; events: AgentEvent[]; historyGap: boolean }> {
    const events: AgentEvent[] = [];
    let from = since;
    let gap = false;
    for (let page = 0; ; page++) {
      const st = await this.client.sessionStatus({ sessionKey, changesSince: from, limit: 200 });
      const ch = st.stateChanges;
      events.push(...(ch?.events ?? []));
      gap ||= ch?.historyGap ?? false;
      if (!ch?.truncated || page + 1 >= maxPages) {
        return { stateVersion: st.stateVersion, events, historyGap: gap || Boolean(ch?.truncated) };
      }
      from = ch.nextChangesSince ?? from;
    }
  }

  private async reconcile(threadId: string, ns: string, sessionKey: string, since: number,
    reason: ThreadChange["reason"], refused: ThreadChange["refused"], winner?: AgentEvent): Promise<ThreadChange> {
    const { stateVersion, events, historyGap } = await this.changesSince(sessionKey, since);
    const change: ThreadChange = { threadId, checkpointNs: ns, sessionKey, reason, since, stateVersion, changes: events, historyGap, refused };
    if (winner) change.winner = winner;
    if (this.parent) {
      // The notice is queued for the watcher; only a session itself may
      // read its queue, and a credential that may not act as the watcher
      // gets the refusal without its notice.
      const reader = this.parent === this.client.session ? this.client : this.client.as(this.parent);
      const pending = await reader.sessionPending({ sessionKey: this.parent }).catch((e: unknown) => {
        if (e instanceof APIError && e.code === "permission_denied") return undefined;
        throw e;
      });
      const notice = (pending?.events ?? []).find((e) => e.target === sessionKey);
      if (notice?.text) change.notice = notice.text;
    }
    return change;
  }

  /**
   * The sequence of the thread's last session_reset, 0 when it has none.
   * Read once from the start, then only past the version read through: a
   * root checkpoint (each subgraph's first, in its namespace) would
   * otherwise read the thread's whole history. A gap after that version
   * (retention, or the session deleted) reads what remains from the start.
   */
  private async incarnation(sessionKey: string): Promise<number> {
    const known = this.incarnations.get(sessionKey);
    let read = await this.changesSince(sessionKey, known?.through ?? 0, Number.MAX_SAFE_INTEGER);
    let reset = known?.reset ?? 0;
    if (known && (read.historyGap || read.stateVersion < known.through)) {
      read = await this.changesSince(sessionKey, 0, Number.MAX_SAFE_INTEGER);
      reset = 0;
    }
    reset = read.events.reduce((last, e) => (e.kind === "session_reset" ? e.sequence : last), reset);
    this.incarnations.set(sessionKey, { reset, through: read.stateVersion });
    trim(this.incarnations, 4096);
    return reset;
  }

  private async eventAt(sessionKey: string, sequence: number): Promise<AgentEvent | undefined> {
    const st = await this.client.sessionStatus({ sessionKey, changesSince: sequence - 1, limit: 1 });
    return st.stateChanges?.events?.find((e) => e.sequence === sequence);
  }

  private remember(tuple: CheckpointTuple): void {
    const v = (tuple.metadata as VigilMetadata | undefined)?.vigil?.version;
    if (typeof v === "number") {
      this.versions.set(tuple.checkpoint.id, v);
      trim(this.versions, 4096);
    }
  }

  /** The version the record of checkpoint id made: 0 for a checkpoint stored without this wrapper. */
  private async versionOf(config: RunnableConfig, id: string): Promise<number> {
    const known = this.versions.get(id);
    if (known !== undefined) return known;
    const c = configurable(config);
    const tuple = await this.inner.getTuple({ configurable: { thread_id: c["thread_id"], checkpoint_ns: c["checkpoint_ns"] ?? "", checkpoint_id: id } });
    if (tuple) this.remember(tuple);
    return this.versions.get(id) ?? 0;
  }
}

function dedupeKey(ns: string, position: string): string {
  const n = Buffer.byteLength(ns) > 200 ? "sha256-" + createHash("sha256").update(ns).digest("hex") : ns;
  return `${RUN_ID_PREFIX}${n}:${position}`;
}

function trim<K, V>(m: Map<K, V>, max: number): void {
  while (m.size > max) m.delete(m.keys().next().value as K);
}

/**
 * A state channel for graphs that want to be told what changed behind
 * their back: spread `VigilAnnotation.spec` into the graph's
 * Annotation.Root and read `state.vigil` in a node. invokeFenced sets it to
 * the ThreadChange that refused the previous attempt, and to null on a
 * first attempt.
 */
export const VigilAnnotation = Annotation.Root({
  vigil: Annotation<ThreadChange | null>({
    reducer: (_previous: ThreadChange | null, next: ThreadChange | null) => next ?? null,
    default: () => null,
  }),
});

/** What invokeFenced needs of a compiled graph. */
export interface FencedGraph<I, O> {
  invoke(input: I, config?: RunnableConfig & Record<string, unknown>): Promise<O>;
  getState(config: RunnableConfig): Promise<{ next: string[] | readonly string[]; tasks: readonly { interrupts?: readonly unknown[] }[] }>;
  channels?: Record<string, unknown>;
}

export interface FencedInvokeOptions {
  /** The graph's checkpointer (the one it was compiled with). */
  checkpointer: VigilCheckpointer;
  /** Attempts in all, the first included; default 5. */
  maxAttempts?: number;
  /** How long to wait for another writer's run on the thread to finish before a retry; default 120 s. */
  settleTimeoutSeconds?: number;
  /** Called with each refusal before the retry. */
  onConflict?: (error: ThreadConflictError, attempt: number) => void | Promise<void>;
}

/**
 * Invokes the graph on a thread; when a write is refused (another writer
 * got there first, or the thread changed outside the graph), waits until
 * the other writer's run on the thread has finished, then runs again on
 * top of it, with the refusal's ThreadChange in `state.vigil` when the
 * graph has that channel (VigilAnnotation). A run refused at its input
 * stored nothing and is given its input again; a run refused later has its
 * input in the thread already, and is run again with the change alone
 * (`{vigil: change}`; with no `vigil` channel, with no input, which resumes
 * whatever the thread has left to do).
 *
 * Runs with `durability: "sync"` unless the config says otherwise, so a
 * refused run stops at the end of the step in which its write was refused
 * rather than running on to its end.
 */
export async function invokeFenced<I, O>(graph: FencedGraph<I, O>, input: I, config: RunnableConfig & Record<string, unknown>,
  options: FencedInvokeOptions): Promise<O> {
  const attempts = options.maxAttempts ?? 5;
  const hasChannel = graph.channels !== undefined && "vigil" in graph.channels;
  const handOver = (change: ThreadChange | null): I =>
    hasChannel && input !== null && typeof input === "object" && !Array.isArray(input) ? { ...input, vigil: change } : input;
  const changeOnly = (change: ThreadChange): I => (hasChannel ? { vigil: change } : null) as I;
  let attemptInput = handOver(null);
  for (let attempt = 1; ; attempt++) {
    try {
      return await graph.invoke(attemptInput, { durability: "sync", ...config });
    } catch (e) {
      if (!(e instanceof ThreadConflictError) || attempt >= attempts) throw e;
      await options.onConflict?.(e, attempt);
      await settle(graph, config, options.checkpointer, (options.settleTimeoutSeconds ?? 120) * 1000);
      attemptInput = e.change.refused.source === "input" ? handOver(e.change) : changeOnly(e.change);
    }
  }
}

/**
 * Resolves once the thread has no run in progress: every checkpoint
 * recorded in vigil is stored, and the newest has no tasks left (or is
 * waiting on an interrupt). Waits on the thread's version in vigil, so a
 * writer's next checkpoint ends the wait at once.
 */
async function settle<I, O>(graph: FencedGraph<I, O>, config: RunnableConfig, cp: VigilCheckpointer, timeoutMs: number): Promise<void> {
  const threadId = configurable(config)["thread_id"] as string;
  const sessionKey = cp.sessionKeyOf(threadId);
  const deadline = Date.now() + timeoutMs;
  let pause = 10;
  for (;;) {
    const version = (await cp.client.sessionStatus({ sessionKey })).stateVersion;
    const head = await cp.inner.getTuple({ configurable: { thread_id: threadId, checkpoint_ns: "" } });
    const headVersion = (head?.metadata as VigilMetadata | undefined)?.vigil?.version ?? 0;
    const unstored = headVersion < version && (await cp.changesSince(sessionKey, headVersion)).events.some(isCheckpointRecord);
    const state = await graph.getState({ configurable: { thread_id: threadId } });
    const running = state.next.length > 0 && !state.tasks.some((t) => (t.interrupts?.length ?? 0) > 0);
    if (!unstored && !running) return;
    const left = deadline - Date.now();
    if (left <= 0) {
      throw new Error(`invokeFenced: thread ${JSON.stringify(threadId)} still has a run in progress after ${timeoutMs / 1000}s ` +
        `(${unstored ? "a checkpoint recorded in vigil is not in the checkpointer" : `next: ${state.next.join(", ")}`})`);
    }
    if (unstored) {
      // The other writer stores the checkpoint it recorded right after
      // recording it: poll the checkpointer briefly.
      await new Promise((ok) => setTimeout(ok, Math.min(pause, left)));
      pause = Math.min(pause * 2, 500);
    } else {
      await cp.client.sessionStatus({ sessionKey, waitForVersion: version + 1, timeoutSeconds: Math.max(1, Math.min(30, Math.floor(left / 1000))) });
    }
  }
}
