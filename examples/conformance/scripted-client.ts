/**
 * A small scripted multi-turn "harness" for `polar conformance --harness shell`: an OpenAI-chat
 * agent loop with a calculator tool, run as a child process with the usual harness environment
 * (`OPENAI_BASE_URL`, `OPENAI_API_KEY`, `OPENAI_MODEL`). Its history habits are chosen by
 * environment, so the conformance table can be checked against known behaviour:
 *
 * - `CONFORMANCE_STYLE`: `append` (default; echoes what it got, appends tool results and new user
 *   turns), `compact` (replaces the history by a summary before the second task), `rewrite` (edits
 *   the first user message before the second task), `retry` (sends each task's first request twice
 *   and goes on from the second answer, as a harness whose client gave up on the first);
 * - `CONFORMANCE_STREAM=1`: asks for streamed answers;
 * - `CONFORMANCE_REASONING`: `keep` (default; sends each reply's `reasoning_content` back with it)
 *   or `drop` (sends replies back without it, as some CLIs do);
 * - `POLAR_TEMPERATURE` / `POLAR_TOP_P`: sampling parameters it sends (none when unset).
 *
 * @module
 */

export {};

const base = process.env.OPENAI_BASE_URL;
const key = process.env.OPENAI_API_KEY;
if (!base || !key) {
  console.error("OPENAI_BASE_URL and OPENAI_API_KEY must be set");
  process.exit(2);
}
const style = process.env.CONFORMANCE_STYLE ?? "append";
const stream = process.env.CONFORMANCE_STREAM === "1";
const keepReasoning = (process.env.CONFORMANCE_REASONING ?? "keep") !== "drop";
const sampling: Record<string, number> = {};
if (process.env.POLAR_TEMPERATURE) sampling.temperature = Number(process.env.POLAR_TEMPERATURE);
if (process.env.POLAR_TOP_P) sampling.top_p = Number(process.env.POLAR_TOP_P);

type Message = Record<string, unknown> & { role: string };
interface ToolCall {
  id: string;
  function: { name: string; arguments: string };
}

const tools = [
  {
    type: "function",
    function: {
      name: "calculator",
      description: "Evaluate an integer expression a op b",
      parameters: {
        type: "object",
        properties: { expression: { type: "string" } },
        required: ["expression"],
      },
    },
  },
];

/** Reads an OpenAI SSE stream back into one assistant message. */
async function readStream(res: Response): Promise<Message> {
  const text = await res.text();
  let content = "";
  let reasoning = "";
  const calls: ToolCall[] = [];
  for (const line of text.split("\n")) {
    if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
    const delta = JSON.parse(line.slice(6)).choices?.[0]?.delta ?? {};
    if (typeof delta.content === "string") content += delta.content;
    if (typeof delta.reasoning_content === "string") reasoning += delta.reasoning_content;
    for (const c of delta.tool_calls ?? []) {
      calls[c.index] ??= { id: c.id, function: { name: "", arguments: "" } };
      if (c.function?.name) calls[c.index]!.function.name += c.function.name;
      if (c.function?.arguments) calls[c.index]!.function.arguments += c.function.arguments;
    }
  }
  return {
    role: "assistant",
    content: content || null,
    ...(reasoning && keepReasoning ? { reasoning_content: reasoning } : {}),
    ...(calls.length > 0 ? { tool_calls: calls.map((c) => ({ ...c, type: "function" })) } : {}),
  };
}

async function complete(messages: Message[]): Promise<Message> {
  const res = await fetch(`${base!.replace(/\/+$/, "")}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({
      model: process.env.OPENAI_MODEL ?? "model",
      messages,
      tools,
      stream,
      ...sampling,
    }),
  });
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  if (stream) return readStream(res);
  const json = (await res.json()) as { choices: Array<{ message: Message }> };
  const { role, content, tool_calls, reasoning_content } = json.choices[0]!.message;
  return {
    role,
    content,
    ...(reasoning_content && keepReasoning ? { reasoning_content } : {}),
    ...(tool_calls ? { tool_calls } : {}),
  };
}

function calculate(expression: string): string {
  const m = /^\s*(-?\d+)\s*([+\-*/])\s*(-?\d+)\s*$/.exec(expression);
  if (!m) return "error: not a b op expression";
  const [a, op, b] = [BigInt(m[1]!), m[2], BigInt(m[3]!)];
  if (op === "+") return String(a + b);
  if (op === "-") return String(a - b);
  if (op === "*") return String(a * b);
  return b === 0n ? "error: division by zero" : String(a / b);
}

/** One task: ask, run tool calls until a plain answer (at most 4 calls). */
async function task(messages: Message[], question: string): Promise<Message[]> {
  let history = [...messages, { role: "user", content: question }];
  for (let i = 0; i < 5; i++) {
    // `retry`: the first answer of a task is thrown away and the same request sent again.
    if (style === "retry" && i === 0) await complete(history);
    const reply = await complete(history);
    history = [...history, reply];
    const calls = (reply.tool_calls as ToolCall[] | undefined) ?? [];
    if (calls.length === 0) return history;
    for (const c of calls) {
      const args = JSON.parse(c.function.arguments || "{}") as { expression?: string };
      history.push({ role: "tool", tool_call_id: c.id, content: calculate(args.expression ?? "") });
    }
  }
  return history;
}

const system: Message = { role: "system", content: "You are a careful assistant. Use the calculator." };
let history = await task([system], "What is 17 * 23?");
if (style === "compact") {
  history = [system, { role: "user", content: "Summary so far: 17 * 23 was computed with the calculator." }];
  history.push({ role: "assistant", content: "Noted." });
} else if (style === "rewrite") {
  history = history.map((m, i) => (i === 1 ? { ...m, content: "Please compute 17 * 23." } : m));
}
history = await task(history, "What is 6 * 7?");
console.log(`conversation finished with ${history.length} messages`);
