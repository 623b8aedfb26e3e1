/**
 * Task specification: what a trainer submits. Keys follow upstream Polar's `TaskRequest`
 * (`task_id, instruction, num_samples, timeout_seconds, runtime, agent, builder, evaluator,
 * callback_url, metadata, dispatch_priority, early_stop_min_usable_sessions`) plus `max_attempts`,
 * `queue` and `queue_timeout_seconds`. Every object is strict: an unknown key is an error that names the key, so a typo in
 * a task file never silently changes what runs.
 *
 * @module
 */
import { z } from "zod";
import { LIMITS } from "./limits";
import {
  BUILDER_STRATEGIES,
  EVALUATOR_STRATEGIES,
  HARNESS_NAMES,
  RUNTIME_BACKENDS,
  strategyProblem,
} from "./names";

/** Identifier used in URLs and storage keys: task ids, batch ids, queue names, node ids. */
export const Identifier = z
  .string()
  .min(1)
  .max(128)
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9_.:-]*$/,
    "must start with a letter or digit and use only A-Z a-z 0-9 _ . : -",
  );

/** Free-form JSON object passed through untouched (task metadata, harness settings, …). */
export const JsonObject = z.record(z.string(), z.unknown());
export type JsonObject = z.infer<typeof JsonObject>;

/** One step of runtime preparation (upstream `PrepareAction`). */
export const PrepareAction = z.discriminatedUnion("type", [
  z.strictObject({
    type: z.literal("upload_file"),
    source: z.string().min(1),
    target: z.string().min(1),
    max_attempts: z.number().int().min(1).max(10).default(1),
  }),
  z.strictObject({
    type: z.literal("upload_dir"),
    source: z.string().min(1),
    target: z.string().min(1),
    max_attempts: z.number().int().min(1).max(10).default(1),
  }),
  z.strictObject({
    type: z.literal("exec"),
    command: z.string().min(1),
    cwd: z.string().optional(),
    env: z.record(z.string(), z.string()).default({}),
    max_attempts: z.number().int().min(1).max(10).default(1),
  }),
]);
export type PrepareAction = z.infer<typeof PrepareAction>;

// Checked at submit, not at the gateway: an image-less container task can never run anywhere.
function needsImage(spec: { backend: string; image?: string; import_path?: string }, ctx: z.RefinementCtx) {
  if (spec.backend !== "local" && spec.image === undefined && spec.import_path === undefined)
    ctx.addIssue({ code: "custom", path: ["image"], message: `required for the ${spec.backend} backend` });
}

/**
 * Where a session runs (upstream `RuntimeSpec`). `local` is a fresh workspace folder on the gateway
 * host; `docker` and `apptainer` are container backends.
 */
const RuntimeSpecFields = z.strictObject({
  backend: z.enum(RUNTIME_BACKENDS).default("local"),
  image: z.string().min(1).optional(),
  prepare: z.array(PrepareAction).default([]),
  eval_prepare: z.array(PrepareAction).nullable().default(null),
  env: z.record(z.string(), z.string()).default({}),
  network: z.string().default("host"),
  workdir: z.string().optional(),
  cpus: z.number().positive().optional(),
  memory_mb: z.number().int().positive().optional(),
  storage_mb: z.number().int().positive().optional(),
  gpus: z.number().int().min(0).default(0),
  allow_internet: z.boolean().default(true),
  volumes: z.array(z.string()).default([]),
  import_path: z.string().optional(),
  kwargs: JsonObject.default({}),
});
/** {@link RuntimeSpecFields} with the cross-field check (a container backend needs an image). */
export const RuntimeSpec = RuntimeSpecFields.superRefine(needsImage);
export type RuntimeSpec = z.infer<typeof RuntimeSpec>;

/** A command run inside the runtime (upstream `ExecInput`). */
export const ExecInput = z.strictObject({
  command: z.string().min(1),
  cwd: z.string().optional(),
  env: z.record(z.string(), z.string()).default({}),
});

/** An MCP server offered to a harness that supports them. */
export const McpServer = z.strictObject({
  name: z.string().min(1),
  transport: z.enum(["stdio", "sse", "streamable-http"]),
  command: z.string().optional(),
  args: z.array(z.string()).default([]),
  url: z.string().optional(),
});

/** Known harness presets; `shell` runs `custom_shell.command`. */
export const HarnessName = z.enum(HARNESS_NAMES);

/**
 * The trainer's sampling policy for every model call of the task's sessions: the proxy applies each
 * set field over what the harness sent (a harness's own temperature is not the policy the gradient
 * assumes), on every API family and engine, and records both. Unset fields leave the harness's value.
 * Ranges are the engines' own: exactly SGLang's `SamplingParams.verify()` bounds of the shared
 * `/generate` contract (`protocol/sglang-contract.ts`; a test holds them equal), which vLLM's
 * include, plus a temperature cap of 100. Written as zod bounds so the API document shows them.
 *
 * @example
 * ```ts
 * SamplingPolicy.parse({ temperature: 1, top_p: 0.95 }); // a harness sending temperature 0 samples at 1
 * ```
 */
export const SamplingPolicy = z.strictObject({
  temperature: z.number().min(0).max(100).optional(),
  top_p: z.number().gt(0).max(1).optional(),
  /** -1 means no top-k cut (the engines' convention). */
  top_k: z
    .number()
    .int()
    .refine((v) => v === -1 || v >= 1, "must be -1 or an integer >= 1")
    .optional(),
  min_p: z.number().min(0).max(1).optional(),
});
export type SamplingPolicy = z.infer<typeof SamplingPolicy>;

/** Which harness runs the task (upstream `AgentSpec`): exactly one of `harness` / `import_path`. */
export const AgentSpec = z
  .strictObject({
    harness: HarnessName.optional(),
    import_path: z.string().min(1).optional(),
    model_name: z.string().optional(),
    settings: JsonObject.default({}),
    env: z.record(z.string(), z.string()).default({}),
    mcp_servers: z.array(McpServer).default([]),
    skills_path: z.string().optional(),
    custom_shell: ExecInput.optional(),
    /** The trainer's sampling policy, applied by the proxy over the harness's values. */
    sampling: SamplingPolicy.optional(),
  })
  .superRefine((spec, ctx) => {
    if ((spec.harness === undefined) === (spec.import_path === undefined)) {
      ctx.addIssue({
        code: "custom",
        path: ["harness"],
        message: "exactly one of harness or import_path is required",
      });
    }
    if (spec.harness === "shell" && !spec.custom_shell) {
      ctx.addIssue({ code: "custom", path: ["custom_shell"], message: "required when harness is 'shell'" });
    }
    if (spec.custom_shell && spec.harness !== "shell") {
      ctx.addIssue({ code: "custom", path: ["custom_shell"], message: "only allowed with harness 'shell'" });
    }
  });
export type AgentSpec = z.infer<typeof AgentSpec>;

/**
 * A strategy name that must be one of `known` or a module path (checked at submit: the message
 * names the field through the issue's path).
 */
const strategyName = (known: readonly string[]) =>
  z
    .string()
    .min(1)
    .superRefine((value, ctx) => {
      const problem = strategyProblem(value, known);
      if (problem) ctx.addIssue({ code: "custom", message: problem });
    });

/** What the `conversation` builder's config `traces` may say (`proxy/builders/conversation.ts`). */
export const CONVERSATION_TRACES = ["leaves", "longest", "per_turn"] as const;

/** A named strategy with its configuration (trajectory builders). */
export const StrategySpec = z
  .strictObject({
    strategy: strategyName(BUILDER_STRATEGIES),
    config: JsonObject.default({}),
  })
  .superRefine((spec, ctx) => {
    const traces = spec.config.traces;
    if (
      spec.strategy === "conversation" &&
      traces !== undefined &&
      !CONVERSATION_TRACES.includes(traces as never)
    )
      ctx.addIssue({
        code: "custom",
        path: ["config", "traces"],
        message: `must be one of ${CONVERSATION_TRACES.join(", ")}, got ${JSON.stringify(traces)}`,
      });
  });
export type StrategySpec = z.infer<typeof StrategySpec>;

/** How a session is scored (upstream `EvaluatorSpec`). */
export const EvaluatorSpec = z.strictObject({
  strategy: strategyName(EVALUATOR_STRATEGIES),
  config: JsonObject.default({}),
  env: z.record(z.string(), z.string()).default({}),
  refresh_runtime: z.boolean().default(false),
});
export type EvaluatorSpec = z.infer<typeof EvaluatorSpec>;

/** Task metadata key of upstream's eval seeds (`eval_sampling_seed_base`). */
export const EVAL_SEED_BASE_KEY = "eval_sampling_seed_base";

/**
 * One task = one prompt group of `num_samples` sessions.
 *
 * @example
 * ```ts
 * const task = TaskSpec.parse({
 *   task_id: "add-1",
 *   instruction: "What is 2 + 3?",
 *   num_samples: 4,
 *   agent: { harness: "shell", custom_shell: { command: "node ask.mjs {{INSTRUCTION}}" } },
 * });
 * ```
 */
export const TaskSpec = z
  .strictObject({
    task_id: Identifier,
    instruction: z.string().min(1).max(LIMITS.instructionBytes),
    num_samples: z.number().int().min(1).max(LIMITS.maxSamplesPerTask).default(1),
    /** Run budget, counted from INITIALIZING on a gateway (each attempt its own); waiting is not charged. */
    timeout_seconds: z.number().positive().max(LIMITS.maxTimeoutSeconds).default(600),
    /**
     * Longest wait for a gateway (from QUEUED, again after a requeue, until INITIALIZING); then the
     * session ends TIMEOUT with `timeout_source: queue`. Unset: wait as long as the queue has a gateway.
     */
    queue_timeout_seconds: z.number().positive().max(LIMITS.maxQueueTimeoutSeconds).optional(),
    runtime: RuntimeSpec.optional(),
    agent: AgentSpec,
    // No default here: unset means "the gateway's default for its engine" (`conversation` in token
    // mode, `per_request` with a chat-completions engine), which the control plane cannot know.
    builder: StrategySpec.optional(),
    evaluator: EvaluatorSpec.optional(),
    callback_url: z.url().optional(),
    metadata: JsonObject.default({}),
    dispatch_priority: z.number().int().min(0).max(100).default(0),
    early_stop_min_usable_sessions: z.number().int().min(1).optional(),
    max_attempts: z.number().int().min(1).max(10).default(3),
    queue: Identifier.optional(),
    /**
     * Hold each model call until the engine replica serving it reports a weight version of at
     * least this policy version (decimal integers; SGLang's `"default"` counts as 0), for at most
     * the gateway's `--policy-version-wait`; then the session ends as a `configuration` ERROR
     * naming the gap (docs/training.md, "A version no engine reaches").
     */
    min_policy_version: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
    /**
     * The request priority of every model call the session makes: higher runs first. The proxy
     * sends it to engines that schedule by priority (SGLang `--enable-priority-scheduling`; vLLM
     * `--scheduling-policy priority`, as its negation, since vLLM runs lower values first) and
     * leaves it out elsewhere (docs/engines.md, "Request priority"). Unset: the engine's default.
     */
    engine_priority: z.number().int().min(-LIMITS.maxEnginePriority).max(LIMITS.maxEnginePriority).optional(),
  })
  .superRefine((task, ctx) => {
    const early = task.early_stop_min_usable_sessions;
    if (early !== undefined && early > task.num_samples) {
      ctx.addIssue({
        code: "custom",
        path: ["early_stop_min_usable_sessions"],
        message: `must be <= num_samples (${task.num_samples})`,
      });
    }
    // Upstream's per-sample eval seeds: sample i gets agent.settings.sampling_seed = base + i.
    const seed = task.metadata[EVAL_SEED_BASE_KEY];
    if (seed !== undefined && !(Number.isSafeInteger(seed) && (seed as number) >= 0)) {
      ctx.addIssue({
        code: "custom",
        path: ["metadata", EVAL_SEED_BASE_KEY],
        message: "must be a non-negative integer",
      });
    }
  });
export type TaskSpec = z.infer<typeof TaskSpec>;

/**
 * Upstream's per-sample eval seed: `metadata.eval_sampling_seed_base` + the sample index, or null
 * when the task sets no base. Sample i's session gets it as `agent.settings.sampling_seed` and
 * `metadata.eval_sampling_seed`, so a fixed evaluation samples the same way every time.
 *
 * @example
 * ```ts
 * samplingSeed({ eval_sampling_seed_base: 1000 }, 2); // 1002
 * ```
 */
export function samplingSeed(metadata: Record<string, unknown>, sampleIndex: number): number | null {
  const base = metadata[EVAL_SEED_BASE_KEY];
  return typeof base === "number" && Number.isSafeInteger(base) && base >= 0 ? base + sampleIndex : null;
}
/** A task as the trainer writes it (defaults not yet applied). */
export type TaskSpecInput = z.input<typeof TaskSpec>;

/**
 * Body of `POST /v1/batches`.
 *
 * @example
 * ```ts
 * BatchRequest.parse({ tasks: [task] }); // batch_id is generated by the server when absent
 * ```
 */
export const BatchRequest = z
  .strictObject({
    batch_id: Identifier.max(LIMITS.maxBatchIdChars).optional(),
    queue: Identifier.optional(),
    callback_url: z.url().optional(),
    tasks: z.array(TaskSpec).min(1).max(LIMITS.maxTasksPerBatch),
  })
  .superRefine((batch, ctx) => {
    const seen = new Set<string>();
    let sessions = 0;
    batch.tasks.forEach((task, i) => {
      if (seen.has(task.task_id)) {
        ctx.addIssue({
          code: "custom",
          path: ["tasks", i, "task_id"],
          message: `duplicate task_id '${task.task_id}'`,
        });
      }
      seen.add(task.task_id);
      sessions += task.num_samples;
    });
    if (sessions > LIMITS.maxSessionsPerBatch) {
      ctx.addIssue({
        code: "custom",
        path: ["tasks"],
        message: `batch has ${sessions} sessions; the limit is ${LIMITS.maxSessionsPerBatch}`,
      });
    }
  });
export type BatchRequest = z.infer<typeof BatchRequest>;
export type BatchRequestInput = z.input<typeof BatchRequest>;
