/**
 * Request priority in the simulated engine, as the real servers schedule by it.
 *
 * SGLang (checked against `server_args.py`, `managers/scheduler.py` `_set_or_validate_priority`,
 * `managers/schedule_policy.py` `_sort_by_priority_and_fcfs` / `preempt_to_schedule`,
 * `managers/tokenizer_manager.py`, `entrypoints/openai/protocol.py`; main as of 2026-11):
 * - `--enable-priority-scheduling` (off by default) orders the waiting queue by `priority`, then
 *   arrival. HIGHER values run first unless `--schedule-low-priority-values-first`.
 * - A request without a priority gets `--default-priority-value`, or, when that is unset, the
 *   worst priority there is (SGLang: `-sys.maxsize - 1`, or `sys.maxsize` with low values first):
 *   it runs after every request that has one and never preempts.
 * - With no free slot, a waiting request whose priority is better than the worst running one's by
 *   MORE than `--priority-scheduling-preemption-threshold` (default 10) preempts it, unless
 *   `--disable-priority-preemption`. The preempted request goes back to the waiting queue (its
 *   arrival is now) keeping its decoded tokens, and prefills again when it is re-admitted.
 * - With priority scheduling off, a request's `priority` is ignored, or, with
 *   `--abort-on-priority-when-disabled`, the request is aborted with HTTP 503 and "Using priority
 *   is disabled for this server. Please send a new request without a priority.".
 * - `priority` is `Optional[int]` on `/generate` (`GenerateReqInput`) and on
 *   `/v1/chat/completions` (`ChatCompletionRequest`): pydantic refuses a value that is not an
 *   integer (400), and, being lax, takes an integral float, an integer string or a boolean.
 *
 * vLLM (`vllm/v1/core/sched/request_queue.py` `PriorityRequestQueue`, `vllm/v1/request.py`
 * `__lt__`, the engine's `add_request` check): `--scheduling-policy priority` runs LOWER values
 * first, then earlier arrivals; `priority` defaults to 0; with the default `fcfs` policy a request
 * with `priority != 0` is refused, HTTP 400 `Got priority {p} but Priority scheduling is not
 * enabled.`. vLLM preempts only when its KV cache runs out, which the simulator does not model, so
 * the vLLM flavors never preempt.
 *
 * @module
 */
import type { PrioritySchedulingOptions } from "./scheduler";

/** SGLang's priority server arguments, by their `/server_info` names, with SGLang's defaults. */
export interface SglangPriorityArgs {
  enable_priority_scheduling: boolean;
  schedule_low_priority_values_first: boolean;
  priority_scheduling_preemption_threshold: number;
  disable_priority_preemption: boolean;
  /** `None` in SGLang: a request without a priority gets the worst one. */
  default_priority_value: number | null;
  abort_on_priority_when_disabled: boolean;
}

/** vLLM's `--scheduling-policy` values the simulator models. */
export const VLLM_SCHEDULING_POLICIES = ["fcfs", "priority"] as const;
export type VllmSchedulingPolicy = (typeof VLLM_SCHEDULING_POLICIES)[number];

/** How one simulated server schedules by priority: SGLang's arguments, or vLLM's policy. */
export type PriorityConfig =
  | { engine: "sglang"; args: SglangPriorityArgs }
  | { engine: "vllm"; schedulingPolicy: VllmSchedulingPolicy };

/** SGLang's defaults (`server_args.py`). */
export const SGLANG_PRIORITY_DEFAULTS: Readonly<SglangPriorityArgs> = {
  enable_priority_scheduling: false,
  schedule_low_priority_values_first: false,
  priority_scheduling_preemption_threshold: 10,
  disable_priority_preemption: false,
  default_priority_value: null,
  abort_on_priority_when_disabled: false,
};

/** The priority options of `startSimEngine` (camelCase; the CLI flags carry the servers' names). */
export interface PriorityOptions {
  /** SGLang `--enable-priority-scheduling`; default off. */
  enablePriorityScheduling?: boolean;
  /** SGLang `--schedule-low-priority-values-first`; default off (higher values first). */
  scheduleLowPriorityValuesFirst?: boolean;
  /** SGLang `--priority-scheduling-preemption-threshold`, an integer >= 0; default 10. */
  prioritySchedulingPreemptionThreshold?: number;
  /** SGLang `--disable-priority-preemption`; default off (preemption on with priority scheduling). */
  disablePriorityPreemption?: boolean;
  /** SGLang `--default-priority-value`, an integer; default none (the worst priority). */
  defaultPriorityValue?: number;
  /** SGLang `--abort-on-priority-when-disabled`; default off (the priority is ignored). */
  abortOnPriorityWhenDisabled?: boolean;
  /** vLLM `--scheduling-policy`; default `fcfs`. */
  schedulingPolicy?: VllmSchedulingPolicy;
}

const SGLANG_OPTIONS = [
  "enablePriorityScheduling",
  "scheduleLowPriorityValuesFirst",
  "prioritySchedulingPreemptionThreshold",
  "disablePriorityPreemption",
  "defaultPriorityValue",
  "abortOnPriorityWhenDisabled",
] as const satisfies ReadonlyArray<keyof PriorityOptions>;

/**
 * The priority configuration of a server of the given kind, checked; throws naming the option.
 *
 * @example
 * ```ts
 * priorityConfig({ enablePriorityScheduling: true }, "sglang");
 * // { engine: "sglang", args: { enable_priority_scheduling: true, …, priority_scheduling_preemption_threshold: 10 } }
 * priorityConfig({ schedulingPolicy: "priority" }, "vllm"); // { engine: "vllm", schedulingPolicy: "priority" }
 * ```
 */
export function priorityConfig(opts: PriorityOptions, engine: "sglang" | "vllm"): PriorityConfig {
  if (engine === "vllm") {
    const sglangOnly = SGLANG_OPTIONS.find((k) => opts[k] !== undefined && opts[k] !== false);
    if (sglangOnly)
      throw new Error(`${sglangOnly}: an SGLang option; the vLLM flavors take schedulingPolicy`);
    const policy = opts.schedulingPolicy ?? "fcfs";
    if (!(VLLM_SCHEDULING_POLICIES as readonly string[]).includes(policy))
      throw new Error(`schedulingPolicy: '${policy}' is not one of ${VLLM_SCHEDULING_POLICIES.join(", ")}`);
    return { engine, schedulingPolicy: policy };
  }
  if (opts.schedulingPolicy !== undefined)
    throw new Error("schedulingPolicy: a vLLM option; the SGLang flavors take enablePriorityScheduling");
  const threshold =
    opts.prioritySchedulingPreemptionThreshold ??
    SGLANG_PRIORITY_DEFAULTS.priority_scheduling_preemption_threshold;
  if (!Number.isSafeInteger(threshold) || threshold < 0)
    throw new Error(`prioritySchedulingPreemptionThreshold: must be an integer >= 0, got ${threshold}`);
  if (opts.defaultPriorityValue !== undefined && !Number.isSafeInteger(opts.defaultPriorityValue))
    throw new Error(`defaultPriorityValue: must be an integer, got ${opts.defaultPriorityValue}`);
  return {
    engine,
    args: {
      enable_priority_scheduling: opts.enablePriorityScheduling ?? false,
      schedule_low_priority_values_first: opts.scheduleLowPriorityValuesFirst ?? false,
      priority_scheduling_preemption_threshold: threshold,
      disable_priority_preemption: opts.disablePriorityPreemption ?? false,
      default_priority_value: opts.defaultPriorityValue ?? null,
      abort_on_priority_when_disabled: opts.abortOnPriorityWhenDisabled ?? false,
    },
  };
}

/**
 * What the simulated GPU does with priorities under a configuration.
 *
 * @example
 * ```ts
 * schedulerPriority({ engine: "vllm", schedulingPolicy: "priority" });
 * // { enabled: true, lowValuesFirst: true, preemption: false, preemptionThreshold: 0, defaultPriority: 0 }
 * ```
 */
export function schedulerPriority(config: PriorityConfig): PrioritySchedulingOptions {
  if (config.engine === "vllm") {
    return {
      enabled: config.schedulingPolicy === "priority",
      lowValuesFirst: true,
      preemption: false,
      preemptionThreshold: 0,
      defaultPriority: 0,
    };
  }
  const a = config.args;
  return {
    enabled: a.enable_priority_scheduling,
    lowValuesFirst: a.schedule_low_priority_values_first,
    // SGLang: `enable_priority_preemption = enable_priority_scheduling and not disable_priority_preemption`.
    preemption: a.enable_priority_scheduling && !a.disable_priority_preemption,
    preemptionThreshold: a.priority_scheduling_preemption_threshold,
    ...(a.default_priority_value !== null ? { defaultPriority: a.default_priority_value } : {}),
  };
}

/**
 * The server arguments a configuration reports (flat, in `/server_info` and `/sim/stats` `config`):
 * SGLang's `schedule_policy` and six priority arguments, or vLLM's `scheduling_policy`.
 *
 * @example
 * ```ts
 * priorityServerArgs({ engine: "vllm", schedulingPolicy: "fcfs" }); // { scheduling_policy: "fcfs" }
 * ```
 */
export function priorityServerArgs(config: PriorityConfig): Record<string, unknown> {
  if (config.engine === "vllm") return { scheduling_policy: config.schedulingPolicy };
  return { schedule_policy: "fcfs", ...config.args };
}

/**
 * SGLang's answer to a priority under `--abort-on-priority-when-disabled`: the scheduler aborts
 * the request with `status_code` 503 (`_set_or_validate_priority`), which the tokenizer manager
 * raises as an HTTP 503 (non-streaming) or sends as the stream's finish reason. `sendError` maps it.
 */
export class PriorityDisabledError extends Error {
  override readonly name = "PriorityDisabledError";
  /** SGLang's `finished_reason.status_code`. */
  readonly status = 503;
  constructor() {
    super("Using priority is disabled for this server. Please send a new request without a priority.");
  }
}

/**
 * A request's `priority` the server refuses (HTTP 400; `sendError` maps it): not an integer, or
 * (vLLM) a priority under the `fcfs` policy. Its own class so this module needs nothing of the
 * HTTP layer, which imports it.
 */
export class PriorityRequestError extends Error {
  override readonly name = "PriorityRequestError";
  readonly status = 400;
}

/**
 * Reads a request's `priority` as pydantic reads `Optional[int]` in lax mode: absent or null is
 * none; an integer, an integral float, an integer string or a boolean is taken; anything else is
 * a 400 naming the field with pydantic's words.
 *
 * @example
 * ```ts
 * readPriority(3); // 3
 * readPriority("-2"); // -2
 * readPriority(1.5); // throws PriorityRequestError (400) "priority: Input should be a valid integer, got a number with a fractional part"
 * ```
 */
export function readPriority(value: unknown): number | null {
  if (value === undefined || value === null) return null;
  if (typeof value === "boolean") return value ? 1 : 0;
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw badPriority("Input should be a finite number");
    if (!Number.isInteger(value))
      throw badPriority("Input should be a valid integer, got a number with a fractional part");
    return value;
  }
  if (typeof value === "string") {
    const s = value.trim();
    if (/^[+-]?\d+$/.test(s)) return Number(s);
    throw badPriority("Input should be a valid integer, unable to parse string as an integer");
  }
  throw badPriority("Input should be a valid integer");
}

function badPriority(message: string): PriorityRequestError {
  return new PriorityRequestError(`priority: ${message}`);
}

/**
 * The priority a request is scheduled with, or undefined for the scheduler's default
 * ({@link schedulerPriority}'s `defaultPriority`); throws
 * what the server answers instead: {@link PriorityDisabledError} (SGLang with
 * `--abort-on-priority-when-disabled`) or vLLM's 400 under its `fcfs` policy.
 *
 * @example
 * ```ts
 * requestPriority({ engine: "vllm", schedulingPolicy: "fcfs" }, 3); // throws "Got priority 3 but Priority scheduling is not enabled."
 * requestPriority(config, null); // undefined: the scheduler gives default_priority_value, or the worst
 * ```
 */
export function requestPriority(config: PriorityConfig, requested: number | null): number | undefined {
  if (config.engine === "vllm") {
    const p = requested ?? 0;
    if (config.schedulingPolicy !== "priority") {
      if (p !== 0)
        throw new PriorityRequestError(`Got priority ${p} but Priority scheduling is not enabled.`);
      return undefined;
    }
    return p;
  }
  const a = config.args;
  if (!a.enable_priority_scheduling) {
    if (requested !== null && a.abort_on_priority_when_disabled) throw new PriorityDisabledError();
    return undefined;
  }
  // None: the scheduler's default (`--default-priority-value`, else the worst), health probes too.
  return requested ?? undefined;
}
