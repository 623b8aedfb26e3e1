import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadTaskFile } from "./task-file";
import { UsageError } from "./usage-error";

const dir = mkdtempSync(join(tmpdir(), "polar-taskfile-"));
function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

describe("loadTaskFile", () => {
  it("reads one YAML task into a batch and applies overrides", () => {
    const path = file(
      "one.yaml",
      "task_id: a\ninstruction: hi\nagent:\n  harness: shell\n  custom_shell:\n    command: echo {{INSTRUCTION}}\n",
    );
    const batch = loadTaskFile(path, { batchId: "b1", queue: "q" });
    expect(batch).toMatchObject({ batch_id: "b1", queue: "q", tasks: [{ task_id: "a", instruction: "hi" }] });
  });

  it("reads a JSON list of tasks", () => {
    const task = {
      task_id: "a",
      instruction: "x",
      agent: { harness: "shell", custom_shell: { command: "true" } },
    };
    const path = file("list.json", JSON.stringify([task, { ...task, task_id: "b" }]));
    expect(loadTaskFile(path).tasks).toHaveLength(2);
  });

  it("names the file and the offending field", () => {
    const path = file("bad.yaml", "task_id: a\ninstruction: hi\nnum_samples: 0\nagent: {harness: shell}\n");
    expect(() => loadTaskFile(path)).toThrow(UsageError);
    expect(() => loadTaskFile(path)).toThrow(
      /bad\.yaml: .*tasks\[0\]\.num_samples.*tasks\[0\]\.agent\.custom_shell/,
    );
  });

  it("reports unparsable files and missing files clearly", () => {
    expect(() => loadTaskFile(file("broken.json", "{"))).toThrow(/broken\.json: not valid JSON/);
    expect(() => loadTaskFile(join(dir, "missing.yaml"))).toThrow(/missing\.yaml: cannot read \(ENOENT\)/);
  });

  it("refuses nesting it could not send, deep JSON or a YAML alias inside itself (fuzz counterexamples)", () => {
    const deep = `{"task_id":"a","instruction":"hi","agent":{"harness":"shell","custom_shell":{"command":"x"}},"metadata":${'{"a":'.repeat(20_000)}1${"}".repeat(20_000)}}`;
    const path = file("deep.json", deep);
    expect(() => loadTaskFile(path)).toThrow(UsageError);
    expect(() => loadTaskFile(path)).toThrow(
      /deep\.json: tasks\[0\]\.metadata(\.a)+…: nests more than 128 levels deep \(LIMITS\.maxJsonDepth\)$/,
    );
    const cycle = file(
      "cycle.yaml",
      "task_id: a\ninstruction: hi\nagent: {harness: shell, custom_shell: {command: x}}\nmetadata: &m {self: *m}\n",
    );
    expect(() => loadTaskFile(cycle)).toThrow(
      /cycle\.yaml: tasks\[0\]\.metadata(\.self)+…?: nests more than 128/,
    );
  });
});
