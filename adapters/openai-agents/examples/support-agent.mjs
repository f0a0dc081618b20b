// A support agent of the OpenAI Agents SDK with a scripted model (the
// SDK's own ScriptedModel: no model service). It answers the last user
// message; every model request is kept, so one can see what the model was
// given, and the first answer can be held back: a slow model, while
// someone else writes into the conversation.
import { Agent } from "@openai/agents";
import { ScriptedModel, assistantMessage, modelResponder } from "@openai/agents/testing";

const text = (content) => (typeof content === "string" ? content : content.map((c) => c.text ?? "").join(""));

export function supportAgent() {
  const requests = [];
  let hold;
  let started;
  const firstCall = new Promise((ok) => (started = ok));
  const answer = async (call) => {
    const input = typeof call.request.input === "string" ? [{ role: "user", content: call.request.input }] : call.request.input;
    requests.push(input);
    started();
    const held = hold;
    hold = undefined;
    await held;
    const last = input.filter((i) => i.role === "user").at(-1);
    return [assistantMessage(`Noted: ${last ? text(last.content) : "nothing"}`)];
  };
  const model = new ScriptedModel(Array.from({ length: 20 }, () => modelResponder(answer)));
  const agent = new Agent({ name: "support", instructions: "Help the customer with their order.", model });
  return {
    agent,
    /** Every model request's input items. */
    requests,
    /** Resolves when the model is first called. */
    firstCall,
    /** Makes the model's first answer wait for `until`. */
    holdFirstAnswer(until) {
      hold = until;
    },
  };
}
