/**
 * `polar stack` as a trainer runs it: one child process that starts the control plane, the
 * simulated engine and a token-mode gateway and prints `export` lines. The printed trainer token is
 * the documented dev token and the control plane takes it (and refuses another); a batch of
 * examples/hello/task.yaml submitted with it completes (its `upload_file` source resolves, so the
 * gateway runs in the repository root); SIGINT stops everything and frees every port it printed.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { ControlPlaneClient } from "../../cli/client";
import { DEV_TOKENS } from "../../cli/dev-tokens";
import { loadTaskFile } from "../../cli/task-file";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import { descendants, portFree, waitGone } from "../support/process-tree";

let child: ChildProcess | undefined;
afterAll(() => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
});

it("polar stack: prints export lines whose token works, runs a batch to COMPLETED, SIGINT frees every port", {
  timeout: 180_000,
}, async () => {
  const t0 = Date.now();
  // As a trainer's shell: no POLAR_* variable (so the documented dev tokens), no test-runner ones.
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !/^(POLAR_|VITEST|NODE_ENV$|TEST$|NODE_OPTIONS$)/.test(k)),
  );
  child = spawn(
    process.execPath,
    [join(REPO_ROOT, "bin/polar.mjs"), "stack", "--port", "0", "--max-run", "4"],
    {
      cwd: REPO_ROOT,
      env: { ...env, NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((r) => child!.once("exit", (code) => r(code)));
  await expect
    .poll(() => (child!.exitCode === null ? out : `exited: ${out}`), { timeout: 150_000, interval: 200 })
    .toMatch(/Ctrl-C stops it/);
  const startSeconds = (Date.now() - t0) / 1000;

  const exports = Object.fromEntries(
    [...out.matchAll(/^export (POLAR_[A-Z_]+)=(\S+)$/gm)].map((m) => [m[1]!, m[2]!]),
  );
  expect(Object.keys(exports).sort()).toEqual([
    "POLAR_ADMIN_TOKEN",
    "POLAR_TRAINER_TOKEN",
    "POLAR_URL",
    "POLAR_VIEWER_TOKEN",
  ]);
  expect(exports.POLAR_TRAINER_TOKEN).toBe(DEV_TOKENS.trainer);
  const url = exports.POLAR_URL!;
  const enginePort = Number(/# engine \(sim\): http:\/\/127\.0\.0\.1:(\d+)/.exec(out)?.[1]);
  const gatewayPort = Number(
    /# gateway node-0 \(token mode\): http:\/\/127\.0\.0\.1:(\d+)\/metrics/.exec(out)?.[1],
  );
  const cpPort = Number(new URL(url).port);
  expect(out).toContain(`upload_file sources resolve against ${REPO_ROOT}`);

  // The printed token is one the control plane takes on a trainer route; another token is refused.
  const authed = (token: string) =>
    fetch(`${url}/v1/batches`, { headers: { authorization: `Bearer ${token}` } }).then((r) => r.status);
  expect(await authed(exports.POLAR_TRAINER_TOKEN!)).toBe(200);
  expect(await authed("not-the-token")).toBe(401);
  // The gateway's health endpoint answers where the stack said.
  expect((await fetch(`http://127.0.0.1:${gatewayPort}/health`)).ok).toBe(true);

  const client = new ControlPlaneClient(url, exports.POLAR_TRAINER_TOKEN!);
  const created = await client.submit(loadTaskFile(join(REPO_ROOT, "examples/hello/task.yaml")));
  const statuses: string[] = [];
  for await (const { result } of client.streamResults(created.batch_id, { timeoutMs: 90_000 }))
    statuses.push(result.status);
  expect(statuses).toEqual(Array(created.sessions).fill("COMPLETED"));
  expect(created.sessions).toBe(4);

  const tree = descendants(child.pid!).map((p) => p.pid);
  child.kill("SIGINT");
  expect(await exited).toBe(0);
  expect((await waitGone(tree, 15_000)).map((p) => p.cmdline)).toEqual([]);
  for (const port of [cpPort, enginePort, gatewayPort]) expect(await portFree(port)).toBe(true);
  console.log(
    `polar stack: up in ${startSeconds.toFixed(1)} s, whole test ${((Date.now() - t0) / 1000).toFixed(1)} s`,
  );
});
