import { describe, expect, it } from "vitest";
import { describeIssues, fieldIssues } from "./errors";
import { BUILDER_STRATEGIES, EVALUATOR_STRATEGIES, isModulePath, RUNTIME_BACKENDS } from "./names";
import { withinSamplingBound } from "./sglang-contract";
import { AgentSpec, BatchRequest, TaskSpec } from "./task";

const shell = { harness: "shell", custom_shell: { command: "echo {{INSTRUCTION}}" } } as const;

function issues(result: { success: boolean; error?: unknown }): string {
  if (result.success) return "";
  return describeIssues(fieldIssues(result.error as Parameters<typeof fieldIssues>[0]));
}

describe("TaskSpec", () => {
  it("applies upstream defaults", () => {
    const task = TaskSpec.parse({ task_id: "a", instruction: "hi", agent: shell });
    expect(task).toMatchObject({
      num_samples: 1,
      timeout_seconds: 600,
      metadata: {},
      dispatch_priority: 0,
      max_attempts: 3,
    });
  });

  it("leaves builder unset when the task does not name one (the gateway picks by its engine)", () => {
    const task = TaskSpec.parse({ task_id: "a", instruction: "hi", agent: shell });
    expect(task.builder).toBeUndefined();
    expect(
      TaskSpec.parse({ task_id: "a", instruction: "hi", agent: shell, builder: { strategy: "per_request" } })
        .builder,
    ).toEqual({
      strategy: "per_request",
      config: {},
    });
  });

  it("accepts every upstream TaskRequest key plus max_attempts and queue", () => {
    const task = TaskSpec.parse({
      task_id: "a",
      instruction: "hi",
      num_samples: 4,
      timeout_seconds: 1200,
      runtime: { backend: "docker", image: "img:1", prepare: [{ type: "exec", command: "git init" }] },
      agent: shell,
      builder: { strategy: "prefix_merging" },
      evaluator: { strategy: "test_on_output", config: { test_command: "pytest" }, refresh_runtime: true },
      callback_url: "https://trainer.example/cb",
      metadata: { group_id: 3 },
      dispatch_priority: 50,
      early_stop_min_usable_sessions: 2,
      max_attempts: 2,
      queue: "gpu-a",
    });
    expect(task.runtime?.prepare[0]).toEqual({ type: "exec", command: "git init", env: {}, max_attempts: 1 });
  });

  it("names unknown keys at any depth", () => {
    const r = TaskSpec.safeParse({
      task_id: "a",
      instruction: "hi",
      agent: { ...shell, modle: "x" },
      extra: 1,
    });
    expect(issues(r)).toContain("agent.modle: unknown key");
    expect(issues(r)).toContain("extra: unknown key");
  });

  it("checks cross-field rules", () => {
    expect(
      issues(TaskSpec.safeParse({ task_id: "a", instruction: "x", agent: { harness: "shell" } })),
    ).toContain("agent.custom_shell: required when harness is 'shell'");
    expect(
      issues(
        TaskSpec.safeParse({
          task_id: "a",
          instruction: "x",
          num_samples: 2,
          early_stop_min_usable_sessions: 3,
          agent: shell,
        }),
      ),
    ).toContain("early_stop_min_usable_sessions: must be <= num_samples (2)");
    expect(issues(AgentSpec.safeParse({ harness: "pi", import_path: "m:C" }))).toContain(
      "harness: exactly one of",
    );
  });

  it("takes a sampling policy under agent.sampling and names each bad field", () => {
    const base = { task_id: "a", instruction: "x", agent: shell };
    const policy = { temperature: 1, top_p: 0.95, top_k: -1, min_p: 0 };
    expect(TaskSpec.parse({ ...base, agent: { ...shell, sampling: policy } }).agent.sampling).toEqual(policy);
    expect(TaskSpec.parse(base).agent.sampling).toBeUndefined();
    const bad = (sampling: unknown) => issues(TaskSpec.safeParse({ ...base, agent: { ...shell, sampling } }));
    expect(bad({ temperature: -0.1 })).toMatch(/^agent\.sampling\.temperature: /);
    expect(bad({ top_p: 0 })).toMatch(/^agent\.sampling\.top_p: /);
    expect(bad({ top_p: 1.5 })).toMatch(/^agent\.sampling\.top_p: /);
    expect(bad({ top_k: 0 })).toBe("agent.sampling.top_k: must be -1 or an integer >= 1");
    expect(bad({ top_k: 2.5 })).toMatch(/^agent\.sampling\.top_k: /);
    expect(bad({ min_p: 2 })).toMatch(/^agent\.sampling\.min_p: /);
    expect(bad({ temperature: "1" })).toMatch(/^agent\.sampling\.temperature: /);
    expect(bad({ seed: 1 })).toBe("agent.sampling.seed: unknown key");
  });

  it("holds agent.sampling to exactly the engine's bounds (the shared /generate contract)", () => {
    const base = { task_id: "a", instruction: "x", agent: shell };
    const accepts = (field: string, v: number) =>
      TaskSpec.safeParse({ ...base, agent: { ...shell, sampling: { [field]: v } } }).success;
    const values = [-2, -1, -0.5, 0, 1e-9, 0.5, 1, 1.5, 2, 2.5, 7, 99];
    for (const field of ["temperature", "top_p", "top_k", "min_p"]) {
      for (const v of values)
        expect([field, v, accepts(field, v)]).toEqual([field, v, withinSamplingBound(field, v)]);
    }
    expect(accepts("temperature", Number.POSITIVE_INFINITY)).toBe(false);
  });

  it("accepts every built-in strategy and backend, and names an unknown one with the accepted list", () => {
    const base = { task_id: "a", instruction: "x", agent: shell };
    for (const strategy of EVALUATOR_STRATEGIES)
      expect(TaskSpec.safeParse({ ...base, evaluator: { strategy } }).success).toBe(true);
    for (const strategy of BUILDER_STRATEGIES)
      expect(TaskSpec.safeParse({ ...base, builder: { strategy } }).success).toBe(true);
    for (const backend of RUNTIME_BACKENDS)
      expect(TaskSpec.safeParse({ ...base, runtime: { backend, image: "img:1" } }).success).toBe(true);
    expect(issues(TaskSpec.safeParse({ ...base, evaluator: { strategy: "vibes" } }))).toBe(
      "evaluator.strategy: 'vibes' is not a built-in strategy (session_completed, test_on_output, harbor, swebench_harness) nor a module path ('./file.mjs:export')",
    );
    expect(issues(TaskSpec.safeParse({ ...base, builder: { strategy: "tree" } }))).toContain(
      "builder.strategy: 'tree' is not a built-in strategy (per_request, prefix_merging, conversation)",
    );
    expect(issues(TaskSpec.safeParse({ ...base, runtime: { backend: "k8s" } }))).toContain(
      "runtime.backend:",
    );
    expect(issues(TaskSpec.safeParse({ ...base, agent: { harness: "cursor" } }))).toContain("agent.harness:");
  });

  it("checks the conversation builder's traces mode at submission, naming the field", () => {
    const base = { task_id: "a", instruction: "x", agent: shell };
    for (const traces of ["leaves", "longest", "per_turn"])
      expect(
        TaskSpec.safeParse({ ...base, builder: { strategy: "conversation", config: { traces } } }).success,
      ).toBe(true);
    expect(
      issues(
        TaskSpec.safeParse({ ...base, builder: { strategy: "conversation", config: { traces: "all" } } }),
      ),
    ).toBe('builder.config.traces: must be one of leaves, longest, per_turn, got "all"');
    // Another strategy's config is its own business.
    expect(
      TaskSpec.safeParse({ ...base, builder: { strategy: "per_request", config: { traces: "all" } } })
        .success,
    ).toBe(true);
  });

  it("accepts module paths for strategies: the gateway resolves them", () => {
    for (const strategy of ["./e.mjs:evaluate", "/opt/e.mjs", "pkg.mod:Class", "../x.js"]) {
      expect(isModulePath(strategy)).toBe(true);
      const r = TaskSpec.safeParse({
        task_id: "a",
        instruction: "x",
        agent: shell,
        evaluator: { strategy },
        builder: { strategy },
      });
      expect(issues(r)).toBe("");
    }
    expect(isModulePath("test_on_output")).toBe(false);
  });

  it("refuses a container backend without an image", () => {
    const base = { task_id: "a", instruction: "x", agent: shell };
    expect(issues(TaskSpec.safeParse({ ...base, runtime: { backend: "docker" } }))).toBe(
      "runtime.image: required for the docker backend",
    );
    expect(issues(TaskSpec.safeParse({ ...base, runtime: { backend: "apptainer" } }))).toBe(
      "runtime.image: required for the apptainer backend",
    );
    // A custom runtime decides what it needs.
    expect(
      issues(TaskSpec.safeParse({ ...base, runtime: { backend: "docker", import_path: "./r.mjs" } })),
    ).toBe("");
  });

  it("rejects ids that cannot be used in URLs", () => {
    expect(issues(TaskSpec.safeParse({ task_id: "a/b", instruction: "x", agent: shell }))).toContain(
      "task_id:",
    );
  });
});

describe("BatchRequest", () => {
  const task = { task_id: "a", instruction: "x", agent: shell };

  it("refuses duplicate task ids and empty batches", () => {
    expect(issues(BatchRequest.safeParse({ tasks: [task, task] }))).toContain(
      "tasks[1].task_id: duplicate task_id 'a'",
    );
    expect(issues(BatchRequest.safeParse({ tasks: [] }))).toContain("tasks:");
  });

  it("caps the total number of sessions", () => {
    const tasks = Array.from({ length: 11 }, (_, i) => ({ ...task, task_id: `t${i}`, num_samples: 1000 }));
    expect(issues(BatchRequest.safeParse({ tasks }))).toContain(
      "batch has 11000 sessions; the limit is 10000",
    );
  });
});
