/**
 * vigil for the OpenAI Agents SDK: a Session that keeps a conversation's
 * items in any Session store and makes the conversation a session vigil
 * knows (recorded with session_record): a person's messages reach its
 * watchers as notices, what changed behind a run's back is put before the
 * next turn's input, and a write on a stale picture is refused with a
 * typed error the app handles by running again.
 */
import { MemorySession, type AgentInputItem, type RunContext, type RunContextAwareSession, type Session } from "@openai/agents";
import { ConflictError, type AgentEvent, type ToolInput, type VigilClient } from "@vigilhq/client";

/** What a refused write is told: the exact changes after the version it had seen. */
export interface SessionChange {
  /** The conversation's vigil session key. */
  sessionKey: string;
  /** The version the writer had seen: `changes` are those after it. */
  since: number;
  /** The session's version when the changes were read. */
  stateVersion: number;
  /** The typed changes after `since`, oldest first (never message content). */
  changes: AgentEvent[];
  /** True when retention removed part of the changes: re-read the history. */
  historyGap: boolean;
  /** The watcher's pending notice about the conversation, as vigil delivers it, when there is one. */
  notice?: string;
}

/**
 * A write refused because the conversation changed after the run read it.
 * Nothing was stored. A ConflictError of the vigil client (`stateVersion`,
 * `notice`); run the agent again: its next turn reads the new history, with
 * the changes put before its input.
 */
export class StaleSessionError extends ConflictError {
  override name = "StaleSessionError";
  constructor(readonly change: SessionChange) {
    super("session write", 409, `${change.sessionKey} changed after version ${change.since} ` +
      `(${change.changes.length} change(s), now at ${change.stateVersion}): nothing was stored; run again on the new history`,
    change.stateVersion, change.notice);
  }
}

export interface VigilSessionOptions {
  /**
   * The client the conversation is recorded with: an agent token (with
   * `recordHuman` in its config when `person` is given), acting as the
   * agent's session, which is the actor of its turns and, by default, the
   * conversation's watcher.
   */
  client: VigilClient;
  /** The conversation's vigil session key, e.g. `agent:support:chat:c-42` (vigil does not host it). */
  sessionKey: string;
  /** Where the items are kept; a MemorySession by default. */
  store?: Session;
  /** Who the user messages of this conversation come from: their handle and channel. */
  person?: { id: string; channel?: string };
  /** The session told of a person's messages and others' changes; default: the client's session. */
  parent?: string;
}

const RUN_ID_PREFIX = "openai-agents:";

/**
 * A Session (RunContextAwareSession) backed by another Session, fenced by
 * vigil. Each write (addItems, popItem, clearSession) is recorded with
 * session_record before it is stored:
 *
 * - the record is fenced (ifStateVersion, checked in the record's own
 *   write) with the version the writing run last read, or for a write
 *   outside a run the app's last read outside one: if the
 *   conversation moved since, the write is refused with StaleSessionError
 *   (nothing stored), so of two writers that read the same version only
 *   the first stores; the record also carries a dedupe key naming that
 *   version, so a retried record never counts twice;
 * - a write holding a user message is recorded as that person's message
 *   (`person`), so the conversation's watchers get a notice; other writes
 *   as the agent's turn (run_completed, which notifies nobody).
 *
 * A run's read (getItems) remembers the version, and when the
 * conversation changed since this object last read it, appends one system
 * message (the watcher's notice, then one line per change) after the
 * history, so it comes right before the turn's new input. A read outside
 * a run leaves both alone.
 *
 * One run at a time per object, as with any Session; another process or
 * device uses its own object over the same store.
 */
export class VigilSession implements Session {
  readonly acceptsRunContext = true as const;
  readonly client: VigilClient;
  readonly sessionKey: string;
  readonly store: Session;
  private readonly person: VigilSessionOptions["person"];
  private readonly parent: string | undefined;
  /** The version this object's runs last read, or it last wrote; undefined before its first read. */
  private seen: number | undefined;
  /**
   * The version the app last read outside a run. Kept apart from `seen`:
   * an app showing the history while a run is in flight must not make the
   * run's stale turn look current, nor swallow what its next run is told.
   */
  private seenOutsideRun: number | undefined;

  constructor(options: VigilSessionOptions) {
    this.client = options.client;
    this.sessionKey = options.sessionKey;
    this.store = options.store ?? new MemorySession();
    this.person = options.person;
    this.parent = options.parent ?? options.client.session;
  }

  getSessionId(): Promise<string> {
    return this.store.getSessionId();
  }

  /** The version this object's runs last read, or it last wrote. */
  get lastSeenVersion(): number | undefined {
    return this.seen;
  }

  async getItems(limit?: number, runContext?: RunContext<unknown>): Promise<AgentInputItem[]> {
    // The version is read before the items, so a write landing in between
    // makes this object's version older (a refusal, once), never newer
    // than the history it holds.
    const version = (await this.client.sessionStatus({ sessionKey: this.sessionKey })).stateVersion;
    const aware = this.aware();
    const items = aware ? await aware.getItems(limit, runContext) : await this.store.getItems(limit);
    if (!runContext) {
      this.seenOutsideRun = version;
      return items;
    }
    const before = this.seen ?? this.seenOutsideRun;
    this.seen = version;
    if (before === undefined || before === version) return items;
    // A run's read after changes: tell the model before its input. A
    // version that went back means the session was deleted in vigil (its
    // log with it), which the run is told too.
    const deleted = version < before;
    const change = await this.reconcile(before);
    if (!deleted && change.changes.length === 0 && !change.historyGap) return items;
    const lines = change.changes.map((e) => `#${e.sequence} ${e.kind} by ${e.actorType} ${e.actorId ?? ""}: ${e.summary}`.replace(/ +:/, ":"));
    if (change.historyGap) lines.push("(part of the changes were removed by retention: the history above is current)");
    const head = change.notice ?? (deleted
      ? `Session "${this.sessionKey}" was deleted in vigil after version ${before}: its log of changes is gone.`
      : `Session "${this.sessionKey}" changed after version ${before}:`);
    return [...items, { type: "message", role: "system", content: [head, ...lines].join("\n") }];
  }

  addItems(items: AgentInputItem[], runContext?: RunContext<unknown>): Promise<void> {
    const fromPerson = this.person !== undefined && items.some((i) => "role" in i && i.role === "user");
    return this.write(fromPerson
      ? { kind: "human_direct_message", actorType: "human", actorId: this.person!.id, summary: `human message via ${this.person!.channel ?? "api"}` }
      : { kind: "run_completed", summary: `agent turn: ${items.length} item(s)` },
    runContext, () => this.aware()?.addItems(items, runContext) ?? this.store.addItems(items));
  }

  popItem(runContext?: RunContext<unknown>): Promise<AgentInputItem | undefined> {
    return this.write({ kind: "run_completed", summary: "the last item removed" },
      runContext, () => this.aware()?.popItem(runContext) ?? this.store.popItem());
  }

  clearSession(runContext?: RunContext<unknown>): Promise<void> {
    return this.write({ kind: "session_reset", summary: "history cleared" },
      runContext, () => this.aware()?.clearSession(runContext) ?? this.store.clearSession());
  }

  /** The store, when it takes the run's context. */
  private aware(): RunContextAwareSession | undefined {
    return (this.store as Partial<RunContextAwareSession>).acceptsRunContext === true ? (this.store as RunContextAwareSession) : undefined;
  }

  /**
   * The typed changes after version `since` (pages of 200), with the
   * watcher's pending notice about the conversation.
   */
  async reconcile(since: number): Promise<SessionChange> {
    const changes: AgentEvent[] = [];
    let from = since;
    let historyGap = false;
    let stateVersion = since;
    for (;;) {
      const st = await this.client.sessionStatus({ sessionKey: this.sessionKey, changesSince: from, limit: 200 });
      stateVersion = st.stateVersion;
      changes.push(...(st.stateChanges?.events ?? []));
      historyGap ||= st.stateChanges?.historyGap ?? false;
      if (!st.stateChanges?.truncated) break;
      from = st.stateChanges.nextChangesSince ?? from;
    }
    const change: SessionChange = { sessionKey: this.sessionKey, since, stateVersion, changes, historyGap };
    if (this.parent) {
      // Only a session itself may read its queue; the parent is usually the client's session.
      const reader = this.parent === this.client.session ? this.client : this.client.as(this.parent);
      const pending = await reader.sessionPending({ sessionKey: this.parent }).catch(() => undefined);
      const notice = pending?.events?.find((e) => e.target === this.sessionKey)?.text;
      if (notice) change.notice = notice;
    }
    return change;
  }

  private async write<T>(what: Pick<ToolInput<"session_record">, "kind" | "summary" | "actorType" | "actorId">,
    runContext: RunContext<unknown> | undefined, store: () => Promise<T>): Promise<T> {
    // A run's write stands on what its run read; the app's own write
    // outside a run on what the app last read, or else on the runs'.
    const seen = (runContext ? this.seen : this.seenOutsideRun ?? this.seen) ??
      (await this.client.sessionStatus({ sessionKey: this.sessionKey })).stateVersion;
    const refuse = async (): Promise<never> => {
      throw new StaleSessionError(await this.reconcile(seen));
    };
    let out;
    try {
      // One call: vigil records only while the conversation is at `seen`.
      out = await this.client.sessionRecord({
        sessionKey: this.sessionKey,
        hostedBy: "openai-agents",
        ...what,
        runId: `${RUN_ID_PREFIX}${seen}`,
        dedupeKey: `${RUN_ID_PREFIX}after:${seen}`,
        ifStateVersion: seen,
        ...(this.parent ? { parent: this.parent } : {}),
      });
    } catch (e) {
      if (e instanceof ConflictError && e.precondition) await refuse();
      throw e;
    }
    if (!out.recorded) {
      if (!out.sequence) {
        throw new Error(`VigilSession: ${this.sessionKey}: vigil did not record the write (${out.reason ?? "no reason given"}); ` +
          "a person's message is recorded only for a watched session: give the session a parent");
      }
      await refuse(); // another writer recorded after the same version first
    }
    const result = await store();
    this.seen = this.seenOutsideRun = out.sequence!;
    return result;
  }
}
