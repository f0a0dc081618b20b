// A support agent as a LangGraph graph: an agent node calling a chat model
// and a tools node that issues refunds. The chat model is scripted (no
// model service): a person's "refund order N" gets a refund tool call, a
// tool's result gets a short answer. The graph's state has the `vigil`
// channel, so a run retried after a refusal is told what changed.
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage, SystemMessage, ToolMessage, isHumanMessage, isToolMessage } from "@langchain/core/messages";
import { Annotation, END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { VigilAnnotation } from "@vigilhq/langgraph";

/**
 * A chat model that answers from a script: a tool's result gets a short
 * answer; otherwise the first order a person asked to refund that has no
 * refund call yet gets one.
 */
export class ScriptedSupportModel extends BaseChatModel {
  /** Every prompt the model was given, as [role, text] pairs. */
  prompts = [];
  #hold;
  #started;
  /** Resolves when the model is first called. */
  firstCall = new Promise((ok) => (this.#started = ok));

  /** Makes the model's first answer wait for `until`: a slow model, while someone else writes. */
  holdFirstAnswer(until) {
    this.#hold = until;
  }

  _llmType() {
    return "scripted-support";
  }

  async _generate(messages) {
    this.prompts.push(messages.map((m) => [m.getType(), String(m.content)]));
    this.#started();
    const hold = this.#hold;
    this.#hold = undefined;
    await hold;
    const last = messages.at(-1);
    // Orders people asked about, and those already given a refund call.
    const asked = messages.filter(isHumanMessage).map((m) => /refund order (\d+)/.exec(String(m.content))?.[1]).filter(Boolean);
    const called = new Set(messages.flatMap((m) => m.tool_calls ?? []).map((c) => c.args.order));
    const order = asked.find((o) => !called.has(o));
    let reply;
    if (isToolMessage(last)) {
      reply = new AIMessage(`Done: ${last.content}.`);
    } else if (order !== undefined) {
      reply = new AIMessage({ content: "", tool_calls: [{ id: `call-refund-${order}`, name: "refund", args: { order } }] });
    } else {
      reply = new AIMessage("How can I help?");
    }
    return { generations: [{ text: String(reply.content), message: reply }] };
  }
}

/** One line per change the graph was handed, for the model's prompt. */
export function describeChange(change) {
  const lines = change.changes.map((e) => `#${e.sequence} ${e.kind} by ${e.actorType} ${e.actorId ?? ""}: ${e.summary}`.trim());
  const head = change.notice ?? `Thread ${change.threadId} changed after version ${change.since} (${change.reason}).`;
  return [head, ...lines].join("\n");
}

/**
 * The support graph, compiled with the given checkpointer. `refunds`
 * counts the refunds issued per order: a refund is a side effect that
 * must happen once.
 */
export function buildSupportGraph(checkpointer) {
  const model = new ScriptedSupportModel({});
  const refunds = new Map();
  const State = Annotation.Root({ ...MessagesAnnotation.spec, ...VigilAnnotation.spec });

  const agent = async (state) => {
    const prompt = state.vigil ? [new SystemMessage(describeChange(state.vigil)), ...state.messages] : state.messages;
    return { messages: [await model.invoke(prompt)], vigil: null };
  };
  const tools = async (state) => {
    const calls = state.messages.at(-1).tool_calls ?? [];
    return {
      messages: calls.map((call) => {
        refunds.set(call.args.order, (refunds.get(call.args.order) ?? 0) + 1);
        return new ToolMessage({ tool_call_id: call.id, content: `refunded order ${call.args.order}` });
      }),
    };
  };
  const graph = new StateGraph(State)
    .addNode("agent", agent)
    .addNode("tools", tools)
    .addEdge(START, "agent")
    .addConditionalEdges("agent", (state) => (state.messages.at(-1).tool_calls?.length ? "tools" : END))
    .addEdge("tools", "agent")
    .compile({ checkpointer });
  return { graph, model, refunds };
}
