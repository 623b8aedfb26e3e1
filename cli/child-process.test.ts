/**
 * The reaper with real processes: whatever ends the launcher (SIGKILL included, which no handler
 * sees) ends the child and its whole process group; a child that ignores SIGTERM is SIGKILLed
 * after the grace; the child's exit status reaches the launcher; grandchildren left behind by a
 * child that exits are killed.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { isGone, waitForTree, waitGone } from "../test/support/process-tree";
import { STOP_GRACE_MS, startSupervised } from "./child-process";
import { REPO_ROOT } from "./wrangler-dev";

/** Starts the launcher, waits until its tree (reaper, child, grandchild) is up; returns both. */
async function launch(mode = ""): Promise<{ pid: number; tree: number[] }> {
  const launcher = spawn(
    process.execPath,
    ["--import", "tsx", join(REPO_ROOT, "test/support/supervise-launcher.ts"), mode],
    { cwd: REPO_ROOT, stdio: ["ignore", "pipe", "inherit"] },
  );
  await new Promise<void>((resolve, reject) => {
    launcher.stdout.on("data", (d: Buffer) => d.toString().includes("started") && resolve());
    launcher.once("exit", (code) => reject(new Error(`launcher exited with ${code}`)));
  });
  const tree = await waitForTree(launcher.pid!, 3);
  return { pid: launcher.pid!, tree };
}

describe("children under the reaper", { timeout: 30_000 }, () => {
  it("die with a launcher that is SIGKILLed: child and grandchild, within a few seconds", async () => {
    const { pid, tree } = await launch();
    process.kill(pid, "SIGKILL");
    expect(await waitGone(tree, 3_000)).toEqual([]);
  });

  it("a child that ignores SIGTERM is SIGKILLed after the grace", async () => {
    const { pid, tree } = await launch("stubborn");
    const killed = Date.now();
    process.kill(pid, "SIGKILL");
    expect(await waitGone(tree, STOP_GRACE_MS + 3_000)).toEqual([]);
    expect(Date.now() - killed).toBeGreaterThanOrEqual(STOP_GRACE_MS - 500);
  });

  it("pass the child's exit code and signal through; kill() is a SIGKILL", async () => {
    const three = startSupervised("three", process.execPath, ["-e", "process.exit(3)"]);
    expect(await three.exited).toEqual({ code: 3, signal: null });
    expect(three.alive()).toBe(false);
    // Signalled at once, before the reaper's Node has even started: the signal waits for it.
    const idle = startSupervised("idle", process.execPath, ["-e", "setInterval(() => {}, 1000)"]);
    await idle.kill();
    expect(await idle.exited).toEqual({ code: null, signal: "SIGKILL" });
    const polite = startSupervised("polite", process.execPath, ["-e", "setInterval(() => {}, 1000)"]);
    await polite.stop();
    expect(await polite.exited).toEqual({ code: null, signal: "SIGTERM" });
  });

  it("kill what a child left in its group when it exits", async () => {
    const leaver = startSupervised("leaver", process.execPath, [
      "-e",
      `const c = require("node:child_process").spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
       console.log(c.pid); setTimeout(() => process.exit(0), 300);`,
    ]);
    await leaver.exited;
    const orphan = Number(leaver.output().trim());
    expect(orphan).toBeGreaterThan(0);
    await expect.poll(() => isGone(orphan), { timeout: 3_000 }).toBe(true);
  });
});
