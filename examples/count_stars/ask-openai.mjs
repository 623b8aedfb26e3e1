#!/usr/bin/env node
/**
 * One question about an image through the OpenAI Chat Completions API, the way VLM harnesses send
 * images: a `text` part and an `image_url` part holding a `data:image/png;base64,…` URL. Talks to
 * the gateway's proxy (`OPENAI_BASE_URL`, `OPENAI_API_KEY` = the session key, `OPENAI_MODEL`) and
 * prints the model's answer.
 *
 *   node ask-openai.mjs IMAGE.png "How many stars are in this image?"
 */
import { readFileSync } from "node:fs";

const [image, question] = process.argv.slice(2);
if (!image || !question) {
  console.error("usage: ask-openai.mjs IMAGE.png QUESTION");
  process.exit(2);
}
for (const name of ["OPENAI_BASE_URL", "OPENAI_API_KEY"]) {
  if (!process.env[name]) {
    console.error(`${name} is not set (the gateway sets it for the session)`);
    process.exit(2);
  }
}
const url = `data:image/png;base64,${readFileSync(image).toString("base64")}`;
const res = await fetch(`${process.env.OPENAI_BASE_URL}/chat/completions`, {
  method: "POST",
  headers: { authorization: `Bearer ${process.env.OPENAI_API_KEY}`, "content-type": "application/json" },
  body: JSON.stringify({
    model: process.env.OPENAI_MODEL ?? "default",
    messages: [
      {
        role: "user",
        content: [
          { type: "text", text: question },
          { type: "image_url", image_url: { url } },
        ],
      },
    ],
    max_tokens: 256,
  }),
});
const text = await res.text();
if (!res.ok) {
  console.error(`HTTP ${res.status}: ${text}`);
  process.exit(1);
}
console.log(JSON.parse(text).choices[0].message.content);
