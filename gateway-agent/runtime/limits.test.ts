/**
 * Resource limits of the local runtime with real processes: the memory limit OOM-kills a harness
 * and the result says so, `cpus: 0.5` throttles a busy loop to about half a core (measured by the
 * cgroup's own accounting, never by wall time), a fork bomb stops at the process cap, and the
 * cgroups are gone after teardown. Runs wherever the gateway can create cgroups (as root on most
 * hosts); elsewhere only the rlimit fallback is checked.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { RuntimeSpec } from "../../protocol";
import { describeWith } from "../../test/support/optional-tools";
import { detectLimits, RLIMIT_NOFILE_CAP, releaseLimits, SessionLimits } from "./limits";
import { LocalRuntime } from "./local";
import { DEFAULT_RUNTIME_SETTINGS, type RuntimeContext } from "./types";

let root: string;
const warnings: string[] = [];
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "polar-limits-test-"));
  warnings.length = 0;
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});
afterAll(releaseLimits);

const ctx = (name: string): RuntimeContext => ({
  workRoot: root,
  name,
  session_id: name,
  node_id: "n",
  proxyUrl: "http://127.0.0.1:9",
  settings: { ...DEFAULT_RUNTIME_SETTINGS, local: { sandbox: "never", bwrapPath: "bwrap" } },
  warn: (m) => warnings.push(m),
});
const ENV = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: tmpdir() };
const support = detectLimits();
const cgroups = support.mechanism !== "rlimit";

describe("limit detection", () => {
  it("reports a mechanism and what it enforces", () => {
    expect(["cgroup2", "cgroup1", "rlimit"]).toContain(support.mechanism);
    expect(support.detail.length).toBeGreaterThan(10);
    if (!cgroups) expect(support.detail).toMatch(/NOT enforced/);
  });

  it("the rlimit wrapper caps the open files of the command it wraps", async () => {
    const lim = await SessionLimits.create(
      "rlimit-only",
      {},
      { mechanism: "rlimit", detail: "x", parents: {} },
    );
    const out = execFileSync(
      lim.wrap(["bash", "-c", "ulimit -n"])[0] as string,
      lim.wrap(["bash", "-c", "ulimit -n"]).slice(1),
      {
        encoding: "utf8",
      },
    );
    expect(Number(out.trim())).toBeLessThanOrEqual(RLIMIT_NOFILE_CAP);
    await lim.destroy();
  });
});

describeWith(["cgroups"], `cgroup limits (${support.mechanism})`, { timeout: 60_000 }, () => {
  it("a harness allocating past memory_mb is OOM-killed and the result names the memory limit", async () => {
    const rt = await LocalRuntime.create(RuntimeSpec.parse({ memory_mb: 64 }), ctx("oom.t.0"));
    await rt.start();
    const dirs = Object.values(rt.resourceLimits?.dirs ?? {});
    expect(dirs.length).toBeGreaterThan(0);
    // 16 MiB chunks filled with non-zero bytes so every page is really touched.
    const r = await rt.exec(
      `node -e 'const a=[];for(let i=0;i<64;i++){a.push(Buffer.alloc(16<<20,1))}console.log("survived")'`,
      { env: ENV, logName: "oom", capture: true, timeoutMs: 30_000 },
    );
    expect(r.timedOut).toBe(false);
    expect(r.stdout).not.toContain("survived");
    expect(r.limitHit).toMatch(/memory limit of 64 MiB/);
    expect(warnings.join("\n")).not.toMatch(/NOT ENFORCED/);
    // A command within the limit in the same session is not blamed for the earlier kill.
    const ok = await rt.exec("echo fine", { env: ENV, logName: "ok", capture: true });
    expect(ok).toMatchObject({ exitCode: 0, stdout: "fine\n" });
    expect(ok.limitHit).toBeUndefined();
    await rt.teardown({ keep: false });
    for (const d of dirs) expect(existsSync(d)).toBe(false);
  });

  it("cpus: 0.5 sets a quota of half a core, and a CPU-bound harness never uses more", async () => {
    const rt = await LocalRuntime.create(RuntimeSpec.parse({ cpus: 0.5 }), ctx("cpu.t.0"));
    await rt.start();
    const r = await rt.exec(`node -e 'const e=Date.now()+2000;while(Date.now()<e){}'`, {
      env: ENV,
      logName: "busy",
    });
    expect(r.exitCode).toBe(0);
    // The quota as the kernel holds it: 50 ms of every 100 ms period.
    const dirs = rt.resourceLimits?.dirs ?? {};
    const quota = dirs.unified
      ? readFileSync(path.join(dirs.unified, "cpu.max"), "utf8").trim()
      : `${readFileSync(path.join(dirs.cpu ?? "", "cpu.cfs_quota_us"), "utf8").trim()} ${readFileSync(path.join(dirs.cpu ?? "", "cpu.cfs_period_us"), "utf8").trim()}`;
    expect(quota).toBe("50000 100000");
    const { usageUsec, periods } = (await rt.resourceLimits?.cpuStat()) ?? { usageUsec: 0, periods: 0 };
    // Used CPU over what the quota allowed in the periods the group was runnable: at most ≈ 1
    // (an unlimited loop alone on a core would be ≈ 2). How far below 1 depends on what else the
    // machine runs, so only the upper bound is the limit's; the loop did run (usage > 0.2 s).
    expect(periods).toBeGreaterThan(5);
    expect(usageUsec).toBeGreaterThan(200_000);
    expect(usageUsec / (periods * 0.5 * 100_000)).toBeLessThan(1.3);
    await rt.teardown({ keep: false });
  });

  it("a fork bomb stops at the process cap and the host keeps working", async () => {
    const lim = await SessionLimits.create("bomb.t.0", { maxPids: 128 });
    const { runProcess } = await import("./process");
    const r = await runProcess(lim.wrap(["bash", "-c", "b(){ b | b & }; b; sleep 5"]), {
      env: ENV,
      cwd: root,
      logsDir: root,
      logName: "bomb",
      timeoutMs: 3_000,
    });
    expect(r.timedOut || r.exitCode !== null).toBe(true);
    expect(await lim.forksRefused()).toBeGreaterThan(0);
    await lim.destroy();
    expect(execFileSync("echo", ["alive"], { encoding: "utf8" })).toBe("alive\n");
    for (const d of Object.values(lim.dirs)) expect(existsSync(d)).toBe(false);
  });
});
