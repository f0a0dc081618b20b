/** One server-sent event: its type ("message" when unnamed), id line if any, and data. */
export interface ServerSentEvent {
  event: string;
  id: string | undefined;
  data: string;
}

/**
 * The most text one event may hold, its unfinished line included. The
 * gateway's largest (a message of 64 KiB, escaped) is far below it; past
 * it what answers is not the gateway, and reading on would hold memory
 * without bound.
 */
export const MAX_EVENT_SIZE = 4 << 20;

/** An event past MAX_EVENT_SIZE: what answers is not a vigil gateway's stream. */
export class EventTooLargeError extends Error {}

/**
 * Parses a server-sent event stream as the HTML specification lays it out
 * (fields event, data, id; comments skipped; a blank line dispatches).
 * `touch` is called whenever bytes arrive, so a watchdog can tell a quiet
 * stream from a dead one. An event cut short by the end of the stream is
 * dropped. An event larger than MAX_EVENT_SIZE is an error.
 */
export async function* readEvents(body: ReadableStream<Uint8Array>, touch: () => void): AsyncGenerator<ServerSentEvent> {
  const decoder = new TextDecoder("utf-8");
  let buffer = "";
  let event = "";
  let id: string | undefined;
  let data: string[] = [];
  let dirty = false;
  let size = 0; // the text of the event so far
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      touch();
      buffer += decoder.decode(value, { stream: true });
      let nl: number;
      while ((nl = buffer.search(/\r\n|\r|\n/)) >= 0) {
        // A CR that ends what has arrived may be the first half of a CRLF
        // split between two reads: the next read says which.
        if (nl === buffer.length - 1 && buffer[nl] === "\r") break;
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + (buffer.startsWith("\r\n", nl) ? 2 : 1));
        if (line === "") {
          if (dirty) yield { event: event || "message", id, data: data.join("\n") };
          event = "";
          id = undefined;
          data = [];
          dirty = false;
          size = 0;
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const name = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (name === "event") event = value;
        else if (name === "data") data.push(value);
        else if (name === "id" && !value.includes("\0")) id = value;
        else continue;
        dirty = true;
        size += line.length;
      }
      if (size + buffer.length > MAX_EVENT_SIZE) {
        throw new EventTooLargeError(`an event larger than ${MAX_EVENT_SIZE >> 20} MiB: what answers is not a vigil gateway's stream`);
      }
    }
  } finally {
    reader.releaseLock();
  }
}
