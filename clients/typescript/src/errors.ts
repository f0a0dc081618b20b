import type { components } from "./openapi.js";

/** The gateway's error codes. */
export type ErrorCode =
  | "invalid_argument"
  | "unauthenticated"
  | "permission_denied"
  | "not_found"
  | "request_timeout"
  | "conflict"
  | "payload_too_large"
  | "too_many_requests"
  | "internal"
  | "unavailable";

/** Every error of this package. */
export class VigilError extends Error {
  override name = "VigilError";
}

/** The gateway could not be reached, or the connection failed. */
export class TransportError extends VigilError {
  override name = "TransportError";
}

/**
 * An error answer of the gateway; nothing stored was changed. `code` is the
 * gateway's code ("" when the answer was not its JSON, as from a proxy),
 * `detail` names the field or rule at fault ("HTTP 404: not_found" when the
 * gateway gave a code without a message), `retryAfter` is the seconds
 * the gateway asked to wait (answers 429 and 503; at most MAX_RETRY_AFTER,
 * which a stream waits before reconnecting), `requestId` the id of the
 * gateway's log line holding the details of a failure of its own (500, a
 * failed store's 503), `op` what was asked.
 */
export class APIError extends VigilError {
  override name = "APIError";
  constructor(
    readonly op: string,
    readonly status: number,
    readonly code: ErrorCode | "",
    readonly detail: string,
    readonly retryAfter?: number,
    readonly requestId?: string,
  ) {
    super(`vigil: ${op}: ${detail}`);
  }
}

/** A notice as data, beside its text (the gateway's NoticeData). */
export type NoticeData = NonNullable<components["schemas"]["Error"]["error"]["noticeData"]>;

/**
 * A 409: a precondition (ifStateVersion, ifSynced) was refused, with
 * `precondition` true and `stateVersion` the target's version then, or a
 * label or compaction was already taken. Reconcile with session_status
 * changesSince, decide again, and retry with ifStateVersion = stateVersion.
 * `notice` is, for ifSynced, the caller's pending notice, and `noticeData`
 * that notice as data (its `changesSince` is where to reconcile from).
 */
export class ConflictError extends APIError {
  override name = "ConflictError";
  readonly precondition: boolean;
  readonly stateVersion: number;
  readonly notice: string;
  readonly noticeData: NoticeData | undefined;
  constructor(op: string, status: number, detail: string, stateVersion: number | undefined, notice: string | undefined,
    noticeData?: NoticeData | null) {
    super(op, status, "conflict", detail);
    this.precondition = stateVersion !== undefined && stateVersion !== null;
    this.stateVersion = stateVersion ?? 0;
    this.notice = notice ?? "";
    this.noticeData = noticeData ?? undefined;
  }
}

/**
 * The longest wait an APIError's `retryAfter` says, in seconds: a
 * Retry-After asking for more (weeks, or a date far ahead, from a proxy or
 * a clock set wrong) would have a stream, or a caller retrying, sleep for
 * as long. The gateway itself asks for a second.
 */
export const MAX_RETRY_AFTER = 30;

/** A Retry-After header, seconds or an HTTP date, as a wait of at most MAX_RETRY_AFTER seconds. */
function retryAfter(header: string | null): number | undefined {
  if (!header) return undefined;
  const v = header.trim();
  if (/^\d+$/.test(v)) return Math.min(Number(v), MAX_RETRY_AFTER);
  const when = Date.parse(v);
  return Number.isNaN(when) ? undefined : Math.min(Math.max(0, (when - Date.now()) / 1000), MAX_RETRY_AFTER);
}

/**
 * The most an answer read into memory may hold, as in the Go client: the
 * gateway's largest (a page of 200 messages of at most 64 KiB, escaped)
 * stays well under it. Past it what answers is not a gateway.
 */
export const MAX_ANSWER_SIZE = 64 << 20;

/** The answer's body as text, refused past MAX_ANSWER_SIZE bytes. */
export async function answerText(op: string, resp: Response): Promise<string> {
  if (!resp.body) return "";
  const reader = resp.body.getReader();
  const decoder = new TextDecoder("utf-8");
  const parts: string[] = [];
  let size = 0;
  for (;;) {
    let chunk: ReadableStreamReadResult<Uint8Array>;
    try {
      chunk = await reader.read();
    } catch (e) {
      throw new TransportError(`vigil: ${op}: read the answer: ${(e as Error).message}`, { cause: e });
    }
    if (chunk.done) break;
    size += chunk.value.byteLength;
    if (size > MAX_ANSWER_SIZE) {
      await reader.cancel().catch(() => undefined);
      throw new TransportError(`vigil: ${op}: the answer is larger than ${MAX_ANSWER_SIZE >> 20} MiB: what answers is not a vigil gateway`);
    }
    parts.push(decoder.decode(chunk.value, { stream: true }));
  }
  parts.push(decoder.decode());
  return parts.join("");
}

/** The error of an answer that is not 200. */
export async function errorFrom(op: string, resp: Response): Promise<APIError> {
  return errorOf(op, resp, await answerText(op, resp).catch(() => ""));
}

/**
 * The error a 200 answer says it is, or undefined. No output of the
 * gateway has an "error" object (sessions_send's "error" is a text): an
 * answer holding one is an error answer whose status was changed on the
 * way, and read as the output it would be an empty success. It is the
 * error its code says, or, without one, an APIError showing it.
 */
export function errorIn(op: string, resp: Response, text: string, answer: unknown): APIError | undefined {
  const error = typeof answer === "object" && answer !== null ? (answer as { error?: unknown }).error : undefined;
  if (typeof error !== "object" || error === null || Array.isArray(error)) return undefined;
  const e = errorOf(op, resp, text);
  if (e.code) return e;
  return new APIError(op, resp.status, "", `HTTP ${resp.status} holding an error, not an output: ${text.trim().slice(0, 200)}`, e.retryAfter,
    e.requestId);
}

/** The error an answer's text says, for its status. */
function errorOf(op: string, resp: Response, text: string): APIError {
  const retry = retryAfter(resp.headers.get("Retry-After"));
  // The header too, as it outlives a body a proxy put in place of the gateway's.
  const header = resp.headers.get("Vigil-Request-Id") ?? undefined;
  let detail: {
    code?: unknown; message?: unknown; stateVersion?: number; notice?: string; noticeData?: NoticeData | null; requestId?: unknown;
  } | undefined;
  try {
    detail = (JSON.parse(text) as { error?: typeof detail }).error;
  } catch {
    detail = undefined;
  }
  if (!detail || typeof detail !== "object" || typeof detail.code !== "string" || !detail.code) {
    const shown = text.trim().slice(0, 200) || resp.statusText;
    return new APIError(op, resp.status, "", `HTTP ${resp.status}: ${shown}`, retry, header);
  }
  // A code without its message is still the gateway's refusal: the code is
  // kept, and the message says at least what was answered.
  const message = typeof detail.message === "string" && detail.message ? detail.message : `HTTP ${resp.status}: ${detail.code}`;
  if (resp.status === 409) {
    return new ConflictError(op, resp.status, message, detail.stateVersion, detail.notice, detail.noticeData);
  }
  const requestId = typeof detail.requestId === "string" && detail.requestId ? detail.requestId : header;
  return new APIError(op, resp.status, detail.code as ErrorCode, message, retry, requestId);
}

/**
 * The error of a 200 answer whose Content-Type is not `want`, or undefined.
 * The gateway sends application/json on every answer of its API and
 * text/event-stream on its streams, never without a Content-Type: another
 * one is a page from something answering in its place (a wrong base URL, a
 * proxy's login page, a load balancer's health page). The error names the
 * Content-Type and the path asked, never the query or the token.
 */
export function notTheGateways(op: string, resp: Response, url: string, want: string): APIError | undefined {
  const got = resp.headers.get("Content-Type");
  if (got && got.split(";")[0]!.trim().toLowerCase() === want) return undefined;
  const what = got ? `Content-Type ${JSON.stringify(got)}` : "no Content-Type";
  return new APIError(op, resp.status, "",
    `HTTP ${resp.status} with ${what} from ${new URL(url).pathname}, not ${want}: what answers is not a vigil gateway (is the base URL right?)`);
}
