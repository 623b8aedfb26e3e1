/**
 * The scripted agent policy driven through each real harness's tool vocabulary: every turn the
 * conversation is rendered with the real Qwen3 template, the policy answers, its `<tool_call>` is
 * parsed with the sim's own qwen25 parser and run for real (bash, files) on a copy of the
 * calculator example; the bug-fix outcome is then checked by running the example's tests.
 */
import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ChatMessage,
  type ChatTokenizer,
  loadChatTokenizer,
  sglangToolDumps,
} from "../tokenizer/chat-tokenizer";
import {
  agentOutcome,
  countTestResults,
  findArithmeticBug,
  GROUP_OUTCOMES,
  MAX_AGENT_STEPS,
  stripReadDecorations,
  stripResultFraming,
  unwrapJsonResult,
} from "./agent-policy";
import { parseOfferedTools, toolboxOf } from "./agent-tools";
import { parseToolCalls, separateReasoning } from "./output-parsers";
import { decideAnswer } from "./policy";
import { withoutHarnessContext } from "./prompt-reading";

const REPO = resolve(import.meta.dirname, "../examples/calculator/repo");
const INSTRUCTION =
  "The tests in test_calculator.js fail. Find and fix the bug in calculator.js. Run the tests with `node --test test_calculator.js`.";

type Props = Record<string, { type: string; items?: unknown }>;
const fn = (name: string, properties: Props, required = Object.keys(properties)) => ({
  type: "function" as const,
  function: { name, description: `${name} tool`, parameters: { type: "object", properties, required } },
});
const s = { type: "string" };

/** A file system + shell the tools act on, and how each harness formats what it returns. */
interface Ops {
  sh(cmd: string): string;
  read(path: string): string;
  write(path: string, content: string): string;
  edit(path: string, old: string, neu: string): string;
}
interface Vocabulary {
  tools: ReturnType<typeof fn>[];
  run(ops: Ops, name: string, a: Record<string, unknown>): string;
  systemPrompt(cwd: string): string;
  /** The first user message, when the harness wraps the instruction. */
  userPrompt?(instruction: string): string;
}

const str = (v: unknown) => String(v);
const VOCABULARIES: Record<string, Vocabulary> = {
  claude_code: {
    tools: [
      fn("Bash", { command: s, description: s, timeout: { type: "number" } }, ["command"]),
      fn("Read", { file_path: s, offset: { type: "number" }, limit: { type: "number" } }, ["file_path"]),
      fn("Write", { file_path: s, content: s }),
      fn("Edit", { file_path: s, old_string: s, new_string: s, replace_all: { type: "boolean" } }, [
        "file_path",
        "old_string",
        "new_string",
      ]),
    ],
    run: (o, n, a) =>
      n === "Bash"
        ? o.sh(str(a.command))
        : n === "Read"
          ? o
              .read(str(a.file_path))
              .split("\n")
              .map((l, i) => `${String(i + 1).padStart(6)}\t${l}`)
              .join("\n")
          : n === "Write"
            ? o.write(str(a.file_path), str(a.content))
            : o.edit(str(a.file_path), str(a.old_string), str(a.new_string)),
    systemPrompt: (cwd) => `You are Claude Code.\n<env>\nWorking directory: ${cwd}\n</env>`,
  },
  qwen_code: {
    tools: [
      fn("read_file", { absolute_path: s, offset: { type: "number" } }, ["absolute_path"]),
      fn("list_directory", { path: s }),
      fn("run_shell_command", { command: s, description: s, is_background: { type: "boolean" } }, [
        "command",
        "is_background",
      ]),
      fn("write_file", { file_path: s, content: s }),
      fn("edit", { file_path: s, old_string: s, new_string: s }),
    ],
    run: (o, n, a) => {
      if (n === "run_shell_command") {
        if (typeof a.is_background !== "boolean") return "Error: is_background is required";
        return `Command: ${a.command}\nStdout: ${o.sh(str(a.command))}\nExit Code: 0`;
      }
      if (n === "read_file") return o.read(str(a.absolute_path));
      if (n === "write_file") return o.write(str(a.file_path), str(a.content));
      if (n === "edit") return o.edit(str(a.file_path), str(a.old_string), str(a.new_string));
      return "Error: unexpected tool";
    },
    systemPrompt: (cwd) => `I'm currently working in the directory: ${cwd}`,
  },
  codex: {
    // Codex 0.171's function tools for a model without apply_patch: the image viewer takes a
    // `path` too, and must not pass for a file reader.
    tools: [
      fn("exec_command", { cmd: s, workdir: s, yield_time_ms: { type: "number" } }, ["cmd"]),
      fn("write_stdin", { session_id: { type: "number" }, chars: s }, ["session_id"]),
      fn("view_image", { path: s }),
    ],
    run: (o, _n, a) => `Process exited with code 0\nOutput:\n${o.sh(str(a.cmd))}`,
    systemPrompt: (cwd) => `<environment_context>\n  <cwd>${cwd}</cwd>\n</environment_context>`,
  },
  opencode: {
    tools: [
      fn("bash", { command: s, description: s }),
      fn("read", { filePath: s }),
      fn("write", { filePath: s, content: s }),
      fn("edit", { filePath: s, oldString: s, newString: s }),
    ],
    run: (o, n, a) =>
      n === "bash"
        ? o.sh(str(a.command))
        : n === "read"
          ? `<file>\n${o
              .read(str(a.filePath))
              .split("\n")
              .map((l, i) => `${String(i + 1).padStart(5, "0")}| ${l}`)
              .join("\n")}\n</file>`
          : n === "write"
            ? o.write(str(a.filePath), str(a.content))
            : o.edit(str(a.filePath), str(a.oldString), str(a.newString)),
    systemPrompt: (cwd) => `Working directory: ${cwd}`,
  },
  pi: {
    tools: [
      fn("read", { path: s }),
      fn("bash", { command: s }),
      fn("edit", {
        path: s,
        edits: { type: "array", items: { type: "object", properties: { oldText: s, newText: s } } },
      }),
      fn("write", { path: s, content: s }),
    ],
    run: (o, n, a) => {
      if (n === "read") return o.read(str(a.path));
      if (n === "bash") return o.sh(str(a.command));
      if (n === "write") return o.write(str(a.path), str(a.content));
      const edits = a.edits as Array<{ oldText: string; newText: string }>;
      return edits.map((e) => o.edit(str(a.path), e.oldText, e.newText)).join("\n");
    },
    systemPrompt: (cwd) => `Current working directory: ${cwd}`,
  },
  gemini_cli: {
    // Gemini CLI 0.61: `replace` refuses a call without its required `instruction`; command output
    // comes framed (`<untrusted_context>`, `Output: `, `Process Group PGID: N`), as the proxy's
    // Google family renders `functionResponse.response.output`.
    tools: [
      fn("list_directory", { dir_path: s }),
      fn("read_file", { file_path: s, start_line: { type: "integer" } }, ["file_path"]),
      fn(
        "replace",
        { file_path: s, instruction: s, old_string: s, new_string: s, allow_multiple: { type: "boolean" } },
        ["file_path", "instruction", "old_string", "new_string"],
      ),
      fn("write_file", { file_path: s, content: s }),
      fn("run_shell_command", { command: s, description: s, is_background: { type: "boolean" } }, [
        "command",
      ]),
    ],
    run: (o, n, a) => {
      if (n === "run_shell_command") {
        const out = o.sh(str(a.command));
        const failed = /\[exit code (\d+)\]$/.exec(out);
        const text = failed ? out.slice(0, failed.index) : out;
        const sections = [`Output: ${text.trimEnd() || "(empty)"}`];
        if (failed) sections.push(`Exit Code: ${failed[1]}`);
        sections.push("Process Group PGID: 4242");
        return `<untrusted_context>\n${sections.join("\n")}\n</untrusted_context>`;
      }
      if (n === "read_file") return o.read(str(a.file_path));
      if (n === "write_file") return o.write(str(a.file_path), str(a.content));
      if (n === "replace") {
        if (typeof a.instruction !== "string" || a.instruction === "")
          return JSON.stringify({ error: "params must have required property 'instruction'" });
        const r = o.edit(str(a.file_path), str(a.old_string), str(a.new_string));
        return r.startsWith("Error")
          ? JSON.stringify({ error: r })
          : `Successfully modified file: ${a.file_path} (1 replacements).`;
      }
      return JSON.stringify({ error: `Tool "${n}" not found` });
    },
    systemPrompt: () => "You are Gemini CLI, an autonomous CLI agent.",
  },
  copilot_cli: {
    // Copilot CLI 1.0.102: its system prompt carries usage guidelines in a `<tools>` block of its
    // own, before the template's; the request opens with the date.
    tools: [
      fn("bash", { command: s, description: s, shellId: s, mode: s }, ["command", "description"]),
      fn("view", { path: s, view_range: { type: "array", items: { type: "integer" } } }, ["path"]),
      fn("create", { path: s, file_text: s }),
      fn("edit", { path: s, old_str: s, new_str: s }, ["path"]),
    ],
    run: (o, n, a) => {
      if (n === "bash") return `${o.sh(str(a.command))}\n<shellId: 0 completed with exit code 0>`;
      if (n === "view") return o.read(str(a.path));
      if (n === "create") return o.write(str(a.path), str(a.file_text));
      const r = o.edit(str(a.path), str(a.old_str), str(a.new_str));
      return r.startsWith("Error") ? r : `File ${a.path} updated with changes.`;
    },
    systemPrompt: (cwd) =>
      `You are the GitHub Copilot CLI.\n<environment_context>\n* Current working directory: ${cwd}\n</environment_context>\n` +
      "You have access to several tools.\n<tools>\n<bash>\n* Each command runs in a fresh process.\n</bash>\n</tools>",
    userPrompt: (instruction) =>
      `<current_datetime>2026-12-02T02:28:53.429+00:00</current_datetime>\n\n${instruction}`,
  },
  cline: {
    // Cline 3.0.65: `run_commands` takes a list of whole commands and answers with a JSON array
    // of `{query, result, success}`; `editor` answers with one such object.
    tools: [
      fn("read_files", {
        files: { type: "array", items: { type: "object", properties: { path: s } } },
      }),
      fn("run_commands", { commands: { type: "array", items: s } }),
      fn("editor", { path: s, old_text: s, new_text: s, insert_line: { type: "integer" } }, [
        "path",
        "new_text",
      ]),
    ],
    run: (o, n, a) => {
      if (n === "run_commands")
        return JSON.stringify(
          (a.commands as string[]).map((c) => {
            const out = o.sh(c);
            const failed = /\[exit code (\d+)\]$/.test(out);
            return {
              query: c,
              result: out,
              ...(failed ? { error: "Command failed" } : {}),
              success: !failed,
            };
          }),
        );
      if (n === "editor") {
        const r = o.edit(str(a.path), str(a.old_text), str(a.new_text));
        const ok = !r.startsWith("Error");
        return JSON.stringify({ query: `edit:${a.path}`, result: ok ? `Edited ${a.path}` : r, success: ok });
      }
      return JSON.stringify([{ query: "read", result: "Error: unexpected tool", success: false }]);
    },
    systemPrompt: (cwd) => `You are Cline.\nCurrent Working Directory: ${cwd}`,
  },
  codex_argv_shell: {
    tools: [fn("shell", { command: { type: "array", items: s } })],
    run: (o, _n, a) => {
      const argv = a.command as string[];
      return o.sh(argv.at(-1)!);
    },
    systemPrompt: () => "You are a coding agent.",
  },
  generic_execute: {
    tools: [fn("execute", { command: s })],
    run: (o, _n, a) => o.sh(str(a.command)),
    systemPrompt: () => "You are a coding agent.",
  },
};

let tok: ChatTokenizer;
const roots: string[] = [];
beforeAll(async () => {
  tok = await loadChatTokenizer();
});
afterAll(() => {
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

function workspace(): string {
  const root = mkdtempSync(join(tmpdir(), "sim-agent-"));
  roots.push(root);
  cpSync(REPO, root, { recursive: true });
  return root;
}

function opsIn(cwd: string): Ops {
  const p = (f: string) => resolve(cwd, f);
  return {
    sh: (cmd) => {
      const r = spawnSync("bash", ["-c", cmd], { cwd, encoding: "utf8" });
      return `${r.stdout}${r.stderr}${r.status ? `[exit code ${r.status}]` : ""}`;
    },
    read: (f) => readFileSync(p(f), "utf8"),
    write: (f, c) => {
      writeFileSync(p(f), c);
      return "ok";
    },
    edit: (f, o, n) => {
      const text = readFileSync(p(f), "utf8");
      if (text.split(o).length !== 2) return "Error: old text not found exactly once";
      writeFileSync(
        p(f),
        text.replace(o, () => n),
      );
      return "The file has been updated.";
    },
  };
}

/** Runs the agent loop for one session; returns the turns it took and the final message. */
function runSession(vocab: Vocabulary, cwd: string, routingKey: string, seed = 0) {
  const messages: ChatMessage[] = [
    { role: "system", content: vocab.systemPrompt(cwd) },
    { role: "user", content: vocab.userPrompt?.(INSTRUCTION) ?? INSTRUCTION },
  ];
  const names = vocab.tools.map((t) => t.function.name);
  const ops = opsIn(cwd);
  const actions: string[] = [];
  const made: Array<{ name: string; args: Record<string, unknown>; result: string }> = [];
  for (let turn = 1; turn <= MAX_AGENT_STEPS + 1; turn++) {
    const prompt = tok.render(messages, { tools: sglangToolDumps(vocab.tools), addGenerationPrompt: true });
    const answer = decideAnswer({ seed, routingKey, prompt });
    const { reasoning, text } = separateReasoning(answer.text);
    const { normal, calls } = parseToolCalls(text, names);
    if (calls.length === 0) {
      expect(answer.kind).toBe("agent_final");
      return { turns: turn, final: text, actions, calls: made, outcome: answer.agent!.outcome };
    }
    actions.push(answer.agent!.action);
    messages.push({
      role: "assistant",
      content: normal,
      ...(reasoning ? { reasoning_content: reasoning } : {}),
      tool_calls: calls.map((c, i) => ({ id: `c${turn}_${i}`, type: "function", function: c })),
    } as ChatMessage);
    for (const [i, c] of calls.entries()) {
      const args = JSON.parse(c.arguments) as Record<string, unknown>;
      const result = vocab.run(ops, c.name, args);
      made.push({ name: c.name, args, result });
      messages.push({ role: "tool", tool_call_id: `c${turn}_${i}`, content: result } as ChatMessage);
    }
  }
  throw new Error(`no final answer within ${MAX_AGENT_STEPS + 1} turns`);
}

const testsPass = (cwd: string) =>
  // Run directly (no --test runner process): node:test still exits 1 when a test fails.
  spawnSync("node", ["test_calculator.js"], { cwd, encoding: "utf8" }).status === 0;

describe("tool vocabularies", () => {
  it("maps each harness's tools to roles and argument names", () => {
    const box = (v: string) =>
      toolboxOf(
        parseOfferedTools(
          tok.render([{ role: "user", content: "x" }], { tools: sglangToolDumps(VOCABULARIES[v]!.tools) }),
        ),
      );
    expect(box("claude_code")).toMatchObject({
      shell: { main: "command" },
      read: { main: "file_path" },
      write: { main: "file_path", second: "content" },
      edit: { main: "file_path", second: "old_string", third: "new_string" },
    });
    expect(box("qwen_code")).toMatchObject({
      shell: { main: "command" },
      read: { main: "absolute_path" },
      list: { main: "path" },
    });
    expect(box("codex")).toEqual({ shell: expect.objectContaining({ main: "cmd" }) });
    expect(box("opencode").edit).toMatchObject({ main: "filePath", second: "oldString", third: "newString" });
    expect(box("pi").edit).toMatchObject({
      main: "path",
      editsArray: { property: "edits", old: "oldText", new: "newText" },
    });
    expect(box("codex_argv_shell").shell).toMatchObject({ main: "command", argv: true });
    // Copilot CLI: the template's block, not the guidelines block before it.
    expect(box("copilot_cli")).toMatchObject({
      shell: { tool: { name: "bash" } },
      read: { main: "path" },
      edit: { main: "path", second: "old_str", third: "new_str" },
    });
    expect(box("cline").shell).toMatchObject({ main: "commands", commandList: true });
    expect(box("cline").shell).not.toHaveProperty("argv");
  });
});

// Each session may run the example's tests (`node --test`, about a second on a busy machine).
describe("the agent fixes, breaks or leaves the calculator through every vocabulary", {
  timeout: 60_000,
}, () => {
  for (const [name, vocab] of Object.entries(VOCABULARIES)) {
    it(`${name}: outcome per session is what the files show; bounded turns`, () => {
      const seen = new Set<string>();
      for (const sample of [0, 1, 2, 3]) {
        const cwd = workspace();
        const before = readFileSync(join(cwd, "calculator.js"), "utf8");
        const r = runSession(vocab, cwd, `grp-${name}.0.${sample}`);
        seen.add(r.outcome);
        expect(r.turns).toBeLessThanOrEqual(MAX_AGENT_STEPS + 1);
        const after = readFileSync(join(cwd, "calculator.js"), "utf8");
        if (r.outcome === "fix") expect(testsPass(cwd), `${name} sample ${sample}: ${r.final}`).toBe(true);
        if (r.outcome === "wrong") {
          expect(after).not.toBe(before);
          expect(testsPass(cwd)).toBe(false);
        }
        if (r.outcome === "none") expect(after).toBe(before);
        expect(r.actions).toContain(r.outcome === "none" ? "read" : "edit");
        if (r.actions.includes("test")) expect(r.final).toMatch(/pass|fail/);
      }
      expect([...seen].sort()).toEqual(["fix", "none", "wrong"]);
    });
  }
});

describe("Gemini CLI's vocabulary", () => {
  it("reads the framed command output, edits through replace with an instruction, counts the tests", () => {
    let tested = 0;
    for (const sample of [0, 1, 2, 3]) {
      const cwd = workspace();
      const r = runSession(VOCABULARIES.gemini_cli!, cwd, `gem.0.${sample}`);
      // The pwd line inside `Output: ` gives the absolute path the file tools get.
      expect(r.calls[1]).toMatchObject({
        name: "read_file",
        args: { file_path: join(cwd, "calculator.js") },
      });
      const edits = r.calls.filter((c) => c.name === "replace");
      if (r.outcome === "none") expect(edits).toEqual([]);
      else {
        expect(edits).toHaveLength(1);
        expect(edits[0]!.args.instruction).toMatch(/\S/);
        expect(edits[0]!.result).toMatch(/^Successfully modified file/);
        // No fallback to sed: the first edit went through.
        expect(
          r.calls.some((c) => c.name === "run_shell_command" && /^sed /.test(String(c.args.command))),
        ).toBe(false);
      }
      if (!r.actions.includes("test")) continue;
      tested++;
      // Read from the framed output, every test line counts (the first one follows `Output: `).
      expect(r.final).toMatch(r.outcome === "fix" ? /All 4 tests pass/ : /1 test\(s\) still fail/);
    }
    expect(tested).toBeGreaterThan(0);
  });

  it("strips Gemini CLI's framing of command output and nothing else", () => {
    expect(
      stripResultFraming(
        "<untrusted_context>\nOutput: /w\nfile.js\nExit Code: 1\nProcess Group PGID: 7\n</untrusted_context>",
      ),
    ).toBe("/w\nfile.js\nExit Code: 1");
    expect(stripResultFraming("Output: not a section label\nplain")).toBe(
      "Output: not a section label\nplain",
    );
    expect(stripResultFraming("Process exited with code 0\nOutput:\n/w")).toBe(
      "Process exited with code 0\nOutput:\n/w",
    );
  });
});

describe("draws", () => {
  it("a group of four gets two fixes, one wrong edit and one non-edit, for any seed and group", () => {
    for (const seed of [0, 1, 7]) {
      for (const group of ["b_1.0", "b_2.3", "x"]) {
        const outcomes = [0, 1, 2, 3].map((i) => agentOutcome(seed, `${group}.${i}`, false));
        expect(outcomes.slice().sort()).toEqual([...GROUP_OUTCOMES].sort());
        expect([0, 1, 2, 3].map((i) => agentOutcome(seed, `${group}.${i}`, false))).toEqual(outcomes);
      }
    }
    expect(agentOutcome(3, "b.0.2", true)).toBe("fix");
    const free = ["a", "b", "c", "d", "e", "f", "g", "h"].map((k) => agentOutcome(0, k, false));
    expect(new Set(free).size).toBeGreaterThan(1);
  });

  it("the same seed and key give the same conversation; other seeds give other ones", () => {
    // The calls name each run's own workspace; the rest must be identical.
    const { calls: _a, ...a } = runSession(VOCABULARIES.pi!, workspace(), "same.0.1", 5);
    const { calls: _b, ...b } = runSession(VOCABULARIES.pi!, workspace(), "same.0.1", 5);
    expect(b).toEqual(a);
    // The seed is drawn from: over eight seeds the same key does not always play out the same.
    const bySeed = Array.from({ length: 8 }, (_, seed) => {
      const { calls: _c, ...run } = runSession(VOCABULARIES.pi!, workspace(), "same.0.1", seed);
      return JSON.stringify(run);
    });
    expect(new Set(bySeed).size).toBeGreaterThan(1);
  });
});

describe("reading what real harnesses send", () => {
  it("unwraps JSON tool results: Gemini's {output}, Cline's arrays; other text stays", () => {
    expect(unwrapJsonResult('{"output": "a\\nb"}')).toBe("a\nb");
    expect(
      unwrapJsonResult(
        '[{"query":"pwd","result":"/w\\n","success":true},{"query":"ls","result":"x.js","success":true}]',
      ),
    ).toBe("/w\n\nx.js");
    expect(
      unwrapJsonResult('{"query":"edit","result":"boom","error":"Command failed","success":false}'),
    ).toBe("Command failed\nboom");
    for (const text of ['{"error": "no such file"}', "[1, 2]", "plain {text}", '{"a": 1'])
      expect(unwrapJsonResult(text)).toBe(text);
    expect(stripResultFraming('[{"query":"pwd","result":"/w","success":true}]')).toBe("/w");
  });

  it("takes no date or harness context for the task", () => {
    expect(
      withoutHarnessContext("<current_datetime>2026-12-02T02:28:53.429+00:00</current_datetime>\n\nHi"),
    ).toBe("Hi");
    expect(withoutHarnessContext("Today is 2026-12-02. What is 2 + 3?")).toBe("Today is  . What is 2 + 3?");
    const prompt = (content: string) =>
      tok.render([{ role: "user", content }], { addGenerationPrompt: true });
    const dated = decideAnswer({
      seed: 0,
      routingKey: "d",
      prompt: prompt("<current_datetime>2026-12-02T02:28:53+00:00</current_datetime>\n\nSay hello."),
    });
    expect(dated.kind).not.toBe("arithmetic");
    expect(
      decideAnswer({
        seed: 0,
        routingKey: "d",
        prompt: prompt("<current_datetime>2026-12-02</current_datetime> 2 + 3?"),
      }).expected,
    ).toBe("5");
  });
});

describe("findArithmeticBug", () => {
  it("finds operator and operand-order bugs in JS functions, arrows and Python", () => {
    expect(findArithmeticBug("const multiply = (a, b) => a + b;\n", () => 0)).toMatchObject({
      functionName: "multiply",
      fixedLine: "const multiply = (a, b) => a * b;",
      wrongLine: "const multiply = (a, b) => a - b;",
    });
    expect(findArithmeticBug("def divide(x, y):\n    return y / x\n")?.fixedLine).toBe("    return x / y");
    expect(findArithmeticBug(readFileSync(join(REPO, "calculator.js"), "utf8"))).toMatchObject({
      functionName: "subtract",
      bugLine: 7,
      fixedLine: "  return a - b;",
    });
    const fixed = readFileSync(join(REPO, "calculator.js"), "utf8").replace(
      /(subtract\(a, b\) \{\n\s+return a) \+/,
      "$1 -",
    );
    expect(findArithmeticBug(fixed)).toBeUndefined();
  });

  it("strips read-tool gutters but leaves plain text alone", () => {
    expect(stripReadDecorations("     1\tfoo\n     2\t  bar")).toBe("foo\n  bar");
    expect(stripReadDecorations("<file>\n00001| foo\n00002| bar\n</file>")).toBe("foo\nbar");
    expect(stripReadDecorations("1 apple\nbanana")).toBe("1 apple\nbanana");
    // OpenCode 1.x: path/type/content wrappers, `N: ` gutters, an end-of-file note.
    expect(
      stripReadDecorations(
        "<path>/w/c.js</path>\n<type>file</type>\n<content>\n1: foo\n2: \n3:   bar\n\n(End of file - total 3 lines)\n</content>",
      ),
    ).toBe("foo\n\n  bar\n");
  });
});

describe("chat prompts without an agent task keep the chat policy", () => {
  it("a fix request without file or shell tools is not an agent task", () => {
    const prompt = tok.render([{ role: "user", content: "Please fix the bug in my code" }], {
      tools: sglangToolDumps([fn("calculator", { expression: s })]),
      addGenerationPrompt: true,
    });
    expect(decideAnswer({ seed: 0, routingKey: "k", prompt }).kind).toBe("generic");
  });
});

describe("reading its own test run", () => {
  it("counts upstream's status lines and node --test's TAP lines; skips are not passes", () => {
    expect(countTestResults("PASSED test_a\nFAILED test_b - boom\nERROR test_c\n")).toEqual({
      passed: 1,
      failed: 2,
    });
    const tap = "TAP version 13\nok 1 - test_add\nnot ok 2 - test_subtract\nok 3 - test_x # SKIP\n# pass 1\n";
    expect(countTestResults(tap)).toEqual({ passed: 1, failed: 1 });
    expect(countTestResults("4 passed, 0 failed")).toEqual({ passed: 0, failed: 0 });
  });
});
