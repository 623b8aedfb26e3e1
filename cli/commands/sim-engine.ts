/**
 * `polar sim-engine`: the simulated SGLang engine (a test double for the GPU, clearly labelled).
 *
 * @module
 */
import type { OutputIdsMode } from "../../sim/generate-api";
import type { SimFlavor } from "../../sim/openai-chat";
import { VLLM_SCHEDULING_POLICIES, type VllmSchedulingPolicy } from "../../sim/priority";
import {
  type RoutedExpertsShape,
  routedExpertsShapeViolation,
  SIM_ROUTED_EXPERTS_DEFAULT,
} from "../../sim/routed-experts";
import { SIM_ENGINE_HELP, startSimEngine } from "../../sim/server";
import { type ModelFamily, modelFamily, UnknownModelFamilyError } from "../../tokenizer/families";
import { UsageError } from "../usage-error";

export interface SimEngineOptions {
  port: number;
  host: string;
  /** Served model name; default the family's (`Qwen/Qwen3-0.6B` for qwen3). */
  model?: string;
  /** The model family served (`qwen3`, `deepseek_v3`); default qwen3. */
  modelFamily?: string;
  seed: number;
  prefillTps: number;
  decodeTps: number;
  maxRunningRequests: number;
  flavor: string;
  incrementalStreaming: boolean;
  /** SGLang `--context-length`; default the sim's 40 960. */
  contextLength?: number;
  /** How `/generate` fills `output_ids`; default `plain`. */
  outputIds?: string;
  errorRate: number;
  stallRate: number;
  stallMs: number;
  abortRate: number;
  /** SGLang `--enable-priority-scheduling`: order the waiting queue by request priority. */
  enablePriorityScheduling?: boolean;
  /** SGLang `--schedule-low-priority-values-first`: lower values first (default higher first). */
  scheduleLowPriorityValuesFirst?: boolean;
  /** SGLang `--priority-scheduling-preemption-threshold`; default 10. */
  prioritySchedulingPreemptionThreshold?: number;
  /** SGLang `--disable-priority-preemption`. */
  disablePriorityPreemption?: boolean;
  /** SGLang `--default-priority-value`: the priority of requests that send none. */
  defaultPriorityValue?: number;
  /** SGLang `--abort-on-priority-when-disabled`: refuse a priority while not scheduling by it. */
  abortOnPriorityWhenDisabled?: boolean;
  /** vLLM `--scheduling-policy` (the vllm flavor): `fcfs` (default) or `priority`. */
  schedulingPolicy?: string;
  /** SGLang `--enable-return-routed-experts`: play an MoE model and return its simulated routes. */
  enableReturnRoutedExperts?: boolean;
  /** The simulated MoE's `num_hidden_layers`; default 4. */
  moeLayers?: number;
  /** The simulated MoE's `num_experts_per_tok`; default 2. */
  moeTopK?: number;
  /** The simulated MoE's `num_experts`; default 8. */
  moeExperts?: number;
}

/** SGLang's priority flags, by option name (`--flavor vllm` refuses them). */
const SGLANG_PRIORITY_FLAGS: Array<[keyof SimEngineOptions, string]> = [
  ["enablePriorityScheduling", "--enable-priority-scheduling"],
  ["scheduleLowPriorityValuesFirst", "--schedule-low-priority-values-first"],
  ["prioritySchedulingPreemptionThreshold", "--priority-scheduling-preemption-threshold"],
  ["disablePriorityPreemption", "--disable-priority-preemption"],
  ["defaultPriorityValue", "--default-priority-value"],
  ["abortOnPriorityWhenDisabled", "--abort-on-priority-when-disabled"],
];

const FLAVORS: readonly SimFlavor[] = ["sglang", "sglang-0.5.10-patched", "vllm"];
const OUTPUT_IDS: readonly OutputIdsMode[] = ["plain", "sglang-0.5.4-decode-ids"];

/** Checks the numeric flags and names the first bad one. */
export function validateSimEngineOptions(opts: SimEngineOptions): void {
  const nonNegative: Array<[string, number]> = [
    ["--prefill-tps", opts.prefillTps],
    ["--decode-tps", opts.decodeTps],
    ["--max-running-requests", opts.maxRunningRequests],
    ["--stall-ms", opts.stallMs],
  ];
  for (const [flag, value] of nonNegative) {
    if (!Number.isFinite(value) || value < 0)
      throw new UsageError(`${flag}: must be a number >= 0, got ${value}`);
  }
  if (!Number.isInteger(opts.maxRunningRequests)) {
    throw new UsageError(`--max-running-requests: must be an integer, got ${opts.maxRunningRequests}`);
  }
  const probabilities: Array<[string, number]> = [
    ["--error-rate", opts.errorRate],
    ["--stall-rate", opts.stallRate],
    ["--abort-rate", opts.abortRate],
  ];
  for (const [flag, value] of probabilities) {
    if (!Number.isFinite(value) || value < 0 || value > 1) {
      throw new UsageError(`${flag}: must be a probability between 0 and 1, got ${value}`);
    }
  }
  if (!(FLAVORS as readonly string[]).includes(opts.flavor)) {
    throw new UsageError(`--flavor: '${opts.flavor}' is not one of ${FLAVORS.join(", ")}`);
  }
  if (opts.contextLength !== undefined && (!Number.isInteger(opts.contextLength) || opts.contextLength < 2)) {
    throw new UsageError(`--context-length: must be an integer >= 2, got ${opts.contextLength}`);
  }
  if (opts.outputIds !== undefined && !(OUTPUT_IDS as readonly string[]).includes(opts.outputIds)) {
    throw new UsageError(`--output-ids: '${opts.outputIds}' is not one of ${OUTPUT_IDS.join(", ")}`);
  }
  validatePriorityFlags(opts);
  routedExpertsShapeOf(opts);
}

/** The `--moe-*` flag of each shape field, for messages that name the flag. */
const MOE_FLAGS = { layers: "--moe-layers", topK: "--moe-top-k", experts: "--moe-experts" } as const;

/** The option holding each shape field. */
const FIELD_OPTION = { layers: "moeLayers", topK: "moeTopK", experts: "moeExperts" } as const;

/**
 * The MoE shape the flags ask for (defaults for the flags not given), or undefined without
 * `--enable-return-routed-experts`; throws a {@link UsageError} naming the bad flag.
 */
function routedExpertsShapeOf(opts: SimEngineOptions): RoutedExpertsShape | undefined {
  const given = (Object.keys(MOE_FLAGS) as Array<keyof typeof MOE_FLAGS>).filter(
    (field) => opts[FIELD_OPTION[field]] !== undefined,
  );
  if (!opts.enableReturnRoutedExperts) {
    if (given.length > 0)
      throw new UsageError(`${MOE_FLAGS[given[0]!]}: needs --enable-return-routed-experts`);
    return undefined;
  }
  if (opts.flavor === "vllm")
    throw new UsageError(
      "--enable-return-routed-experts: an SGLang flag here; the simulator's vllm flavor returns no routes",
    );
  const shape: RoutedExpertsShape = {
    layers: opts.moeLayers ?? SIM_ROUTED_EXPERTS_DEFAULT.layers,
    topK: opts.moeTopK ?? SIM_ROUTED_EXPERTS_DEFAULT.topK,
    experts: opts.moeExperts ?? SIM_ROUTED_EXPERTS_DEFAULT.experts,
  };
  const bad = routedExpertsShapeViolation(shape);
  if (bad) {
    const flag = MOE_FLAGS[bad.field as keyof typeof MOE_FLAGS];
    throw new UsageError(`${flag}: ${bad.message}`);
  }
  return shape;
}

/** The priority flags: integers where SGLang takes `int`, and each server's flags on its flavor only. */
function validatePriorityFlags(opts: SimEngineOptions): void {
  const threshold = opts.prioritySchedulingPreemptionThreshold;
  if (threshold !== undefined && (!Number.isSafeInteger(threshold) || threshold < 0)) {
    throw new UsageError(
      `--priority-scheduling-preemption-threshold: must be an integer >= 0, got ${threshold}`,
    );
  }
  const fallback = opts.defaultPriorityValue;
  if (fallback !== undefined && !Number.isSafeInteger(fallback)) {
    throw new UsageError(`--default-priority-value: must be an integer, got ${fallback}`);
  }
  const policy = opts.schedulingPolicy;
  if (policy !== undefined && !(VLLM_SCHEDULING_POLICIES as readonly string[]).includes(policy)) {
    throw new UsageError(
      `--scheduling-policy: '${policy}' is not one of ${VLLM_SCHEDULING_POLICIES.join(", ")}`,
    );
  }
  if (opts.flavor === "vllm") {
    const sglang = SGLANG_PRIORITY_FLAGS.find(([key]) => opts[key] !== undefined && opts[key] !== false);
    if (sglang) {
      throw new UsageError(
        `${sglang[1]}: an SGLang flag; with --flavor vllm, schedule by priority with --scheduling-policy priority`,
      );
    }
  } else if (policy !== undefined) {
    throw new UsageError(
      `--scheduling-policy: a vLLM flag (with --flavor vllm); SGLang schedules by priority with --enable-priority-scheduling`,
    );
  }
}

/** The priority options of `startSimEngine` among the flags (only those given). */
function priorityOptions(opts: SimEngineOptions) {
  return {
    ...(opts.enablePriorityScheduling ? { enablePriorityScheduling: true } : {}),
    ...(opts.scheduleLowPriorityValuesFirst ? { scheduleLowPriorityValuesFirst: true } : {}),
    ...(opts.prioritySchedulingPreemptionThreshold !== undefined
      ? { prioritySchedulingPreemptionThreshold: opts.prioritySchedulingPreemptionThreshold }
      : {}),
    ...(opts.disablePriorityPreemption ? { disablePriorityPreemption: true } : {}),
    ...(opts.defaultPriorityValue !== undefined ? { defaultPriorityValue: opts.defaultPriorityValue } : {}),
    ...(opts.abortOnPriorityWhenDisabled ? { abortOnPriorityWhenDisabled: true } : {}),
    ...(opts.schedulingPolicy !== undefined
      ? { schedulingPolicy: opts.schedulingPolicy as VllmSchedulingPolicy }
      : {}),
  };
}

/** Runs until SIGINT/SIGTERM. */
export async function runSimEngine(opts: SimEngineOptions): Promise<void> {
  validateSimEngineOptions(opts);
  let family: ModelFamily;
  try {
    family = modelFamily(opts.modelFamily ?? "qwen3");
  } catch (err) {
    if (err instanceof UnknownModelFamilyError) throw new UsageError(`--model-family: ${err.message}`);
    throw err;
  }
  const model = opts.model ?? family.model;
  const routedExperts = routedExpertsShapeOf(opts);
  const engine = await startSimEngine({
    port: opts.port,
    host: opts.host,
    model,
    modelFamily: family.name,
    seed: opts.seed,
    prefillTokensPerSecond: opts.prefillTps,
    decodeTokensPerSecond: opts.decodeTps,
    maxRunningRequests: opts.maxRunningRequests,
    flavor: opts.flavor as SimFlavor,
    incrementalStreaming: opts.incrementalStreaming,
    ...(opts.contextLength !== undefined ? { contextLength: opts.contextLength } : {}),
    ...(opts.outputIds !== undefined ? { outputIds: opts.outputIds as OutputIdsMode } : {}),
    ...priorityOptions(opts),
    ...(routedExperts ? { routedExperts } : {}),
    faults: {
      errorRate: opts.errorRate,
      stallRate: opts.stallRate,
      stallMs: opts.stallMs,
      abortRate: opts.abortRate,
    },
  });
  console.log(SIM_ENGINE_HELP);
  console.log(`polar sim-engine (SIMULATOR, not a model) serving "${model}" at ${engine.url}`);
  const stop = async () => {
    await engine.close();
    process.exit(0);
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
}
