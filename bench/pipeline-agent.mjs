#!/usr/bin/env node
// The long-tail agent of `npm run bench:pipeline`: an OpenAI-tools agent (like any harness, it
// only knows OPENAI_BASE_URL / OPENAI_API_KEY) whose work per session is drawn from heavy-tailed
// distributions, seeded, so both schedules of the benchmark see the same sessions.
//
//   node pipeline-agent.mjs --seed S --group K [--xm 2 --alpha 1.3 --max-calls 24]
//                           [--tool-median 0.5 --tool-sigma 1.0 --tool-max 30]
//
// Session (group K, sample j from POLAR_SESSION_ID's last component) draws, from a generator
// seeded by (S, K, j):
//   tool calls  N = min(max-calls, floor(xm · U^(-1/alpha)))   discrete Pareto: P(N ≥ n) = (xm/n)^alpha
//   tool time   t = min(tool-max, tool-median · exp(tool-sigma · Z)) seconds, per call (lognormal)
// Then, N times: ask the model an arithmetic question with a `calculator` tool offered (the model
// answers with a tool call), run the "tool" (sleep t, then the product), send the result back (the
// model answers with it). So a session makes 2N model calls and N tool calls; the conversation
// grows, one token-exact chain. Exit 0 when done; 1 when the model or the proxy fails.
const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const seed = opt("seed", 0);
const group = opt("group", 0);
const xm = opt("xm", 2);
const alpha = opt("alpha", 1.3);
const maxCalls = opt("max-calls", 24);
const toolMedian = opt("tool-median", 0.5);
const toolSigma = opt("tool-sigma", 1.0);
const toolMax = opt("tool-max", 30);
const sample = Number((process.env.POLAR_SESSION_ID ?? "0").split(".").pop()) || 0;

const base = process.env.OPENAI_BASE_URL;
const key = process.env.OPENAI_API_KEY;
if (!base || !key) {
  console.error("OPENAI_BASE_URL and OPENAI_API_KEY must be set");
  process.exit(2);
}

// mulberry32 over an FNV-1a hash of (seed, group, sample): the same session draws the same work.
let h = 2166136261;
for (const c of `${seed}:${group}:${sample}`) h = Math.imul(h ^ c.charCodeAt(0), 16777619) >>> 0;
let state = h;
function uniform() {
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return (((t ^ (t >>> 14)) >>> 0) + 1) / 4294967297; // (0, 1)
}
function normal() {
  return Math.sqrt(-2 * Math.log(uniform())) * Math.cos(2 * Math.PI * uniform());
}

const calls = Math.min(maxCalls, Math.floor(xm * uniform() ** (-1 / alpha)));
const toolSeconds = Array.from({ length: calls }, () =>
  Math.min(toolMax, toolMedian * Math.exp(toolSigma * normal())),
);
const questions = Array.from({ length: calls }, () => [
  2 + Math.floor(uniform() * 98),
  2 + Math.floor(uniform() * 98),
]);

const tools = [
  {
    type: "function",
    function: {
      name: "calculator",
      description: "Evaluates an arithmetic expression",
      parameters: {
        type: "object",
        properties: { expression: { type: "string" } },
        required: ["expression"],
      },
    },
  },
];

async function chat(messages) {
  const res = await fetch(`${base}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
    body: JSON.stringify({ model: "default", messages, tools, max_tokens: 256 }),
  });
  const body = await res.json();
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${JSON.stringify(body)}`);
  return body.choices[0].message;
}

const messages = [{ role: "system", content: "You are a careful assistant. Use the calculator tool." }];
let toolTotal = 0;
for (let i = 0; i < calls; i++) {
  const [a, b] = questions[i];
  messages.push({ role: "user", content: `Step ${i + 1}: what is ${a} * ${b}?` });
  const call = await chat(messages);
  messages.push({ role: "assistant", content: call.content ?? "", tool_calls: call.tool_calls });
  for (const tc of call.tool_calls ?? []) {
    await new Promise((r) => setTimeout(r, toolSeconds[i] * 1000));
    toolTotal += toolSeconds[i];
    messages.push({ role: "tool", tool_call_id: tc.id, content: String(a * b) });
  }
  const answer = await chat(messages);
  messages.push({ role: "assistant", content: answer.content ?? "" });
}
console.log(JSON.stringify({ group, sample, tool_calls: calls, tool_seconds: Number(toolTotal.toFixed(2)) }));
