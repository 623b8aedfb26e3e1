/**
 * `npm run demo -- --hold`: prints the dashboard URL (signed in through `#token=`) as soon as the
 * control plane is up, runs the calculator batch, then keeps the stack (and so the dashboard) up
 * until it is interrupted, and exits with the batch's verdict.
 */
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
