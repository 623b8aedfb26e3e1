/**
 * Property-based fuzzing of the task-file loader (`loadTaskFile`), JSON and YAML: near-valid tasks,
 * lists and batches (valid ones with random edits) written in either syntax, arbitrary JSON, and
 * text that is hostile to a YAML parser (aliases, recursion, tags, several documents, deep
 * nesting). The loader either returns a batch request that is valid and can be sent as JSON, or
 * throws a `UsageError` whose message names the file and, when the file parsed, the field; nothing
 * else may escape. Case counts and seeds: `test/support/fuzz.ts`; docs/control-plane.md, "Fuzzing".
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import { stringify as toYaml } from "yaml";
import { BatchRequest } from "../protocol";
import {
  anyJson,
  fuzzParameters,
  fuzzSettings,
  fuzzTimeout,
  hostileScalar,
  mutated,
} from "../test/support/fuzz";
import { loadTaskFile } from "./task-file";
import { UsageError } from "./usage-error";

const settings = fuzzSettings(process.env);
const dir = mkdtempSync(join(tmpdir(), "polar-taskfile-fuzz-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const TASK = {
  task_id: "add-1",
  instruction: "What is 2 + 3?",
  num_samples: 2,
  timeout_seconds: 60,
  agent: { harness: "shell", custom_shell: { command: "echo {{INSTRUCTION}}" }, settings: {} },
  runtime: { backend: "local", prepare: [{ type: "exec", command: "true" }] },
  evaluator: { strategy: "upstream_stage", config: {} },
  metadata: { source: "fuzz" },
};
const TASK_EDITS = [
  "task_id",
  "instruction",
  "num_samples",
  "timeout_seconds",
  "agent",
  "agent.harness",
  "agent.custom_shell",
  "agent.custom_shell.command",
  "agent.settings",
  "runtime",
  "runtime.backend",
  "runtime.prepare",
  "runtime.prepare.0",
  "runtime.prepare.0.type",
  "evaluator",
  "evaluator.strategy",
  "metadata",
  "callback_url",
  "engine_priority",
];

/** A document: one task, a list of tasks, or a whole batch, each near-valid. */
const document: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: mutated(TASK, TASK_EDITS) },
  { weight: 2, arbitrary: fc.array(mutated(TASK, TASK_EDITS, 1), { minLength: 0, maxLength: 3 }) },
  {
    weight: 2,
    arbitrary: mutated({ batch_id: "b-1", queue: "default", tasks: [TASK] }, [
      "batch_id",
      "queue",
      "tasks",
      "tasks.0",
      "tasks.0.task_id",
      "tasks.0.num_samples",
      "callback_url",
    ]),
  },
  { weight: 1, arbitrary: anyJson },
  { weight: 1, arbitrary: hostileScalar },
);

/** YAML a serializer would never write. */
const hostileYaml = fc.constantFrom(
  "",
  "~",
  "---\n---\n",
  "task_id: a\n---\ntask_id: b\n",
  "a: &a [*a]\n",
  `task_id: a\ninstruction: hi\nagent: {harness: shell, custom_shell: {command: x}}\nmetadata: &m {self: *m}\n`,
  `task_id: a\ninstruction: hi\nagent: &g {harness: shell, custom_shell: {command: x}, settings: {a: *g}}\n`,
  "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n",
  "task_id: !!binary aGVsbG8=\n",
  "tasks: !!set {a, b}\n",
  "tasks: !!omap [a: 1]\n",
  "task_id: !custom x\n",
  "task_id: a\ntask_id: b\n",
  "<<: {task_id: a}\ninstruction: hi\n",
  "? [complex, key]\n: value\n",
  "\ufefftask_id: a\n",
  "task_id:\ta\n",
  "num_samples: .nan\n",
  "num_samples: .inf\n",
  "num_samples: 0x10\n",
  "num_samples: 1e400\n",
  "__proto__: {task_id: a}\n",
  "tasks:\n  __proto__: []\n",
  "[".repeat(5000) + "]".repeat(5000),
  "{".repeat(5000),
  `${"- ".repeat(2000)}x`,
  `task_id: "${"x".repeat(200_000)}"\n`,
  `{"task_id":"a","instruction":"hi","agent":{"harness":"shell","custom_shell":{"command":"x"}},"metadata":${'{"a":'.repeat(20_000)}1${"}".repeat(20_000)}}`,
);

/** `doc` as block YAML, or as JSON (which is YAML too) where the YAML writer cannot go that deep. */
function yamlText(doc: unknown): string {
  try {
    return toYaml(doc ?? null);
  } catch {
    return JSON.stringify(doc) ?? "null";
  }
}

/** A file: name and text. */
const taskFile = fc.oneof(
  {
    weight: 4,
    arbitrary: fc
      .tuple(document, fc.constantFrom(".json", ".yaml", ".yml", ".YAML", ".txt"))
      .map(([doc, ext]) => ({
        ext,
        text: /ya?ml$/i.test(ext) ? yamlText(doc) : (JSON.stringify(doc) ?? "null"),
      })),
  },
  {
    weight: 1,
    arbitrary: fc.tuple(hostileYaml, fc.constantFrom(".yaml", ".json")).map(([text, ext]) => ({ ext, text })),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.string({ maxLength: 60 }), fc.constantFrom(".yaml", ".json"))
      .map(([text, ext]) => ({ ext, text })),
  },
);

let files = 0;

function check(f: { ext: string; text: string }): void {
  const path = join(dir, `case-${++files}${f.ext}`);
  writeFileSync(path, f.text);
  let loaded: unknown;
  try {
    loaded = loadTaskFile(path);
  } catch (error) {
    expect(error, `${f.text.slice(0, 200)} → ${String(error)}`).toBeInstanceOf(UsageError);
    const message = (error as UsageError).message;
    expect(message.startsWith(`${path}: `), message.slice(0, 300)).toBe(true);
    const rest = message.slice(path.length + 2);
    // Unreadable or unparsable: the syntax is named; else the field (a path such as tasks[0].agent).
    if (!/^(not valid (JSON|YAML)|cannot read)/.test(rest))
      // A field path (keys may hold any character) or "(body)", then what is wrong with it.
      expect(rest, message.slice(0, 300)).toMatch(
        /^(\(body\)|tasks\b|batch_id\b|queue\b|callback_url\b|[^\n]+: unknown key|[^\n]+: nests more than)/,
      );
    return;
  }
  // What loads is valid and can be sent.
  expect(BatchRequest.safeParse(loaded).success).toBe(true);
  expect(() => JSON.stringify(loaded)).not.toThrow();
}

describe("fuzz: task files (JSON and YAML)", () => {
  it(
    `loads or refuses ${settings.numRuns} arbitrary files, every refusal a UsageError naming the file and the field`,
    () => {
      fc.assert(fc.property(taskFile, check), fuzzParameters(settings, "task files"));
    },
    fuzzTimeout(settings, 20),
  );
});
