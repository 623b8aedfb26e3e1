/**
 * The reference engine (`clients/reference-engine`, a tiny torch + transformers model behind
 * SGLang's `/generate` subset; for tests and demos, not a replacement for SGLang) as seen from
 * Node: where its Python is, how to install it, how to make a checkpoint and start the server.
 *
 * The Python is a virtual environment under `.polar/torch-venv` (made by
 * `scripts/install-torch.sh`), or the interpreter `POLAR_TORCH_PYTHON` names.
 *
 * @module
 */
import { execFile, spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { type ModelFamilyName, modelFamily } from "../tokenizer/families";
import { startSupervised } from "./child-process";
import { freePort } from "./ports";
import { type PolarProcess, waitForProcessHttp } from "./processes";
import { REPO_ROOT } from "./wrangler-dev";

const execFileAsync = promisify(execFile);

/** The package's source folder (put on `PYTHONPATH`, so nothing needs `pip install`). */
export const REFERENCE_ENGINE_SRC = join(REPO_ROOT, "clients", "reference-engine", "src");
/** The installer of torch + transformers into {@link DEFAULT_TORCH_VENV}. */
export const TORCH_INSTALL_SCRIPT = "scripts/install-torch.sh";
/** Where the installer puts the virtual environment. */
export const DEFAULT_TORCH_VENV = join(REPO_ROOT, ".polar", "torch-venv");
/**
 * The token that ends an assistant turn in a family's format: the `eos_token` of its tokenizer
 * folder's `tokenizer_config.json`, which the proxy's token mode also stops on. What an initial
 * policy must be able to say to stop (`init --favor …,TOKEN`).
 *
 * @example
 * ```ts
 * endOfTurnToken("qwen3"); // "<|im_end|>"
 * endOfTurnToken("deepseek_v3"); // "<｜end▁of▁sentence｜>"
 * ```
 */
export function endOfTurnToken(family: ModelFamilyName = "qwen3"): string {
  const file = join(modelFamily(family).tokenizerDir(), "tokenizer_config.json");
  const eos = (JSON.parse(readFileSync(file, "utf8")) as { eos_token?: unknown }).eos_token;
  const text = typeof eos === "string" ? eos : (eos as { content?: unknown } | null | undefined)?.content;
  if (typeof text !== "string" || text === "")
    throw new Error(`${file}: no eos_token, so the ${family} family has no end-of-turn token`);
  return text;
}

let hostHasTorch: boolean | undefined;

/**
 * The Python interpreter with torch: `POLAR_TORCH_PYTHON`; else the venv's when it exists; else the
 * host's `python3` when it imports torch and transformers (CI installs them there, from
 * `requirements-cpu.txt`); else the venv's path (where {@link ensureTorch} installs).
 *
 * @example
 * ```ts
 * torchPython(); // ".../.polar/torch-venv/bin/python", or "python3"
 * ```
 */
export function torchPython(env: NodeJS.ProcessEnv = process.env): string {
  if (env.POLAR_TORCH_PYTHON) return env.POLAR_TORCH_PYTHON;
  const venv = join(DEFAULT_TORCH_VENV, "bin", "python");
  if (existsSync(venv)) return venv;
  hostHasTorch ??=
    spawnSync("python3", ["-c", "import torch, transformers"], { stdio: "ignore", timeout: 120_000 })
      .status === 0;
  return hostHasTorch ? "python3" : venv;
}

/**
 * Why the reference engine cannot run here (null when torch and transformers import).
 *
 * @example
 * ```ts
 * torchProblem(); // null, or "… has no torch: run bash scripts/install-torch.sh"
 * ```
 */
export function torchProblem(python = torchPython()): string | null {
  if (python.includes("/") && !existsSync(python)) return `${python} does not exist`;
  const r = spawnSync(python, ["-c", "import torch, transformers"], {
    stdio: ["ignore", "ignore", "pipe"],
    timeout: 120_000,
  });
  if (r.error) return `${python} cannot be run: ${r.error.message}`;
  if (r.status === 0) return null;
  const err = r.stderr.toString().trim().split("\n").at(-1) ?? "";
  return `${python} cannot import torch and transformers${err ? `: ${err}` : ""}`;
}

/**
 * Installs torch (a CPU build) and transformers into `.polar/torch-venv` when they are missing,
 * saying what it does; returns the interpreter. Throws when the install fails.
 *
 * @example
 * ```ts
 * const python = ensureTorch((line) => console.log(line));
 * ```
 */
export function ensureTorch(log: (line: string) => void): string {
  const python = torchPython();
  const problem = torchProblem(python);
  if (problem === null) return python;
  if (process.env.POLAR_TORCH_PYTHON) throw new Error(`POLAR_TORCH_PYTHON: ${problem}`);
  log(`torch is missing (${problem}).`);
  log(
    `Installing torch (CPU build) and transformers into .polar/torch-venv with ${TORCH_INSTALL_SCRIPT} (once; 1-3 minutes)…`,
  );
  const r = spawnSync("bash", [join(REPO_ROOT, TORCH_INSTALL_SCRIPT)], { cwd: REPO_ROOT, stdio: "inherit" });
  if (r.status !== 0) throw new Error(`${TORCH_INSTALL_SCRIPT} failed (exit ${r.status ?? r.signal})`);
  const venv = join(DEFAULT_TORCH_VENV, "bin", "python");
  const after = torchProblem(venv);
  if (after !== null) throw new Error(`after ${TORCH_INSTALL_SCRIPT}: ${after}`);
  return venv;
}

/** The environment the package's Python runs with (its source on the path, quiet libraries). */
export function referenceEngineEnv(): Record<string, string> {
  const path = process.env.PYTHONPATH;
  return {
    PYTHONPATH: path ? `${REFERENCE_ENGINE_SRC}:${path}` : REFERENCE_ENGINE_SRC,
    PYTHONDONTWRITEBYTECODE: "1",
    HF_HUB_OFFLINE: "1",
    TRANSFORMERS_NO_ADVISORY_WARNINGS: "1",
    HF_HUB_DISABLE_PROGRESS_BARS: "1",
    TQDM_DISABLE: "1",
  };
}

/** Options of {@link initTinyModel}: `python -m polar_reference_engine init` flags. */
export interface TinyModelOptions {
  /**
   * The model family the checkpoint is made for (default `qwen3`): its tokenizer folder
   * (`modelFamily(name).tokenizerDir()`, the files the proxy uses for it), vocabulary size and
   * stop ids (`init --family`). The architecture is Qwen3's for every family.
   */
  family?: ModelFamilyName;
  /** Words the initial policy favours, one token each in the family's tokenizer. */
  favor?: string[];
  hidden?: number;
  layers?: number;
  heads?: number;
  kvHeads?: number;
  contextLength?: number;
  seed?: number;
  favoredMass?: number;
  /** Experts per layer: a tiny Qwen3-MoE checkpoint (`init --moe-experts`; default dense). */
  moeExperts?: number;
  /** Experts each token is routed to (`init --moe-top-k`, with `moeExperts`). */
  moeTopK?: number;
}

/**
 * Creates a tiny checkpoint (Qwen3 architecture, tied embeddings, the vocabulary and stop ids of
 * `opts.family`, qwen3 by default) in `outDir`; resolves to what its `polar_init.json` records.
 * Asynchronous, so a launcher can start the control plane meanwhile (importing torch and building
 * the model takes seconds).
 *
 * @example
 * ```ts
 * const info = await initTinyModel(python, ".polar/tiny", { favor: ["red", "blue", "<|im_end|>"] });
 * info.parameters; // 4892864
 * const ds = await initTinyModel(python, ".polar/tiny-ds", {
 *   family: "deepseek_v3",
 *   favor: ["red", endOfTurnToken("deepseek_v3")],
 * });
 * ds.family; // "deepseek_v3"; ds.eos_ids: [1]
 * ```
 */
export async function initTinyModel(
  python: string,
  outDir: string,
  opts: TinyModelOptions = {},
): Promise<Record<string, unknown>> {
  const family = modelFamily(opts.family ?? "qwen3");
  const args = [
    "-m",
    "polar_reference_engine",
    "init",
    "--out",
    outDir,
    "--family",
    family.name,
    "--tokenizer-dir",
    family.tokenizerDir(),
  ];
  const flag = (name: string, v: number | undefined) => (v === undefined ? [] : [name, String(v)]);
  args.push(
    ...(opts.favor?.length ? ["--favor", opts.favor.join(",")] : []),
    ...flag("--hidden", opts.hidden),
    ...flag("--layers", opts.layers),
    ...flag("--heads", opts.heads),
    ...flag("--kv-heads", opts.kvHeads),
    ...flag("--context-length", opts.contextLength),
    ...flag("--seed", opts.seed),
    ...flag("--favored-mass", opts.favoredMass),
    ...flag("--moe-experts", opts.moeExperts),
    ...flag("--moe-top-k", opts.moeTopK),
  );
  let stdout: string;
  try {
    ({ stdout } = await execFileAsync(python, args, {
      cwd: REPO_ROOT,
      env: { ...process.env, ...referenceEngineEnv() },
      encoding: "utf8",
      timeout: 300_000,
    }));
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`polar_reference_engine init failed: ${e.stderr || e.message}`);
  }
  const line = stdout.trim().split("\n").at(-1) ?? "{}";
  return JSON.parse(line) as Record<string, unknown>;
}

/** A running reference engine. */
export interface ReferenceEngine {
  url: string;
  process: PolarProcess;
}

/** Options of {@link startReferenceEngine}. */
export interface ReferenceEngineOptions {
  python: string;
  modelPath: string;
  port?: number;
  weightVersion?: string;
  contextLength?: number;
  maxBatch?: number;
  seed?: number;
  servedModelName?: string;
  /** `serve --enable-return-routed-experts` (an MoE checkpoint): answer routes when asked. */
  enableReturnRoutedExperts?: boolean;
}

/**
 * Starts `python -m polar_reference_engine serve` under the reaper and waits for `/health`.
 *
 * @example
 * ```ts
 * const engine = await startReferenceEngine({ python, modelPath: ".polar/tiny", weightVersion: "0" });
 * await engine.process.stop();
 * ```
 */
export async function startReferenceEngine(opts: ReferenceEngineOptions): Promise<ReferenceEngine> {
  const port = opts.port ?? (await freePort());
  const proc = referenceEngineProcess(opts, port);
  const url = `http://127.0.0.1:${port}`;
  await waitForProcessHttp(proc, `${url}/health`, 120_000);
  return { url, process: proc };
}

/**
 * The engine process on `port`, not yet waited for (what `startLocalStack({startEngine})` takes).
 *
 * @example
 * ```ts
 * await startLocalStack({ engine: "sglang", startEngine: (port) => referenceEngineProcess(opts, port) });
 * ```
 */
export function referenceEngineProcess(opts: ReferenceEngineOptions, port: number): PolarProcess {
  const flag = (name: string, v: string | number | undefined) => (v === undefined ? [] : [name, String(v)]);
  return startSupervised(
    "reference-engine",
    opts.python,
    [
      "-m",
      "polar_reference_engine",
      "serve",
      "--model-path",
      opts.modelPath,
      "--port",
      String(port),
      ...flag("--weight-version", opts.weightVersion),
      ...flag("--context-length", opts.contextLength),
      ...flag("--max-batch", opts.maxBatch),
      ...flag("--seed", opts.seed),
      ...flag("--served-model-name", opts.servedModelName),
      ...(opts.enableReturnRoutedExperts ? ["--enable-return-routed-experts"] : []),
    ],
    { cwd: REPO_ROOT, env: referenceEngineEnv() },
  );
}
