#!/usr/bin/env node
// A minimal "harness": asks the model a question through the OpenAI Chat Completions API, then
// asks it to double-check (a second turn), printing both answers. It knows nothing about Polar:
// it only reads OPENAI_BASE_URL, OPENAI_API_KEY and OPENAI_MODEL, like any OpenAI client.
const question = process.argv[2] ?? process.env.POLAR_INSTRUCTION;
if (!question) {
  console.error("usage: ask.mjs QUESTION");
  process.exit(2);
}
const base = process.env.OPENAI_BASE_URL;
const key = process.env.OPENAI_API_KEY;
const model = process.env.OPENAI_MODEL ?? "default";
if (!base || !key) {
  console.error("OPENAI_BASE_URL and OPENAI_API_KEY must be set");
  process.exit(2);
}

async function chat(messages) {
  const res = await fetch(`${base}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
    body: JSON.stringify({ model, messages, temperature: 0.7, max_tokens: 256 }),
  });
  const body = await res.json();
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${JSON.stringify(body)}`);
  return body.choices[0].message;
}

const messages = [
  { role: "system", content: "You are a careful assistant. Answer briefly." },
  { role: "user", content: question },
];
const first = await chat(messages);
console.log(`answer: ${first.content}`);
messages.push(
  { role: "assistant", content: first.content },
  { role: "user", content: "Are you sure? Reply with just the number." },
);
const second = await chat(messages);
console.log(`checked: ${second.content}`);
