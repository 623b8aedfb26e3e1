/**
 * Each API family driven by its official Python SDK (`openai` for Chat Completions and Responses,
 * `anthropic` for Messages, `google-genai` for generateContent), through the proxy to the simulated
 * engine, in token mode (`sglang`) and in chat mode (`sglang-openai`). The scripts in
 * `testing/python-sdk/` run two turns per scenario (plain, streamed, with tools, streamed with
 * tools, with an image), send back what the first turn returned (the reasoning token included),
 * validate every response with the SDK's own types, and print what they saw; this file checks it
 * against the records: ids, text, tool calls and their ids, usage, the image's bytes, and that the
 * round-tripped reasoning was read by the proxy (the next turn's served history carries it; in
 * token mode that turn is bridged onto the first).
 */
import { fileURLToPath } from "node:url";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompletionRecord, type JsonObject } from "../protocol";
import { type SimEngineHandle, startSimEngine } from "../sim/server";
import { describeWith, planFor, pythonModule } from "../test/support/optional-tools";
import { decodeReasoning } from "./json";
import { type RecordingProxy, startProxy } from "./server";

const PYTHON = "python3";
const SCRIPTS = fileURLToPath(new URL("./testing/python-sdk/", import.meta.url));
const INSTALL = "pip install -r proxy/testing/python-sdk/requirements.txt";

/** The three SDKs (import name, pip name), at the versions requirements.txt pins. */
const SDKS = [
  pythonModule("openai", "openai", INSTALL),
  pythonModule("anthropic", "anthropic", INSTALL),
  pythonModule("google.genai", "google-genai", INSTALL),
];

const MODEL = "Qwen/Qwen3-0.6B";
const quiet = { info() {}, warn() {}, error() {} };
const SCENARIOS = ["plain", "stream", "tools", "stream_tools", "image"] as const;
type Scenario = (typeof SCENARIOS)[number];
const withTools = (s: Scenario) => s === "tools" || s === "stream_tools";
/** Standard base64 with padding: what every family's schema accepts for the reasoning token. */
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
/** The image the scripts send (sdkcheck.py): the engine must get exactly these bytes. */
const PNG_1PX =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg==";
/** The calculator's parameters, as the scripts declare them (sdkcheck.py). */
const CALC_SCHEMA = {
  type: "object",
  properties: { expression: { type: "string" } },
  required: ["expression"],
};

interface Turn {
  id: string;
  text: string;
  reasoning: string | null;
  token: string | null;
  tool_calls: Array<{ id: string; name: string; arguments: unknown }>;
  finish: string | null;
  usage: { input: number; cached: number | null; output: number };
}
interface ScriptOutput {
  sdk: string;
  version: string;
  scenarios: Record<Scenario, [Turn, Turn]>;
}

/** What differs per family: the script, the record's api type, ids and finish reasons. */
interface FamilyCase {
  name: string;
  script: string;
  api: CompletionRecord["api_type"];
  /** The id the client sees for the engine completion `id`. */
  id: (completionId: string) => string;
  finish: { tool: string; stop: string };
  /** Does the client carry the reasoning in an opaque token? */
  token: boolean;
  /** Does the SDK show the reasoning text in this scenario (Gemini: only with include_thoughts)? */
  visible: (s: Scenario) => boolean;
  /** Does the SDK report input tokens without the cached ones (Anthropic)? */
  inputExcludesCached: boolean;
}

const FAMILIES: FamilyCase[] = [
  {
    name: "OpenAI Chat Completions (openai)",
    script: "openai_chat.py",
    api: "openai_chat",
    visible: () => true,
    id: (id) => id,
    finish: { tool: "tool_calls", stop: "stop" },
    token: false,
    inputExcludesCached: false,
  },
  {
    name: "OpenAI Responses (openai)",
    script: "openai_responses.py",
    api: "openai_responses",
    visible: () => true,
    id: (id) => `resp_${id}`,
    finish: { tool: "completed", stop: "completed" },
    token: true,
    inputExcludesCached: false,
  },
  {
    name: "Anthropic Messages (anthropic)",
    script: "anthropic_messages.py",
    api: "anthropic",
    visible: () => true,
    id: (id) => `msg_${id}`,
    finish: { tool: "tool_use", stop: "end_turn" },
    token: true,
    inputExcludesCached: true,
  },
  {
    name: "Google Gemini generateContent (google-genai)",
    script: "google_genai.py",
    api: "google",
    visible: (s) => s === "plain",
    id: (id) => id,
    finish: { tool: "STOP", stop: "STOP" },
    token: true,
    inputExcludesCached: false,
  },
];

const answerOf = (rec: CompletionRecord) =>
  ((rec.response.choices as JsonObject[])[0]!.message ?? {}) as {
    content: string | null;
    reasoning_content?: string;
    tool_calls?: Array<{ id: string }>;
  };

let sim: SimEngineHandle;
beforeAll(async () => {
  if (planFor(SDKS, "").mode === "run") sim = await startSimEngine({ model: MODEL });
}, 30_000);
afterAll(async () => {
  await sim?.close();
});

describeWith(SDKS, "official Python SDKs through the proxy", () => {
  for (const engine of ["sglang", "sglang-openai"] as const) {
    describe(engine === "sglang" ? "token mode (sglang)" : "chat mode (sglang-openai)", () => {
      let proxy: RecordingProxy;
      let n = 0;
      beforeAll(async () => {
        proxy = await startProxy({ engine, engineUrl: sim.url, modelServed: MODEL, logger: quiet });
      }, 30_000);
      afterAll(async () => {
        await proxy?.close();
      });

      for (const fam of FAMILIES) {
        it(`${fam.name}: plain, streamed, tool and image turns parse, and the reasoning round-trips`, async () => {
          const sessions = Object.fromEntries(
            SCENARIOS.map((s) => {
              const id = `py-${engine}-${fam.api}-${s}-${++n}`;
              return [s, { id, key: proxy.openSession(id, { harness: "python-sdk" }).key }];
            }),
          ) as Record<Scenario, { id: string; key: string }>;
          const input = JSON.stringify({
            base_url: proxy.url,
            keys: Object.fromEntries(SCENARIOS.map((s) => [s, sessions[s].key])),
          });
          const run = await execa(PYTHON, [fam.script], {
            cwd: SCRIPTS,
            input,
            // No __pycache__ left in the source tree.
            env: { PYTHONDONTWRITEBYTECODE: "1" },
            reject: false,
            timeout: 90_000,
          });
          // The script's stderr names the SDK type and field a response failed to validate against.
          expect(run.exitCode, run.stderr).toBe(0);
          const out = JSON.parse(run.stdout) as ScriptOutput;
          expect(out.version).toMatch(/^\d+\.\d+/);

          for (const scenario of SCENARIOS) {
            const what = `${fam.script} ${scenario}`;
            const turns = out.scenarios[scenario];
            const recs = proxy.completions(sessions[scenario].id).map((r) => CompletionRecord.parse(r));
            expect(
              recs.map((r) => r.api_type),
              what,
            ).toEqual([fam.api, fam.api]);
            expect(
              recs.map((r) => r.metadata.client_stream),
              what,
            ).toEqual(scenario.startsWith("stream") ? [true, true] : [false, false]);
            turns.forEach((t, i) => {
              const rec = recs[i]!;
              const answer = answerOf(rec);
              expect(t.id, what).toBe(fam.id(String(rec.response.id)));
              expect(t.text, what).toBe(answer.content ?? "");
              expect(t.usage.output, what).toBe(rec.response_ids.length);
              const cached = t.usage.cached ?? 0;
              expect(t.usage.input + (fam.inputExcludesCached ? cached : 0), what).toBe(
                rec.prompt_ids.length,
              );
              expect(cached, what).toBe(rec.cached_tokens ?? 0);
              expect(t.reasoning, what).toBe(fam.visible(scenario) ? answer.reasoning_content : null);
              if (fam.token) {
                // The opaque token is valid in the family's schema and carries this turn's reasoning.
                expect(t.token, what).toMatch(BASE64);
                expect(decodeReasoning(t.token), what).toBe(answer.reasoning_content);
              }
            });
            const [first, second] = turns;
            const [r1, r2] = recs as [CompletionRecord, CompletionRecord];
            expect(ids(turns), what).toHaveLength(new Set(ids(turns)).size);
            if (withTools(scenario)) {
              expect(first.finish, what).toBe(fam.finish.tool);
              expect(first.tool_calls, what).toEqual([
                {
                  id: answerOf(r1).tool_calls![0]!.id,
                  name: "calculator",
                  arguments: { expression: "17 * 23" },
                },
              ]);
              expect(second.text, what).toContain("391");
              // The tool's schema reached the engine as declared (google-genai sends it snake_case).
              expect((r1.request.tools as JsonObject[])[0], what).toEqual({
                type: "function",
                function: expect.objectContaining({ name: "calculator", parameters: CALC_SCHEMA }),
              });
              // The result went back under the call's id.
              const tool = (r2.request.messages as JsonObject[]).find((m) => m.role === "tool");
              expect(tool?.tool_call_id, what).toBe(first.tool_calls[0]!.id);
            } else {
              expect(first.tool_calls, what).toEqual([]);
              expect(first.finish, what).toBe(fam.finish.stop);
            }
            if (scenario === "image") {
              // Each SDK's image form reached the engine as the same PNG (google-genai writes it URL-safe).
              const user = (r1.request.messages as JsonObject[]).find((m) => m.role === "user");
              expect(user?.content, what).toContainEqual({
                type: "image_url",
                image_url: expect.objectContaining({ url: `data:image/png;base64,${PNG_1PX}` }),
              });
            }
            expect(second.finish, what).toBe(fam.finish.stop);
            // The reasoning sent back reached the engine's history again.
            const reasoning = answerOf(r1).reasoning_content;
            expect(reasoning, what).toBeTruthy();
            // One assistant turn, however many chunks (contents) the client kept it as.
            const assistants = (r2.request.messages as JsonObject[]).filter((m) => m.role === "assistant");
            expect(assistants, what).toHaveLength(1);
            expect(assistants[0]!.reasoning_content, what).toBe(reasoning);
            if (engine === "sglang") {
              // Bridged: turn 2's prompt is turn 1's prompt and sampled ids, then the new turn.
              // Qwen3's template drops the reasoning before a new user message (template_mismatch,
              // still bridged) and keeps it before a tool result (extended).
              const bridge = (r: CompletionRecord) => r.metadata.bridge as JsonObject;
              expect(bridge(r1).verdict, what).toBe("new_chain");
              expect(bridge(r2), what).toMatchObject({
                verdict: withTools(scenario) ? "extended" : "template_mismatch",
                parent_turn_id: bridge(r1).turn_id,
              });
              expect(r2.prompt_ids.slice(0, r1.prompt_ids.length + r1.response_ids.length), what).toEqual([
                ...r1.prompt_ids,
                ...r1.response_ids,
              ]);
            }
          }
        }, 120_000);
      }
    });
  }
});

function ids(turns: Turn[]): string[] {
  return turns.flatMap((t) => [t.id, ...t.tool_calls.map((c) => c.id)]);
}
