#!/usr/bin/env node
// The harness of the RL demo: one model call through the OpenAI Chat Completions API, like any
// OpenAI client (it reads only OPENAI_BASE_URL, OPENAI_API_KEY and OPENAI_MODEL), then the answer
// on stdout. Usage: node answer.mjs [--max-tokens N] INSTRUCTION
const args = process.argv.slice(2);
let maxTokens = 6;
if (args[0] === "--max-tokens") {
  maxTokens = Number(args[1]);
  args.splice(0, 2);
}
const instruction = args.join(" ") || process.env.POLAR_INSTRUCTION;
const base = process.env.OPENAI_BASE_URL;
const key = process.env.OPENAI_API_KEY;
if (!instruction || !base || !key || !Number.isInteger(maxTokens) || maxTokens < 1) {
  console.error(
    "usage: answer.mjs [--max-tokens N] INSTRUCTION (with OPENAI_BASE_URL and OPENAI_API_KEY set)",
  );
  process.exit(2);
}
const res = await fetch(`${base}/chat/completions`, {
  method: "POST",
  headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
  body: JSON.stringify({
    model: process.env.OPENAI_MODEL ?? "default",
    messages: [{ role: "user", content: instruction }],
    // Plain sampling: the engine records the logprobs of exactly this distribution.
    temperature: 1,
    max_tokens: maxTokens,
  }),
});
const body = await res.json();
if (!res.ok) {
  console.error(`HTTP ${res.status}: ${JSON.stringify(body)}`);
  process.exit(1);
}
console.log(`answer: ${JSON.stringify(body.choices[0].message.content)}`);
