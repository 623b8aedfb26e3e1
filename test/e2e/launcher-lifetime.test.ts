/**
 * Nothing a launcher started outlives it. `polar dev` killed with SIGKILL (no handler runs) leaves
 * no wrangler or workerd behind: the port is free and the state folder unused within seconds, and
 * a second `polar dev` on the same port and folder starts cleanly; a closed terminal (SIGHUP) stops
 * it too. The demo's and tests' launcher (`cli/local-stack.ts`: control plane, sim engine, gateway)
 * SIGKILLed leaves nothing either. Real processes throughout, seen through /proc.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { freePort, waitForHttp } from "../../cli/ports";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import { descendants, portFree, waitForTree, waitGone } from "../support/process-tree";

const state = mkdtempSync(join(tmpdir(), "polar-lifetime-"));
const started: ChildProcess[] = [];

afterAll(() => {
  for (const child of started)
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  rmSync(state, { recursive: true, force: true });
});

function start(args: string[]): { child: ChildProcess; output: () => string } {
  const child = spawn(process.execPath, args, {
    cwd: REPO_ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, NO_COLOR: "1" },
  });
  started.push(child);
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  return { child, output: () => out };
}

/** `polar dev` on `port`, ready (its /health answers). */
async function polarDev(port: number): Promise<{ child: ChildProcess; output: () => string }> {
  const dev = start([join(REPO_ROOT, "bin/polar.mjs"), "dev", "--port", String(port), "--persist-to", state]);
  await waitForHttp(`http://127.0.0.1:${port}/health`, 90_000, () => dev.child.exitCode === null);
  await expect.poll(dev.output, { timeout: 10_000 }).toContain(`at http://127.0.0.1:${port}`);
  return dev;
}

describe("launchers take what they started down with them", { timeout: 240_000 }, () => {
  it("polar dev SIGKILLed: no wrangler/workerd left, port free; a second polar dev on that port starts; SIGHUP stops it", async () => {
    const port = await freePort();
    const first = await polarDev(port);
    const tree = descendants(first.child.pid!);
    // The reaper, wrangler and workerd at least.
    expect(tree.some((p) => p.cmdline.includes("wrangler"))).toBe(true);
    expect(tree.some((p) => p.cmdline.includes("workerd"))).toBe(true);
    first.child.kill("SIGKILL");
    const left = await waitGone(
      tree.map((p) => p.pid),
      10_000,
    );
    expect(left.map((p) => p.cmdline)).toEqual([]);
    expect(await portFree(port)).toBe(true);

    const second = await polarDev(port);
    expect(second.output()).not.toMatch(/address already in use|EADDRINUSE/i);
    const secondTree = await waitForTree(second.child.pid!, 3);
    second.child.kill("SIGHUP"); // what a closed terminal sends
    expect((await waitGone(secondTree, 15_000)).map((p) => p.cmdline)).toEqual([]);
    await expect.poll(() => second.child.exitCode, { timeout: 5_000 }).toBe(0);
    expect(await portFree(port)).toBe(true);
  });

  it("the local stack's launcher SIGKILLed: control plane, sim engine and gateway all go", async () => {
    const launcher = start(["--import", "tsx", join(REPO_ROOT, "test/support/stack-launcher.ts")]);
    await expect.poll(launcher.output, { timeout: 120_000, interval: 200 }).toMatch(/"controlPlanePort"/);
    const ports = JSON.parse(
      launcher
        .output()
        .split("\n")
        .find((l) => l.includes("controlPlanePort"))!,
    ) as {
      controlPlanePort: number;
      enginePort: number;
    };
    const tree = descendants(launcher.child.pid!);
    const cmdlines = tree.map((p) => p.cmdline);
    for (const part of ["wrangler", "workerd", "sim-engine", "serve_gateway"])
      expect(
        cmdlines.some((c) => c.includes(part)),
        part,
      ).toBe(true);
    launcher.child.kill("SIGKILL");
    const left = await waitGone(
      tree.map((p) => p.pid),
      10_000,
    );
    expect(left.map((p) => p.cmdline)).toEqual([]);
    expect(await portFree(ports.controlPlanePort)).toBe(true);
    expect(await portFree(ports.enginePort)).toBe(true);
  });
});
