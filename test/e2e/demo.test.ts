/**
 * `npm run demo -- --hold`: prints the dashboard URL (signed in through `#token=`) as soon as the
 * control plane is up, runs the calculator batch, then keeps the stack (and so the dashboard) up
 * until it is interrupted, and exits with the batch's verdict.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { expect, it } from "vitest";
import { REPO_ROOT } from "../../cli/wrangler-dev";

it("prints the dashboard URL at start and holds the stack after the batch until SIGINT", {
  timeout: 240_000,
}, async () => {
  const demo = execa(process.execPath, ["--import", "tsx", "scripts/demo.ts", "--hold"], {
    cwd: REPO_ROOT,
    // As a user runs it: the test runner's own variables (NODE_ENV=test, VITEST_*) would reach the
    // harness's processes and change how they run.
    env: Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !/^(VITEST|NODE_ENV$|TEST$|NODE_OPTIONS$)/.test(k)),
    ),
    extendEnv: false,
    reject: false,
    all: true,
    timeout: 230_000,
  });
  let out = "";
  const seen = (pattern: RegExp) =>
    new Promise<RegExpMatchArray>((resolve, reject) => {
      const check = () => {
        const m = out.match(pattern);
        if (m) resolve(m);
      };
      demo.all?.on("data", (chunk: Buffer) => {
        out += chunk.toString();
        check();
      });
      demo.then(() => reject(new Error(`the demo exited before ${pattern}:\n${out}`)), reject);
      check();
    });
  const [, url, token] = await seen(/dashboard: (http:\/\/127\.0\.0\.1:\d+\/)#token=(viewer-\S+)/);
  await seen(/Holding the stack/);
  // Printed before the batch was submitted, so it can be opened while the batch runs.
  expect(out.indexOf("dashboard:")).toBeLessThan(out.indexOf("submitted"));
  expect(out).toContain("demo OK");
  // Still up after the batch: the page, and the API with the printed token.
  const page = await fetch(url!);
  expect(await page.text()).toContain('<div id="app"></div>');
  const list = await fetch(`${url}v1/batches`, {
    headers: { authorization: `Bearer ${decodeURIComponent(token!)}` },
  });
  expect(list.status).toBe(200);
  demo.kill("SIGINT");
  const done = await demo;
  expect(done.exitCode, done.all).toBe(0);
  await expect(fetch(url!)).rejects.toThrow();
});

it("npm run demo -- --model-family deepseek_v3: the calculator batch in token mode with DeepSeek V3's tokenizer and template", {
  timeout: 240_000,
}, async () => {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !/^(VITEST|NODE_ENV$|TEST$|NODE_OPTIONS$)/.test(k)),
  );
  const run = (args: string[]) =>
    execa(process.execPath, ["--import", "tsx", "scripts/demo.ts", ...args], {
      cwd: REPO_ROOT,
      env,
      extendEnv: false,
      reject: false,
      all: true,
      timeout: 230_000,
    });
  const bad = await run(["--model-family", "llama"]);
  expect(bad.exitCode).toBe(2);
  expect(bad.all).toContain(
    '--model-family: model_family: unknown family "llama" (known: qwen3, deepseek_v3)',
  );

  const done = await run(["--model-family", "deepseek_v3"]);
  expect(done.exitCode, done.all).toBe(0);
  const out = done.all ?? "";
  expect(out).toContain("(deepseek-ai/DeepSeek-V3, family deepseek_v3)");
  // One trace per session (every turn bridged), four sessions, mixed rewards ("demo OK" checks both).
  const lines = out.split("\n").filter((l) => / result #\d+: .* COMPLETED /.test(l));
  expect(lines).toHaveLength(4);
  for (const line of lines) expect(line).toMatch(/ traces=1 .*extended:\d+/);
  expect(out).toContain("demo OK");
  // The saved trajectories hold DeepSeek's ids: the prompt opens with its BOS (0).
  const [, file] = /Open one decoded: {3}npx polar inspect (\S+) --tokenizer-path (\S+)/.exec(out) ?? [];
  expect(file, out).toBeDefined();
  const saved = JSON.parse(readFileSync(join(REPO_ROOT, file!), "utf8")) as {
    trajectory: { traces: Array<{ prompt_ids: number[] }> };
  };
  expect(saved.trajectory.traces[0]!.prompt_ids[0]).toBe(0);
});
