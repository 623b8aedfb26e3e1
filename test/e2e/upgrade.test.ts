/**
 * Upgrades across wire versions, with real releases: the gateway package of the last wire-v1
 * commit of this repository's history, packed and installed into an empty prefix, runs
 * `polar serve_gateway` against today's control plane (`wrangler dev`, wire v2) and the simulated
 * engine, and one session of examples/hello/task.yaml completes (N ↔ N+1). Then a gateway speaking
 * a wire version this control plane does not (v99, a hand-written client) is refused at `hello`
 * with both sides' versions named and close 4400.
 *
 * Needs the history down to that commit: a shallow clone skips it, and fails it in strict mode.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import WebSocket from "ws";
import { type SupervisedProcess, startSupervised } from "../../cli/child-process";
import { type LocalStack, startLocalStack } from "../../cli/local-stack";
import { loadTaskFile } from "../../cli/task-file";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import {
  POLAR_VERSION,
  type SessionResult,
  SUPPORTED_WIRE_VERSIONS,
  WIRE_VERSION,
  wireVersionList,
} from "../../protocol";
import { installPacked } from "../support/gateway-package";
import {
  GIT_HISTORY,
  LAST_WIRE_V1_COMMIT,
  type OlderGateway,
  packOlderGateway,
} from "../support/older-gateway";
import { describeWith } from "../support/optional-tools";

describeWith([GIT_HISTORY], "a gateway of the last wire-v1 release against today's control plane", () => {
  let stack: LocalStack;
  let older: OlderGateway;
  let prefix: string;
  let gatewayCwd: string;
  let gateway: SupervisedProcess;
  const timings: Record<string, number> = {};

  beforeAll(async () => {
    prefix = mkdtempSync(join(tmpdir(), "polar-older-prefix-"));
    const t0 = performance.now();
    [stack, older] = await Promise.all([
      startLocalStack({ gateways: 0 }),
      packOlderGateway(LAST_WIRE_V1_COMMIT).then((o) => {
        timings.pack_s = (performance.now() - t0) / 1000;
        return o;
      }),
    ]);
    const { bin, seconds } = await installPacked(older.tgz, prefix);
    timings.install_s = seconds;
    // The task's upload_file source is read relative to the gateway's working directory: a
    // folder of its own, outside the repository, holding only that file.
    gatewayCwd = mkdtempSync(join(tmpdir(), "polar-older-cwd-"));
    mkdirSync(join(gatewayCwd, "examples", "hello"), { recursive: true });
    copyFileSync(join(REPO_ROOT, "examples/hello/ask.mjs"), join(gatewayCwd, "examples/hello/ask.mjs"));
    gateway = startSupervised(
      "older gateway",
      process.execPath,
      [
        bin,
        "serve_gateway",
        "--control-plane",
        stack.controlPlane.url,
        "--node-id",
        "gpu-old",
        "--engine",
        "sglang-openai",
        "--engine-url",
        stack.engineUrl,
        "--model",
        stack.model,
        "--work-root",
        join(gatewayCwd, "work"),
      ],
      { cwd: gatewayCwd, env: { POLAR_GATEWAY_TOKEN: stack.tokens.gateway, NO_COLOR: "1" } },
    );
  }, 240_000);

  afterAll(async () => {
    console.log(`upgrade test: ${JSON.stringify(timings)}`);
    await gateway?.stop();
    await stack?.stop();
    for (const dir of [prefix, gatewayCwd, older?.dir])
      if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("the installed older package is a wire-v1 gateway, from its commit's tree and lock", () => {
    const installed = join(prefix, "lib", "node_modules", "@polar-ts", "gateway");
    const dist = join(installed, "dist");
    const code = readdirSync(dist)
      .filter((f) => f.endsWith(".js"))
      .map((f) => readFileSync(join(dist, f), "utf8"))
      .join("\n");
    // The hello it sends: `v: WIRE_VERSION` of a build whose WIRE_VERSION is 1.
    expect(code).toMatch(/\bWIRE_VERSION = 1;/);
    expect(WIRE_VERSION).toBeGreaterThan(1);
    const pkg = JSON.parse(readFileSync(join(installed, "package.json"), "utf8"));
    expect(pkg.description).toContain(older.commit);
    expect(pkg.dependencies).toEqual(older.dependencies);
    expect(Object.keys(older.dependencies)).toEqual(expect.arrayContaining(["ws", "zod", "commander"]));
  });

  it("runs one session of examples/hello/task.yaml to COMPLETED", async () => {
    const t0 = performance.now();
    // The control plane lists the older gateway as connected once its v1 hello was welcomed; a
    // gateway that exited (refused) fails at once, with its output.
    for (let connected = false; !connected; await new Promise((r) => setTimeout(r, 250))) {
      if (!gateway.alive()) throw new Error(`older gateway exited:\n${gateway.output()}`);
      if (performance.now() - t0 > 60_000)
        throw new Error(`older gateway not connected:\n${gateway.output()}`);
      const res = await fetch(`${stack.controlPlane.url}/v1/gateways`, {
        headers: { authorization: `Bearer ${stack.tokens.trainer}` },
      });
      const body = (await res.json()) as { gateways: Array<{ node_id: string; connected: boolean }> };
      connected = body.gateways.some((g) => g.node_id === "gpu-old" && g.connected);
    }
    timings.connect_s = (performance.now() - t0) / 1000;
    const batch = loadTaskFile(join(REPO_ROOT, "examples/hello/task.yaml"));
    const tasks = (batch.tasks as Array<Record<string, unknown>>).map((t) => ({ ...t, num_samples: 1 }));
    const created = await stack.client.submit({ ...batch, tasks } as typeof batch);
    expect(created.sessions).toBe(1);
    const results: SessionResult[] = [];
    for await (const { result } of stack.client.streamResults(created.batch_id, { timeoutMs: 120_000 }))
      results.push(result);
    timings.session_s = (performance.now() - t0) / 1000 - timings.connect_s;
    expect(results.map((r) => [r.status, r.node_id, r.error])).toEqual([["COMPLETED", "gpu-old", null]]);
    // Both of ask.mjs's model calls went through the older gateway's proxy to the engine.
    expect(results[0]!.trajectory.traces).toHaveLength(2);
    expect(results[0]!.trajectory.traces.every((t) => t.response_ids.length > 0)).toBe(true);
  }, 180_000);

  it("a gateway speaking a wire version the control plane does not is refused, naming both sides", async () => {
    const url = `${stack.controlPlane.url.replace(/^http/, "ws")}/v1/gateways/connect?queue=default&node_id=gpu-future`;
    const ws = new WebSocket(url, { headers: { authorization: `Bearer ${stack.tokens.gateway}` } });
    const frames: unknown[] = [];
    const closed = new Promise<number>((resolve) => ws.once("close", (code) => resolve(code)));
    ws.on("message", (data) => frames.push(JSON.parse(data.toString())));
    await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject));
    ws.send(
      JSON.stringify({
        v: 99,
        type: "hello",
        node_id: "gpu-future",
        agent_version: "99.0.0",
        capacity: { max_init: 1, max_run: 1, max_postrun: 1 },
        capabilities: { runtimes: [], harnesses: [], engines: [] },
        credit: 1,
        leases: [],
      }),
    );
    expect(await closed).toBe(4400);
    expect(frames).toEqual([
      {
        // A socket whose hello was not welcomed is spoken to in the oldest version, which every
        // gateway release parses.
        v: SUPPORTED_WIRE_VERSIONS[0],
        type: "error",
        code: "unsupported_version",
        message: expect.stringContaining(
          `gateway 'gpu-future' speaks wire v99 (polar 99.0.0); this control plane (polar ${POLAR_VERSION}) speaks ${wireVersionList(SUPPORTED_WIRE_VERSIONS)}: upgrade the control plane`,
        ),
      },
    ]);
  });
});
