/** One server-sent event: its type ("message" when unnamed), id line if any, and data. */
export interface ServerSentEvent {
  event: string;
  id: string | undefined;
  data: string;
}

/**
 * Parses a server-sent event stream as the HTML specification lays it out
 * (fields event, data, id; comments skipped; a blank line dispatches).
 * `touch` is called whenever bytes arrive, so a watchdog can tell a quiet
 * stream from a dead one. An event cut short by the end of the stream is
 * dropped.
 */
export async function* readEvents(body: ReadableStream<Uint8Array>, touch: () => void): AsyncGenerator<ServerSentEvent> {
  const decoder = new TextDecoder("utf-8");
  let buffer = "";
  let event = "";
  let id: string | undefined;
  let data: string[] = [];
  let dirty = false;
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      touch();
      buffer += decoder.decode(value, { stream: true });
      let nl: number;
      while ((nl = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + (buffer.startsWith("\r\n", nl) ? 2 : 1));
        if (line === "") {
          if (dirty) yield { event: event || "message", id, data: data.join("\n") };
          event = "";
          id = undefined;
          data = [];
          dirty = false;
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
      }
    }
  } finally {
    reader.releaseLock();
  }
}
