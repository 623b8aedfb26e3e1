/**
 * The reference engine (clients/reference-engine: a tiny torch + transformers model behind
 * SGLang's `/generate` subset) under its own pytest suite, and the proxy in token mode against it:
 * the proxy renders the Qwen3 chat template, calls `/generate` with the ids, and the recorded
 * tokens and logprobs are exactly what a trainer's plain forward pass over the same checkpoint
 * gives. Needs the torch venv (`bash scripts/install-torch.sh`); without it the suite is skipped
 * with a summary line.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, expect, it } from "vitest";
import {
  initTinyModel,
  type ReferenceEngine,
  referenceEngineEnv,
  startReferenceEngine,
  torchPython,
} from "../../cli/reference-engine";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import { forwardPassLogprobs } from "../support/forward-pass";
import { describeWith, probe } from "../support/optional-tools";

const ready = probe("torch") === null;
const python = torchPython();
let root = "";
let engine: ReferenceEngine | undefined;
let proxy: ReturnType<typeof execa> | undefined;
let proxyUrl = "";
const ADMIN = "ref-admin-token";

beforeAll(async () => {
  if (!ready) return;
  root = mkdtempSync(join(tmpdir(), "polar-ref-e2e-"));
  await initTinyModel(python, join(root, "m"), { hidden: 16, contextLength: 256, seed: 3 });
  engine = await startReferenceEngine({
    python,
    modelPath: join(root, "m"),
    weightVersion: "5",
    contextLength: 256,
  });
  proxy = execa(
    process.execPath,
    [
      join(REPO_ROOT, "bin", "polar.mjs"),
      "proxy",
      "--engine",
      "sglang",
      "--engine-url",
      engine.url,
      "--model",
      "polar-reference-tiny",
      "--context-length",
      "256",
      "--port",
      "0",
      "--host",
      "127.0.0.1",
    ],
    { env: { POLAR_ADMIN_TOKEN: ADMIN }, reject: false },
  );
  proxyUrl = await new Promise<string>((resolve, reject) => {
    let out = "";
    proxy!.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      const m = /listening at (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]!);
    });
    void proxy!.then(() => reject(new Error(`proxy exited: ${out}`)));
  });
}, 180_000);

afterAll(async () => {
  proxy?.kill("SIGTERM");
  await proxy?.catch(() => {});
  await engine?.process.stop();
  if (root) rmSync(root, { recursive: true, force: true });
});

async function session(): Promise<string> {
  const res = await fetch(`${proxyUrl}/sessions`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN}` },
  });
  return ((await res.json()) as { key: string }).key;
}

async function chat(key: string, content: string, maxTokens: number): Promise<Response> {
  return fetch(`${proxyUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content }], temperature: 1, max_tokens: maxTokens }),
  });
}

interface Rec {
  engine: string;
  prompt_ids: number[];
  response_ids: number[];
  response_logprobs: number[];
  weight_version: string | null;
  finish_reason: string;
}

async function records(key: string): Promise<Rec[]> {
  const res = await fetch(`${proxyUrl}/sessions/${key}/completions`, {
    headers: { authorization: `Bearer ${ADMIN}` },
  });
  return ((await res.json()) as { completions: Rec[] }).completions;
}

describeWith(["torch"], "the reference engine (torch + transformers on the CPU)", () => {
  it("passes its own pytest suite (shapes, sampling transforms, batching, abort, pause, weight updates, 400s)", {
    timeout: 600_000,
  }, async () => {
    const run = await execa(python, ["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], {
      cwd: join(REPO_ROOT, "clients", "reference-engine"),
      env: referenceEngineEnv(),
      reject: false,
      all: true,
      timeout: 590_000,
    });
    expect(run.exitCode, run.all).toBe(0);
    expect(run.all?.trim().split("\n").at(-1)).toMatch(/^\d+ passed in /);
  });

  it("serves the proxy in token mode: Qwen3-template prompt ids in, sampled ids and logprobs a trainer recomputes", {
    timeout: 120_000,
  }, async () => {
    const key = await session();
    const res = await chat(key, "Say something.", 12);
    expect(res.status).toBe(200);
    const [rec] = await records(key);
    expect(rec!.engine).toBe("sglang");
    // The proxy rendered the Qwen3 chat template: <|im_start|>user\n … <|im_start|>assistant\n.
    expect(rec!.prompt_ids.slice(0, 3)).toEqual([151644, 872, 198]);
    expect(rec!.prompt_ids.slice(-3)).toEqual([151644, 77091, 198]);
    expect(rec!.weight_version).toBe("5");
    expect(rec!.response_ids.length).toBeGreaterThan(0);
    expect(rec!.response_logprobs).toHaveLength(rec!.response_ids.length);
    const again = await forwardPassLogprobs(
      join(root, "m"),
      [...rec!.prompt_ids, ...rec!.response_ids],
      rec!.prompt_ids.length,
    );
    const worst = Math.max(...again.map((lp, i) => Math.abs(lp - rec!.response_logprobs[i]!)));
    expect(worst).toBeLessThan(1e-4);
  });

  it("decodes concurrent calls from different sessions together", { timeout: 120_000 }, async () => {
    const keys = await Promise.all([1, 2, 3, 4, 5].map(() => session()));
    const answers = await Promise.all(keys.map((k, i) => chat(k, `Count to ${i + 3}.`, 48)));
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    const info = (await (await fetch(`${engine!.url}/server_info`)).json()) as {
      internal_states: Array<{ max_batch_seen: number; requests_total: number }>;
    };
    expect(info.internal_states[0]!.max_batch_seen).toBeGreaterThanOrEqual(2);
  });
});
