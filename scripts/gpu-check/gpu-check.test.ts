/**
 * `scripts/gpu-check.sh` run as a GPU host runs it (the shell script, a child process, `--json`):
 * against the simulated engine and the reference engine it must pass, so the script is proven
 * before the first GPU host runs it; against an engine that breaks the contract it must fail and
 * name the check.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  initTinyModel,
  type ReferenceEngine,
  startReferenceEngine,
  torchPython,
} from "../../cli/reference-engine";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import { type SimEngineHandle, startSimEngine } from "../../sim/server";
import { describeWith } from "../../test/support/optional-tools";
import type { CheckRow } from "./report";

const SCRIPT = join(REPO_ROOT, "scripts/gpu-check.sh");

interface JsonReport {
  passed: boolean;
  rows: CheckRow[];
  figures: Array<{ name: string; value: number }>;
}

async function gpuCheck(args: string[]): Promise<{ code: number; report: JsonReport | null; all: string }> {
  const r = await execa("bash", [SCRIPT, ...args], { reject: false, all: true, timeout: 240_000 });
  const out = r.stdout.trim();
  let report: JsonReport | null = null;
  try {
    report = JSON.parse(out) as JsonReport;
  } catch {
    report = null;
  }
  return { code: r.exitCode ?? -1, report, all: r.all ?? "" };
}

const status = (report: JsonReport, check: string) => report.rows.find((r) => r.check === check)?.status;
const fast = ["--json", "--latency-calls", "3", "--bridge-tokens", "2000"];

describe("scripts/gpu-check.sh", () => {
  it("documents itself under --help and refuses to run without an engine URL", async () => {
    const help = await execa("bash", [SCRIPT, "--help"], { reject: false });
    expect(help.exitCode).toBe(0);
    for (const flag of ["--sglang", "--vllm", "--tokenizer-path", "--context-length", "--images", "--json"])
      expect(help.stdout).toContain(flag);
    expect(help.stdout).toMatch(/starts no engine/);
    const none = await execa("bash", [SCRIPT], { reject: false });
    expect(none.exitCode).toBe(2);
    expect(none.stderr).toMatch(/--sglang URL/);
  });
});

describe("scripts/gpu-check.sh against the simulated engine", () => {
  let sim: SimEngineHandle;
  let broken: Server;
  let brokenUrl = "";
  beforeAll(async () => {
    // Decoding at 100 tokens/s makes the abort check's generation (the scripted policy's story is
    // about 50 tokens) last long enough for the abort to land; the default simulator answers at once.
    sim = await startSimEngine({ decodeTokensPerSecond: 100, weightVersion: "7" });
    // An engine that breaks the contract: its `/generate` drops the last logprob entry.
    broken = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", async () => {
        const r = await fetch(`${sim.url}${req.url}`, {
          method: req.method ?? "GET",
          headers: { "content-type": "application/json" },
          ...(req.method === "GET" ? {} : { body: Buffer.concat(chunks) }),
        });
        let text = await r.text();
        if (req.url === "/generate" && r.status === 200) {
          const body = JSON.parse(text) as { meta_info: { output_token_logprobs?: unknown[] } };
          body.meta_info.output_token_logprobs?.pop();
          text = JSON.stringify(body);
        }
        res
          .writeHead(r.status, { "content-type": r.headers.get("content-type") ?? "application/json" })
          .end(text);
      });
    });
    await new Promise<void>((resolve) => broken.listen(0, "127.0.0.1", resolve));
    brokenUrl = `http://127.0.0.1:${(broken.address() as AddressInfo).port}`;
  }, 30_000);
  afterAll(async () => {
    await sim?.close();
    broken?.closeAllConnections();
    await new Promise<void>((resolve) => (broken ? broken.close(() => resolve()) : resolve()));
  });

  it("passes every check, the image turn included, and reports its figures", {
    timeout: 240_000,
  }, async () => {
    const { code, report, all } = await gpuCheck(["--sglang", sim.url, "--images", ...fast]);
    expect(report, all).not.toBeNull();
    const failed = report!.rows.filter((r) => r.status === "FAIL");
    expect(failed, JSON.stringify(failed)).toEqual([]);
    expect(code).toBe(0);
    for (const check of [
      "health",
      "generate: ids and logprobs",
      "return_prompt_token_ids",
      "sampling validation",
      "context limit",
      "abort by rid",
      "pause and continue",
      "weight version",
      "token mode: tool turn",
      "token mode: image turn",
      "proxy latency",
      "per-turn cost",
    ])
      expect(status(report!, check), check).toBe("PASS");
    expect(report!.figures.map((f) => f.name)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/proxy added latency/),
        expect.stringMatching(/per-turn/),
      ]),
    );
  });

  it("fails, naming the check, against an engine whose logprobs do not cover its output", {
    timeout: 240_000,
  }, async () => {
    const { code, report, all } = await gpuCheck(["--sglang", brokenUrl, ...fast]);
    expect(code, all).toBe(1);
    expect(report!.passed).toBe(false);
    expect(status(report!, "generate: ids and logprobs")).toBe("FAIL");
  });

  it("runs the vLLM checks against the simulator's vLLM shape", { timeout: 240_000 }, async () => {
    const vllm = await startSimEngine({ flavor: "vllm" });
    try {
      const { code, report, all } = await gpuCheck(["--vllm", vllm.url, "--json", "--bridge-tokens", "0"]);
      expect(report, all).not.toBeNull();
      expect(report!.rows.filter((r) => r.status === "FAIL")).toEqual([]);
      expect(code).toBe(0);
      expect(status(report!, "chat: return_token_ids")).toBe("PASS");
    } finally {
      await vllm.close();
    }
  });
});

describeWith(
  ["torch"],
  "scripts/gpu-check.sh against the reference engine (a tiny real model on the CPU)",
  () => {
    let root = "";
    let engine: ReferenceEngine | undefined;
    beforeAll(async () => {
      const python = torchPython();
      root = mkdtempSync(join(tmpdir(), "polar-gpu-check-"));
      await initTinyModel(python, join(root, "m"), { hidden: 16, contextLength: 2048, seed: 3 });
      engine = await startReferenceEngine({
        python,
        modelPath: join(root, "m"),
        weightVersion: "1",
        contextLength: 2048,
      });
    }, 240_000);
    afterAll(async () => {
      await engine?.process.stop();
      if (root) rmSync(root, { recursive: true, force: true });
    });

    it("passes every check that applies to a text model with no tool training", {
      timeout: 240_000,
    }, async () => {
      const { code, report, all } = await gpuCheck(["--sglang", engine!.url, ...fast]);
      expect(report, all).not.toBeNull();
      const failed = report!.rows.filter((r) => r.status === "FAIL");
      expect(failed, JSON.stringify(failed)).toEqual([]);
      expect(code).toBe(0);
      for (const check of [
        "generate: ids and logprobs",
        "sampling validation",
        "context limit",
        "pause and continue",
        "weight version",
      ])
        expect(status(report!, check), check).toBe("PASS");
      expect(status(report!, "token mode: image turn")).toBe("SKIP");
    });
  },
);
