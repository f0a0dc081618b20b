/**
 * A client of a vigil gateway's HTTP API (`vigil serve`): every session
 * tool, typed from the published OpenAPI document; the turn and reply of an
 * agent runtime; and the two event streams, which resume with Last-Event-ID
 * after a dropped connection and report bookmarks and history gaps.
 */
import type { components, paths } from "./openapi.js";
import { APIError, TransportError, answerText, errorFrom, errorIn, notTheGateways } from "./errors.js";
import { EventTooLargeError, MAX_EVENT_SIZE, readEvents, type ServerSentEvent } from "./sse.js";

export { APIError, ConflictError, MAX_RETRY_AFTER, TransportError, VigilError, type ErrorCode, type NoticeData } from "./errors.js";
import type { NoticeData } from "./errors.js";

type Schemas = components["schemas"];
type ToolPath = Extract<keyof paths, `/v1/tools/${string}`>;

/** The name of every tool of the gateway. */
export type ToolName = ToolPath extends `/v1/tools/${infer N}` ? N : never;
/** A tool's input, as the OpenAPI document describes it. */
export type ToolInput<N extends ToolName> = NonNullable<
  paths[`/v1/tools/${N}`]["post"]["requestBody"]
>["content"]["application/json"];
/** A tool's output, as the OpenAPI document describes it. */
export type ToolOutput<N extends ToolName> =
  paths[`/v1/tools/${N}`]["post"]["responses"][200]["content"]["application/json"];

export type StatusOutput = ToolOutput<"session_status">;
export type TurnOutput = ToolOutput<"session_turn">;
/** A change of one session as agents see it (never message content). */
export type AgentEvent = NonNullable<NonNullable<StatusOutput["stateChanges"]>["events"]>[number];
export type MessageView = NonNullable<TurnOutput["messages"]>[number];
/** A queued system event: its text and, for a notice, the notice as data. */
export type SystemEventView = NonNullable<TurnOutput["events"]>[number];
export type ErrorBody = Schemas["Error"];

/** An event of the signal log, as GET /v1/events gives it. */
export interface LogEvent {
  sequence: number;
  sessionKey: string;
  agentId: string;
  sessionId?: string;
  kind: string;
  actorType: string;
  actorId?: string;
  runId?: string;
  occurredAt: number;
  recordedAt: number;
  summary: string;
  payload?: Record<string, unknown>;
}

/** A wake, notice, message or reply of the session a stream follows. */
export interface LiveEvent {
  type: "wake" | "notice" | "message" | "reply";
  sessionKey: string;
  /** A notice that entered the session's queue: its text, its target, and the notice as data. */
  notice?: { text: string; target: string; data?: NoticeData };
  message?: MessageView;
}

/**
 * One item of a stream. `resumed` says the stream reconnected after a drop
 * (after `position`, or live when it had none yet): live events of the
 * outage were missed, so a runtime takes a turn. `history_gap` says events
 * after `requested` were pruned: re-read what you follow; the stream goes
 * on after `resumeAfter` with every event still retained. `deleted` is a
 * session stream's last item: the session was deleted (at `stateVersion`)
 * and the stream ends rather than resuming; a session made again with the
 * same key is a new one, followed anew without a position. `dropped`, with
 * the `reportDrops` option, says at once that the connection ended or an
 * attempt to connect failed (`cause` says why: an APIError of status 429
 * is the credential's stream limit), before the stream tries again.
 */
export type StreamEvent =
  | { type: "signal"; event: LogEvent }
  | { type: "change"; event: AgentEvent }
  | { type: "live"; event: LiveEvent }
  | { type: "bookmark"; position: number }
  | {
      type: "history_gap";
      requested: number;
      prunedWatermark?: number;
      earliestAvailableSequence?: number;
      message: string;
      resumeAfter: number;
    }
  | { type: "lagged"; message: string }
  | { type: "deleted"; sessionKey: string; agentId: string; stateVersion: number; message: string }
  | { type: "resumed"; position: number | null; cause: unknown }
  | { type: "dropped"; cause: unknown };

export interface ClientOptions {
  /** The bearer credential; a gateway without tokens needs none. */
  token?: string;
  /**
   * The session the client acts as (the Vigil-Session header). Without one
   * an operator or admin token acts as a person, an agent token as its
   * agent's main session.
   */
  session?: string;
  /** The fetch to use; the platform's by default. */
  fetch?: typeof fetch;
  /**
   * Seconds a call may take beyond any wait it asks for (a turn's
   * waitSeconds, a send's or a fenced status's timeoutSeconds); 30 by
   * default, as in the Python client; at most 86400. Past it the call is a
   * TransportError.
   * Streams are bounded by their idle timeout instead.
   */
  timeout?: number;
}

export interface StreamOptions {
  /** Resume after this position (an integer of at least 0): every retained event after it comes first. */
  after?: number;
  /** Stops the stream. */
  signal?: AbortSignal;
  /**
   * Seconds of silence after which the connection is taken for dead; 45
   * when absent or 0, as in the Go client; at most 86400. The time the caller takes with
   * an event does not count.
   */
  idleTimeout?: number;
  /**
   * Yield a `dropped` item as soon as a connection ends or an attempt to
   * connect fails (the gateway refusing the stream with 429 at the
   * credential's stream limit, say), before the stream waits to try again,
   * so a program learns at once that it is not connected; one for each.
   * As the Go client's ReportDrops.
   */
  reportDrops?: boolean;
}

export const SESSION_HEADER = "Vigil-Session";

/**
 * The most seconds of a client's timeout, of the wait a call is allowed
 * beyond it, and of a stream's idle timeout: a timer of 2^31 ms or more
 * fires at once.
 */
const MAX_SECONDS = 86400;

const FIRST_DELAY = 100;
const MAX_DELAY = 5000;

/** The client's method for each tool: tsc fails when the document gains a tool the client lacks. */
const methodOf: Record<ToolName, keyof VigilClient> = {
  sessions_list: "sessionsList",
  sessions_history: "sessionsHistory",
  sessions_send: "sessionsSend",
  sessions_spawn: "sessionsSpawn",
  session_status: "sessionStatus",
  sessions_unwatch: "sessionsUnwatch",
  session_goal: "sessionGoal",
  session_wait: "sessionWait",
  session_pending: "sessionPending",
  sessions_graph: "sessionsGraph",
  session_turn: "sessionTurn",
  session_reply: "sessionReply",
  session_reset: "sessionReset",
  session_delete: "sessionDelete",
  run_end: "runEnd",
  session_compact: "sessionCompact",
  session_record: "sessionRecord",
  session_adopt: "sessionAdopt",
  session_upstream_links: "sessionUpstreamLinks",
};
export const toolMethods: Readonly<Record<ToolName, keyof VigilClient>> = methodOf;

/**
 * A client of one gateway. Each tool is a method named for it in camelCase
 * (session_status is sessionStatus), taking the tool's input and returning
 * its output; `call` reaches any tool by name. Every call takes an optional
 * AbortSignal.
 */
export class VigilClient {
  readonly baseUrl: string;
  /** The bearer token, held in a private field so that printing or serialising a client never shows it. */
  readonly #token: string | undefined;
  readonly session: string | undefined;
  /** Seconds a call may take beyond any wait it asks for. */
  readonly timeout: number;
  private readonly fetch: typeof fetch;

  constructor(baseUrl = "http://127.0.0.1:7317", options: ClientOptions = {}) {
    options ??= {};
    let u: URL | undefined;
    try {
      u = new URL(baseUrl);
    } catch {
      u = undefined;
    }
    if (!u || (u.protocol !== "http:" && u.protocol !== "https:")) {
      throw new TypeError(`vigil: base URL ${JSON.stringify(withoutUserinfo(baseUrl)) ?? String(baseUrl)}: want http(s)://host[:port]`);
    }
    if (u.username || u.password) {
      // Not shown: the password is a secret.
      throw new TypeError("vigil: the base URL holds credentials, which are not sent: give the token as the token option");
    }
    // Tested on the text: the parser drops an empty "?" or "#", and
    // escapes or drops what a URL cannot carry, so what is sent would not
    // be what was written.
    if (/[?#]/.test(baseUrl)) {
      throw new TypeError(`vigil: base URL ${JSON.stringify(baseUrl)}: a query or fragment is not sent: want http(s)://host[:port][/path]`);
    }
    if (!/^[\x21-\x7e]*$/.test(baseUrl.trim()) || /%(?![0-9A-Fa-f]{2})/.test(baseUrl)) {
      throw new TypeError(`vigil: base URL ${JSON.stringify(baseUrl)}: a blank, a control character, a character beyond ASCII or a % without two hex digits: write the URL percent-escaped`);
    }
    this.baseUrl = u.origin + u.pathname.replace(/\/+$/, "");
    if (options.token !== undefined && (typeof options.token !== "string" || !headerSafe(options.token))) {
      // Else fetch refuses the header on every call, and a stream retries that without end.
      throw new TypeError("vigil: the token must be a string of printable ASCII, as a header carries it");
    }
    this.#token = options.token;
    this.session = options.session;
    const timeout = options.timeout ?? 30;
    if (typeof timeout !== "number" || !Number.isFinite(timeout) || timeout <= 0 || timeout > MAX_SECONDS) {
      throw new TypeError(`vigil: timeout must be a number of seconds above 0 and at most ${MAX_SECONDS}, got ${String(timeout)}`);
    }
    this.timeout = timeout;
    this.fetch = options.fetch ?? globalThis.fetch;
  }

  /** A copy acting as the session key (undefined: a person, or an agent token's main session). */
  as(session: string | undefined): VigilClient {
    const opts: ClientOptions = { fetch: this.fetch, timeout: this.timeout };
    if (this.#token !== undefined) opts.token = this.#token;
    if (session !== undefined) opts.session = session;
    return new VigilClient(this.baseUrl, opts);
  }

  private headers(session: string | undefined, body: boolean): Record<string, string> {
    const h: Record<string, string> = { Accept: "application/json" };
    if (body) h["Content-Type"] = "application/json";
    if (this.#token) h["Authorization"] = `Bearer ${this.#token}`;
    if (session && headerSafe(session)) h[SESSION_HEADER] = session;
    return h;
  }

  /**
   * The URL of path for a request acting as session. A key a header cannot
   * carry goes as the ?as= parameter instead: fetch sends a header's text
   * as Latin-1, refusing what Latin-1 lacks, and the gateway reads UTF-8.
   */
  private url(op: string, path: string, session: string | undefined): string {
    if (session !== undefined && session !== null && typeof session !== "string") {
      // What a caller without the types can pass: its text would act as another session.
      throw new APIError(op, 0, "invalid_argument", `acting session ${JSON.stringify(session) ?? String(session)} is not a string`);
    }
    if (!session || headerSafe(session)) return this.baseUrl + path;
    return `${this.baseUrl}${path}${path.includes("?") ? "&" : "?"}as=${quoteKey(op, session)}`;
  }

  /**
   * One request, bounded by the client's timeout plus `wait`, the seconds
   * the call asks the gateway to wait on purpose.
   */
  private async request<T>(op: string, method: string, path: string, session: string | undefined, body?: unknown,
    signal?: AbortSignal, wait = 0): Promise<T> {
    const url = this.url(op, path, session); // before the try: a bad key is the caller's, not the network's
    const payload = body === undefined ? undefined : inputJSON(op, body);
    const limit = this.timeout + Math.min(wait, MAX_SECONDS);
    // A timer takes whole milliseconds below 2^31: a fraction is a
    // RangeError, and more fires at once.
    const late = AbortSignal.timeout(Math.ceil(limit * 1000));
    const lateError = () => new TransportError(`vigil: ${op}: no answer within ${limit}s (the client's timeout)`);
    let resp: Response;
    try {
      const init: RequestInit = { method, headers: this.headers(session, payload !== undefined) };
      if (payload !== undefined) init.body = payload;
      init.signal = signal ? AbortSignal.any([signal, late]) : late;
      resp = await this.fetch(url, init);
    } catch (e) {
      if (signal?.aborted) throw e;
      if (late.aborted) throw lateError();
      throw new TransportError(`vigil: ${op}: ${(e as Error).message}`, { cause: e });
    }
    if (resp.status !== 200) throw await errorFrom(op, resp);
    const page = notTheGateways(op, resp, url, "application/json");
    if (page) {
      await resp.body?.cancel().catch(() => undefined);
      throw page;
    }
    let text: string;
    try {
      text = await answerText(op, resp);
    } catch (e) {
      // The caller's abort is what fetch gives for it before the answer,
      // not a failed connection.
      if (signal?.aborted) throw signal.reason;
      if (late.aborted) throw lateError();
      throw e;
    }
    let answer: unknown;
    try {
      answer = JSON.parse(text);
    } catch (e) {
      throw new TransportError(`vigil: ${op}: the answer is not JSON: ${(e as Error).message}`, { cause: e });
    }
    const error = errorIn(op, resp, text, answer);
    if (error) throw error;
    return answer as T;
  }

  /** Calls any tool by name. */
  call<N extends ToolName>(tool: N, input: ToolInput<N>, signal?: AbortSignal): Promise<ToolOutput<N>> {
    // The URL parser drops a tab or newline and resolves "." and "..": such
    // a name would reach another tool or route than the one named.
    const name: unknown = tool;
    if (typeof name !== "string" || !/^[\x21-\x7e]+$/.test(name) || /[/?#%]/.test(name) || name === "." || name === "..") {
      return Promise.reject(new APIError(String(tool), 0, "invalid_argument", `${JSON.stringify(tool) ?? String(tool)} is not a tool's name`));
    }
    return this.request(tool, "POST", `/v1/tools/${tool}`, this.session, input ?? {}, signal, waitOf(tool, (input ?? {}) as Record<string, unknown>));
  }

  private sessionPath(op: string, key: string, verb: string): string {
    if (key !== undefined && key !== null && typeof key !== "string") {
      // What a caller without the types can pass: refused as the gateway would.
      throw new APIError(op, 0, "invalid_argument", `sessionKey ${JSON.stringify(key) ?? String(key)} is not a string`);
    }
    if (!key || !key.trim()) throw new APIError(op, 0, "invalid_argument", "sessionKey is required");
    if (key === "." || key === "..") {
      // A URL resolves such a segment away, so the request would reach another route.
      throw new APIError(op, 0, "invalid_argument", `session key ${JSON.stringify(key)} cannot name a session's route: it is not agent-qualified`);
    }
    return `/v1/sessions/${quoteKey(op, key).replaceAll("%3A", ":")}/${verb}`;
  }

  /** Resolves when the gateway answers GET /healthz. */
  async health(signal?: AbortSignal): Promise<void> {
    await this.request("healthz", "GET", "/healthz", undefined, undefined, signal);
  }

  /** Every tool with its description and input and output JSON schemas. */
  async tools(signal?: AbortSignal): Promise<NonNullable<Schemas["ToolList"]["tools"]>> {
    const out = await this.request<Schemas["ToolList"]>("list tools", "GET", "/v1/tools", this.session, undefined, signal);
    return out.tools ?? [];
  }

  /** sessions_list: the sessions the caller may reach, a page at a time. */
  sessionsList(input: ToolInput<"sessions_list"> = {}, signal?: AbortSignal) { return this.call("sessions_list", input, signal); }
  /** sessions_history: a page of a session's transcript, oldest first: after afterId, or the newest before beforeId. */
  sessionsHistory(input: ToolInput<"sessions_history">, signal?: AbortSignal) { return this.call("sessions_history", input, signal); }
  /** sessions_send: a message and, unless timeoutSeconds is 0, the wait for the reply; without an acting session, a person's. */
  sessionsSend(input: ToolInput<"sessions_send">, signal?: AbortSignal) { return this.call("sessions_send", input, signal); }
  /** sessions_spawn: a child of the acting session, which becomes its parent. */
  sessionsSpawn(input: ToolInput<"sessions_spawn">, signal?: AbortSignal) { return this.call("sessions_spawn", input, signal); }
  /** session_status: facts and state version; with changesSince, the exact changes after it. */
  sessionStatus(input: ToolInput<"session_status">, signal?: AbortSignal) { return this.call("session_status", input, signal); }
  /** sessions_unwatch: the acting session stops watching a session. */
  sessionsUnwatch(input: ToolInput<"sessions_unwatch">, signal?: AbortSignal) { return this.call("sessions_unwatch", input, signal); }
  /** session_goal: set, edit, change the status of, or clear a goal. */
  sessionGoal(input: ToolInput<"session_goal">, signal?: AbortSignal) { return this.call("session_goal", input, signal); }
  /** session_wait: the model-facing form of a turn, for the acting session. */
  sessionWait(input: ToolInput<"session_wait"> = {}, signal?: AbortSignal) { return this.call("session_wait", input, signal); }
  /** session_pending: a session's queued notices, not consumed. */
  sessionPending(input: ToolInput<"session_pending">, signal?: AbortSignal) { return this.call("session_pending", input, signal); }
  /** sessions_graph: who watches whom, with versions and pending notices. */
  sessionsGraph(input: ToolInput<"sessions_graph"> = {}, signal?: AbortSignal) { return this.call("sessions_graph", input, signal); }
  /** session_reset: a new incarnation; its watchers are told. */
  sessionReset(input: ToolInput<"session_reset">, signal?: AbortSignal) { return this.call("session_reset", input, signal); }
  /** session_delete: the session with its transcript, log and cursors. */
  sessionDelete(input: ToolInput<"session_delete">, signal?: AbortSignal) { return this.call("session_delete", input, signal); }
  /** run_end: a child's run ended with its outcome. */
  runEnd(input: ToolInput<"run_end">, signal?: AbortSignal) { return this.call("run_end", input, signal); }
  /** session_compact: a summary replaces older messages, or a runtime's own compaction is recorded. */
  sessionCompact(input: ToolInput<"session_compact">, signal?: AbortSignal) { return this.call("session_compact", input, signal); }
  /** session_record: an event of a session your runtime keeps itself. */
  sessionRecord(input: ToolInput<"session_record">, signal?: AbortSignal) { return this.call("session_record", input, signal); }
  /** session_adopt: a coding agent's own session, adopted by its transcript. */
  sessionAdopt(input: ToolInput<"session_adopt">, signal?: AbortSignal) { return this.call("session_adopt", input, signal); }
  /** session_upstream_links: the adopted sessions' links a follower of one host checks. */
  sessionUpstreamLinks(input: ToolInput<"session_upstream_links">, signal?: AbortSignal) {
    return this.call("session_upstream_links", input, signal);
  }

  /**
   * Takes a session's turn (POST /v1/sessions/{key}/turn), acting as the
   * session itself: waits up to waitSeconds (0-60, default 30) for work,
   * then consumes its queued notices (acknowledging them) and unread
   * messages. Not idempotent: a runtime that loses the answer re-reads what
   * it follows.
   */
  async sessionTurn(input: ToolInput<"session_turn">, signal?: AbortSignal): Promise<TurnOutput> {
    const key = input?.sessionKey; // a missing input is a missing key, not a TypeError
    return this.request("session_turn", "POST", this.sessionPath("session_turn", key, "turn"), key, input, signal,
      seconds(input.waitSeconds, 30));
  }

  /** Answers as a session (POST /v1/sessions/{key}/reply), acting as it; completes the send waiting for it. */
  async sessionReply(input: ToolInput<"session_reply">, signal?: AbortSignal): Promise<ToolOutput<"session_reply">> {
    const key = input?.sessionKey;
    return this.request("session_reply", "POST", this.sessionPath("session_reply", key, "reply"), key, input, signal);
  }

  /**
   * Follows the signal log (GET /v1/events): `signal` and `bookmark` events,
   * from `after` (a log sequence) if given, else live. `session` and `agent`
   * filter.
   */
  events(options: StreamOptions & { session?: string; agent?: string } = {}): AsyncIterable<StreamEvent> {
    options ??= {};
    const path = "/v1/events" + query("log events", " filter", { session: options.session, agent: options.agent });
    return this.follow("log events", path, options, (type, data) => {
      if (type === "signal") return { type: "signal", event: data() as LogEvent };
      if (type === "bookmark") return { type: "bookmark", position: bookmark(data()) };
      return undefined;
    });
  }

  /**
   * Follows one session (GET /v1/sessions/{key}/events): its changes
   * (`change`), its `live` events and `bookmark`s, from `after` (a state
   * version) if given, else from its current version. `agent` names the
   * agent of a bare key (such as global), as a tool's agentId does.
   */
  sessionEvents(sessionKey: string, options: StreamOptions & { agent?: string } = {}): AsyncIterable<StreamEvent> {
    options ??= {};
    const path = this.sessionPath("session events", sessionKey, "events") + query("session events", "", { agent: options.agent });
    return this.follow("session events", path, options, (type, data) => {
      if (type === "signal") return { type: "change", event: data() as AgentEvent };
      if (type === "bookmark") return { type: "bookmark", position: bookmark(data()) };
      if (type === "wake" || type === "notice" || type === "message" || type === "reply") {
        return { type: "live", event: data() as LiveEvent };
      }
      return undefined;
    });
  }

  private async *follow(
    op: string,
    path: string,
    options: StreamOptions,
    decode: Decode,
  ): AsyncGenerator<StreamEvent> {
    const stop = options.signal;
    const seconds = options.idleTimeout ?? 0;
    if (typeof seconds !== "number" || !Number.isFinite(seconds) || seconds < 0 || seconds > MAX_SECONDS) {
      throw new APIError(op, 0, "invalid_argument",
        `idleTimeout must be a number of seconds from 0 to ${MAX_SECONDS} (0: 45 s), got ${String(seconds)}`);
    }
    const after = options.after ?? null;
    if (after !== null && (typeof after !== "number" || !Number.isSafeInteger(after) || after < 0)) {
      // It goes as the Last-Event-ID header: other text is refused by the
      // gateway, or by fetch before it is sent, which would be retried without end.
      throw new APIError(op, 0, "invalid_argument", `after must be an integer of at least 0, got ${String(after)}`);
    }
    const idle = (seconds || 45) * 1000;
    // Once, before any connection: a bad acting key is refused, not retried.
    const url = this.url(op, path, this.session);
    let position: number | null = after;
    let delay = FIRST_DELAY;
    let cause: unknown;
    let reconnecting = false;
    let tooLongAt: number | null | undefined; // the position an event past the bound came after
    while (!stop?.aborted) {
      const conn = new AbortController();
      let timer: ReturnType<typeof setTimeout> | undefined;
      // A consumer that stops reading leaves this generator suspended, so
      // the stop itself ends the connection and its watchdog.
      const onStop = () => {
        clearTimeout(timer);
        conn.abort(stop?.reason);
      };
      stop?.addEventListener("abort", onStop, { once: true });
      const touch = () => {
        clearTimeout(timer);
        if (conn.signal.aborted) return;
        timer = setTimeout(() => conn.abort(new TransportError(`vigil: ${op}: nothing heard for ${idle / 1000}s`)), idle);
      };
      let end: {
        gap?: { requested: number; resumeAfter: number }; lagged?: boolean; deleted?: boolean; error?: unknown; heard?: boolean;
        corrupt?: TransportError; // an event of a known type could not be read: the stream is over
      } = {};
      try {
        let resp: Response;
        try {
          const headers = this.headers(this.session, false);
          headers["Accept"] = "text/event-stream";
          if (position !== null) headers["Last-Event-ID"] = String(position);
          touch();
          resp = await this.fetch(url, { headers, signal: conn.signal });
        } catch (e) {
          if (stop?.aborted) return;
          if (conn.signal.reason instanceof TransportError) throw conn.signal.reason; // the watchdog's, worded already
          throw new TransportError(`vigil: ${op}: ${(e as Error).message}`, { cause: e });
        }
        if (resp.status !== 200) throw await errorFrom(op, resp);
        // Read as a stream it would hold no event, and each reconnection
        // would get the same page: thrown, it ends the stream (its status,
        // 200, is not one worth retrying), and the finally below closes it.
        const page = notTheGateways(op, resp, url, "text/event-stream");
        if (page) throw page;
        // The time the caller takes with an event is not the gateway's
        // silence: the watchdog rests until the caller asks for the next.
        if (reconnecting) {
          clearTimeout(timer);
          yield { type: "resumed", position, cause };
          touch();
          reconnecting = false;
        }
        try {
          for await (const ev of readEvents(resp.body!, touch)) {
            if (ev.id !== undefined && /^\d+$/.test(ev.id)) position = Number(ev.id);
            let parsed: StreamEvent | undefined;
            try {
              parsed = this.dispatch(ev, decode);
            } catch (e) {
              // Ends the stream: a reconnection after the event would lose
              // it unseen, and one before it would read it again.
              end.corrupt = new TransportError(
                `vigil: ${op}: a corrupt ${ev.event} event (last event id ${ev.id ?? position ?? "none"}): ${(e as Error).message}`, { cause: e });
              break;
            }
            if (!parsed) continue;
            if (parsed.type === "history_gap") end.gap = { requested: parsed.requested, resumeAfter: parsed.resumeAfter };
            else if (parsed.type === "lagged") end.lagged = true;
            else if (parsed.type === "deleted") end.deleted = true;
            else end.heard = true;
            clearTimeout(timer);
            if (end.deleted) {
              // The last item: the finally below closes the connection
              // whether or not the caller asks for more.
              yield parsed;
              return;
            }
            yield parsed;
            if (end.gap || end.lagged) break;
            touch();
          }
        } catch (e) {
          end.error = conn.signal.reason instanceof TransportError ? conn.signal.reason : e;
        }
      } catch (e) {
        if (stop?.aborted) return;
        if (e instanceof APIError && e.status !== 408 && e.status !== 429 && e.status < 500) throw e;
        end = { error: e };
      } finally {
        clearTimeout(timer);
        stop?.removeEventListener("abort", onStop);
        conn.abort();
      }
      if (stop?.aborted) return;
      if (end.corrupt) throw end.corrupt;
      if (end.heard) delay = FIRST_DELAY;
      if (end.gap !== undefined) {
        // At once, as the retained events are there; a position that did
        // not move would ask for the same gap again and again.
        if (end.gap.resumeAfter <= end.gap.requested) {
          throw new TransportError(`vigil: ${op}: history gap after ${end.gap.requested}, and nothing retained to resume from`);
        }
        position = end.gap.resumeAfter;
        continue;
      }
      if (end.lagged) continue;
      if (end.error instanceof EventTooLargeError) {
        // Once, a proxy's page, say: resumed. Again at the same position,
        // it would come on every reconnection.
        const error = new TransportError(
          `vigil: ${op}: an event larger than ${MAX_EVENT_SIZE >> 20} MiB after position ${position}: what answers is not a vigil gateway's stream`,
          { cause: end.error });
        if (tooLongAt === position) throw error;
        tooLongAt = position;
        end.error = error;
      }
      cause = end.error ?? new TransportError(`vigil: ${op}: the gateway closed the stream`);
      reconnecting = true;
      if (options.reportDrops) yield { type: "dropped", cause };
      const wait = cause instanceof APIError && cause.retryAfter ? cause.retryAfter * 1000 : delay;
      delay = Math.min(2 * delay, MAX_DELAY);
      await sleep(wait, stop);
    }
  }

  /** The event decoded, or undefined for a type this client does not know, whose data is left unread. */
  private dispatch(ev: ServerSentEvent, decode: Decode): StreamEvent | undefined {
    const data = () => jsonObject(ev.data);
    if (ev.event === "history_gap") {
      const g = data() as { requested: number; prunedWatermark?: number; earliestAvailableSequence?: number; message: string };
      const resumeAfter = g.prunedWatermark ? g.prunedWatermark : Math.max((g.earliestAvailableSequence ?? 0) - 1, 0);
      return { type: "history_gap", ...g, resumeAfter };
    }
    if (ev.event === "lagged") return { type: "lagged", message: (data() as { message?: string }).message ?? "" };
    if (ev.event === "deleted") {
      const d = data() as { sessionKey?: string; agentId?: string; stateVersion?: number; message?: string };
      return { type: "deleted", sessionKey: d.sessionKey ?? "", agentId: d.agentId ?? "", stateVersion: d.stateVersion ?? 0, message: d.message ?? "" };
    }
    return decode(ev.event, data);
  }
}

/**
 * The key percent-encoded as UTF-8 for a URL. A string holding a UTF-16
 * surrogate without its pair has no UTF-8 form: it is the caller's
 * mistake, refused as one.
 */
function quoteKey(op: string, key: string, what = "session key"): string {
  try {
    return encodeURIComponent(key);
  } catch {
    throw new APIError(op, 0, "invalid_argument", `${what} ${JSON.stringify(key)} is not valid Unicode: it holds a UTF-16 surrogate without its pair`);
  }
}

/**
 * A stream's query of the parameters given ("" when none is); `what`
 * follows a parameter's name where an error names it. Not
 * URLSearchParams: it sends a surrogate without its pair as U+FFFD, a
 * value other than the one asked for.
 */
function query(op: string, what: string, params: Record<string, unknown>): string {
  const q: string[] = [];
  for (const [name, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === "") continue;
    if (typeof v !== "string") {
      throw new APIError(op, 0, "invalid_argument", `${name}${what} ${JSON.stringify(v) ?? String(v)} is not a string`);
    }
    q.push(`${name}=${quoteKey(op, v, `${name}${what}`)}`);
  }
  return q.length ? `?${q.join("&")}` : "";
}

/**
 * The input as JSON text. What JSON cannot carry is the caller's mistake,
 * refused before anything is sent: JSON.stringify would throw a TypeError
 * for a BigInt or a cycle, and would write NaN and the infinities as null,
 * which the gateway reads as a field left out (an ifStateVersion of NaN
 * would be a write without its fence).
 */
function inputJSON(op: string, input: unknown): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(input, (name: string, value: unknown) => {
      const field = name ? `field ${name}: ` : "";
      if (typeof value === "number" && !Number.isFinite(value)) throw new RangeError(`${field}${value} is not a number JSON can carry`);
      if (typeof value === "bigint") throw new RangeError(`${field}${value}n is a BigInt, which JSON cannot carry: give a number`);
      return value;
    });
  } catch (e) {
    throw new APIError(op, 0, "invalid_argument", `the input cannot be sent as JSON: ${(e as Error).message}`);
  }
  if (text === undefined) {
    throw new APIError(op, 0, "invalid_argument", `the input cannot be sent as JSON: ${typeof input} has no JSON form`);
  }
  return text;
}

/**
 * A URL as a refusal shows it: all before its last "@" after the scheme (a
 * user name and password, or more) hidden, as a URL that is refused cannot
 * be trusted to parse. What is not a string is shown as it is.
 */
function withoutUserinfo(url: unknown): unknown {
  if (typeof url !== "string") return url;
  const at = url.lastIndexOf("@");
  if (at < 0) return url;
  const scheme = url.indexOf("://");
  const start = scheme >= 0 && scheme < at ? scheme + 3 : 0;
  return `${url.slice(0, start)}xxxxx${url.slice(at)}`;
}

/** Whether a header can carry the key as it is: printable ASCII only. */
function headerSafe(key: string): boolean {
  return /^[\x20-\x7e]*$/.test(key);
}

/** A number of seconds asked for, or else the gateway's default. */
function seconds(asked: unknown, otherwise: number): number {
  return typeof asked === "number" && Number.isFinite(asked) && asked >= 0 ? asked : otherwise;
}

/** The seconds a tool's call asks the gateway to wait on purpose (a long poll), with the gateway's defaults. */
function waitOf(tool: string, input: Record<string, unknown>): number {
  switch (tool) {
    case "sessions_send":
    case "session_wait":
      return seconds(input["timeoutSeconds"], 30);
    case "session_turn":
      return seconds(input["waitSeconds"], 30);
    case "session_status":
      return input["waitForVersion"] === undefined ? 0 : seconds(input["timeoutSeconds"], 30);
    default:
      return 0;
  }
}

/** Decodes a stream's event by its type, reading its data only for a type it knows; undefined for one it does not. */
type Decode = (type: string, data: () => unknown) => StreamEvent | undefined;

/** An event's data, which the gateway always sends as a JSON object. */
function jsonObject(text: string): object {
  const v: unknown = JSON.parse(text);
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new SyntaxError("the data is not a JSON object");
  return v;
}

function bookmark(data: unknown): number {
  const b = data as { sequence?: unknown; stateVersion?: unknown };
  const position = b.sequence ?? b.stateVersion;
  if (typeof position !== "number") throw new SyntaxError("no position");
  return position;
}

/** Waits ms (at most a timer's 2^31-1: past it a timer fires at once), or until signal. */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, Math.min(ms, 2 ** 31 - 1));
    signal?.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
  });
}
