#!/usr/bin/env node
// A minimal coding-agent harness: it offers the model four tools (bash, read, write, edit) through
// the OpenAI Chat Completions API, runs the tool calls the model returns in the working directory,
// sends the results back, and loops until the model answers without a tool call. It knows nothing
// about Polar: it reads OPENAI_BASE_URL, OPENAI_API_KEY and OPENAI_MODEL like any OpenAI client.
//
// usage: node agent.mjs [--cwd DIR] [--max-turns N] INSTRUCTION
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";

const args = process.argv.slice(2);
let cwd = process.cwd();
let maxTurns = 12;
while (args[0]?.startsWith("--")) {
  const flag = args.shift();
  const value = args.shift();
  if (value === undefined) fail(`${flag}: needs a value`);
  if (flag === "--cwd") cwd = resolve(value);
  else if (flag === "--max-turns") maxTurns = Number.parseInt(value, 10);
  else fail(`unknown flag ${flag}`);
}
if (!(maxTurns > 0)) fail("--max-turns: must be a positive integer");
const instruction = args.join(" ") || process.env.POLAR_INSTRUCTION;
if (!instruction) fail("usage: agent.mjs [--cwd DIR] [--max-turns N] INSTRUCTION");
const base = process.env.OPENAI_BASE_URL;
const key = process.env.OPENAI_API_KEY;
const model = process.env.OPENAI_MODEL ?? "default";
if (!base || !key) fail("OPENAI_BASE_URL and OPENAI_API_KEY must be set");

function fail(message) {
  console.error(`agent.mjs: ${message}`);
  process.exit(2);
}

/** Largest tool output sent back to the model (characters); longer output is cut in the middle. */
const MAX_TOOL_OUTPUT = 16_000;
/** Longest a bash command may run. */
const COMMAND_TIMEOUT_MS = 60_000;

const tools = [
  {
    type: "function",
    function: {
      name: "bash",
      description: "Run a bash command in the working directory and return its output and exit code.",
      parameters: {
        type: "object",
        properties: { command: { type: "string", description: "The command to run." } },
        required: ["command"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "read",
      description: "Read a text file.",
      parameters: {
        type: "object",
        properties: { path: { type: "string", description: "File path (absolute or relative)." } },
        required: ["path"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "write",
      description: "Create or overwrite a text file.",
      parameters: {
        type: "object",
        properties: { path: { type: "string" }, content: { type: "string" } },
        required: ["path", "content"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "edit",
      description: "Replace exactly one occurrence of old_string with new_string in a file.",
      parameters: {
        type: "object",
        properties: {
          path: { type: "string" },
          old_string: { type: "string", description: "Text to replace; must occur exactly once." },
          new_string: { type: "string" },
        },
        required: ["path", "old_string", "new_string"],
      },
    },
  },
];

function clip(text) {
  if (text.length <= MAX_TOOL_OUTPUT) return text;
  const half = MAX_TOOL_OUTPUT / 2;
  return `${text.slice(0, half)}\n[... ${text.length - MAX_TOOL_OUTPUT} characters cut ...]\n${text.slice(-half)}`;
}

/** Runs one tool call; every failure becomes an `Error: ...` result the model can read. */
function runTool(name, rawArguments) {
  let a;
  try {
    a = JSON.parse(rawArguments || "{}");
  } catch (error) {
    return `Error: arguments are not valid JSON: ${error.message}`;
  }
  try {
    if (name === "bash") {
      if (typeof a.command !== "string") return "Error: command must be a string";
      const r = spawnSync("bash", ["-c", a.command], { cwd, encoding: "utf8", timeout: COMMAND_TIMEOUT_MS });
      const out = `${r.stdout ?? ""}${r.stderr ?? ""}`;
      if (r.error) return `${out}Error: ${r.error.message}`;
      return r.status === 0 ? out : `${out}[exit code ${r.status ?? r.signal}]`;
    }
    const file = typeof a.path === "string" ? resolve(cwd, a.path) : undefined;
    if (!file) return "Error: path must be a string";
    if (name === "read") return readFileSync(file, "utf8");
    if (name === "write") {
      writeFileSync(file, String(a.content ?? ""));
      return `Wrote ${a.path}`;
    }
    if (name === "edit") {
      const text = readFileSync(file, "utf8");
      const count = text.split(a.old_string).length - 1;
      if (!a.old_string || count !== 1)
        return `Error: old_string must occur exactly once in ${a.path} (found ${count})`;
      writeFileSync(
        file,
        text.replace(a.old_string, () => a.new_string),
      );
      return `Edited ${a.path}`;
    }
    return `Error: unknown tool ${name}`;
  } catch (error) {
    return `Error: ${error.message}`;
  }
}

async function chat(messages) {
  const res = await fetch(`${base}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
    // `user` is the OpenAI field for an end-user id; servers may key sampling or routing by it.
    body: JSON.stringify({
      model,
      messages,
      tools,
      temperature: 0.7,
      max_tokens: 2048,
      ...(process.env.POLAR_SESSION_ID ? { user: process.env.POLAR_SESSION_ID } : {}),
    }),
  });
  const body = await res.json();
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${JSON.stringify(body)}`);
  return body.choices[0].message;
}

const messages = [
  {
    role: "system",
    content: `You are a coding agent. Use the tools to inspect and change files. Working directory: ${cwd}`,
  },
  { role: "user", content: instruction },
];
for (let turn = 1; ; turn++) {
  const reply = await chat(messages);
  const calls = reply.tool_calls ?? [];
  messages.push({
    role: "assistant",
    content: reply.content ?? "",
    ...(reply.reasoning_content ? { reasoning_content: reply.reasoning_content } : {}),
    ...(calls.length > 0 ? { tool_calls: calls } : {}),
  });
  if (calls.length === 0) {
    console.log(`final (turn ${turn}): ${reply.content}`);
    break;
  }
  for (const call of calls) {
    const result = clip(runTool(call.function.name, call.function.arguments));
    console.log(`turn ${turn}: ${call.function.name} ${call.function.arguments}`);
    messages.push({ role: "tool", tool_call_id: call.id, content: result });
  }
  if (turn >= maxTurns) {
    console.log(`stopped after ${maxTurns} turns`);
    break;
  }
}
