#!/usr/bin/env node
/**
 * One question about an image through the Anthropic Messages API, the way Claude-style harnesses
 * send images: an `image` block with a base64 `source` and a `text` block. Talks to the gateway's
 * proxy (`ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY` = the session key), which turns the image block
 * into an OpenAI `image_url` data URL for the engine, and prints the model's answer.
 *
 *   node ask-anthropic.mjs IMAGE.png "How many stars are in this image?"
 */
import { readFileSync } from "node:fs";

const [image, question] = process.argv.slice(2);
if (!image || !question) {
  console.error("usage: ask-anthropic.mjs IMAGE.png QUESTION");
  process.exit(2);
}
for (const name of ["ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"]) {
  if (!process.env[name]) {
    console.error(`${name} is not set (the gateway sets it for the session)`);
    process.exit(2);
  }
}
const res = await fetch(`${process.env.ANTHROPIC_BASE_URL}/v1/messages`, {
  method: "POST",
  headers: {
    "x-api-key": process.env.ANTHROPIC_API_KEY,
    "anthropic-version": "2023-06-01",
    "content-type": "application/json",
  },
  body: JSON.stringify({
    model: process.env.ANTHROPIC_MODEL ?? process.env.OPENAI_MODEL ?? "default",
    max_tokens: 256,
    messages: [
      {
        role: "user",
        content: [
          {
            type: "image",
            source: { type: "base64", media_type: "image/png", data: readFileSync(image).toString("base64") },
          },
          { type: "text", text: question },
        ],
      },
    ],
  }),
});
const text = await res.text();
if (!res.ok) {
  console.error(`HTTP ${res.status}: ${text}`);
  process.exit(1);
}
const message = JSON.parse(text);
console.log(
  message.content
    .filter((b) => b.type === "text")
    .map((b) => b.text)
    .join(""),
);
