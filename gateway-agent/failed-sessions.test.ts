/**
 * A gateway tells what it cannot run before it is asked to, fails such a session at once with the
 * fix, and keeps (boundedly) the logs of sessions that failed while running.
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { ProgressMessage } from "../protocol";
import { describeWith } from "../test/support/optional-tools";
import { FAILED_DIR, FailedSessionKeeper } from "./failed-sessions";
import { PRESET_PACKAGES, type PresetName } from "./harness";
import { type GatewayRig, recordingLogger, startGatewayRig } from "./testing/gateway-rig";
import { ASK, isResultOf, makeAssign } from "./testing/session-fixtures";

const TOKEN = "test-gateway-token";
let rig: GatewayRig | null = null;
const saved = { POLAR_HARNESS_DIR: process.env.POLAR_HARNESS_DIR, PATH: process.env.PATH };
afterEach(async () => {
  await rig?.stop();
  rig = null;
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

/** `pathVar` without the folders that hold `bin`: a host where that CLI is not installed. */
const pathWithout = (bin: string, pathVar: string) =>
  pathVar
    .split(":")
    .filter((d) => d && !existsSync(path.join(d, bin)))
    .join(":");

describeWith(["bubblewrap"], "a harness the host cannot run", { timeout: 60_000 }, () => {
  it("is reported at start (log, /health, /metrics) and fails its session at once as a configuration error", async () => {
    const name: PresetName = "codex";
    // The sandbox by its full path, then a PATH without codex even where this host has it installed.
    const bwrapPath = execFileSync("bash", ["-c", "command -v bwrap"], { encoding: "utf8" }).trim();
    process.env.PATH = pathWithout(PRESET_PACKAGES[name].bin, process.env.PATH ?? "");
    const scratch = await mkdtemp(path.join(tmpdir(), "polar-avail-gw-"));
    // An empty harness folder: nothing pre-installed, and bubblewrap makes the install step impossible.
    process.env.POLAR_HARNESS_DIR = path.join(scratch, "harnesses");
    await mkdir(path.join(process.env.POLAR_HARNESS_DIR, "bin"), { recursive: true });
    const { lines, logger } = recordingLogger();
    rig = await startGatewayRig({
      nodeId: "gpu-avail",
      token: TOKEN,
      scratch,
      gateway: {
        logger,
        http: { host: "127.0.0.1", port: 0 },
        runtimeSettings: { local: { sandbox: "always", bwrapPath } },
      },
    });
    const startLine = lines.find((l) => l.msg.startsWith("harness presets not available"));
    expect(startLine?.level).toBe("warn");
    expect(startLine?.fields.unavailable).toContain(name);
    expect(String((startLine?.fields.why as Record<string, string> | undefined)?.[name])).toContain(
      `polar harnesses install ${name}`,
    );
    const health = (await (await fetch(`${rig.gateway.httpUrl}/health`)).json()) as {
      harnesses: Record<string, { available: boolean; reason: string; fix: string }>;
      failed_sessions: { keep: number };
    };
    expect(health.harnesses[name]).toMatchObject({
      available: false,
      reason: expect.stringContaining("bubblewrap, where the host filesystem is read-only"),
      fix: expect.stringContaining(`POLAR_HARNESS_DIR=${process.env.POLAR_HARNESS_DIR}`),
    });
    expect(health.failed_sessions.keep).toBe(20);

    const a = makeAssign({ command: "", agent: { harness: name }, runtime: { allow_internet: false } });
    const sent = Date.now();
    rig.cp.send(a);
    const { result } = await rig.cp.waitFor(isResultOf(a.lease_id));
    expect(Date.now() - sent).toBeLessThan(10_000); // not after an install attempt's timeout
    expect(result).toMatchObject({
      status: "ERROR",
      reward: null,
      error: {
        kind: "configuration",
        message: expect.stringContaining(
          `agent.harness: '${name}' is not available on gateway node 'gpu-avail'`,
        ),
      },
    });
    expect(result.error?.message).toContain(`Fix: on the gateway host run polar harnesses install ${name}`);
    // Failed while queued: it never reached INIT, so no budget was spent and nothing was installed.
    const stages = rig.cp.received
      .map((r) => r.message)
      .filter((m): m is ProgressMessage => m.type === "progress" && m.lease_id === a.lease_id)
      .map((m) => m.status);
    expect(stages).toEqual(["POST_RUN"]);
    expect(result.timing.init_ms).toBe(0);
    expect(
      lines.some(
        (l) => l.level === "warn" && l.msg === "session failed" && l.fields.kind === "configuration",
      ),
    ).toBe(true);
    const metrics = await (await fetch(`${rig.gateway.httpUrl}/metrics`)).text();
    expect(metrics).toMatch(
      new RegExp(`polar_gateway_harness_available\\{harness="${name}",node_id="gpu-avail"\\} 0`),
    );
    expect(metrics).toMatch(/polar_gateway_harness_available\{harness="[a-z_]+",node_id="gpu-avail"\} [01]/);
    expect(metrics).toMatch(/polar_gateway_errors_total\{kind="configuration",node_id="gpu-avail"\} 1/);
  });
});

describe("logs of failed sessions", { timeout: 60_000 }, () => {
  const failing = (tag: string) =>
    makeAssign({ command: `echo out-${tag}; echo err-${tag} >&2; exit 3`, evaluator: null });

  it("are kept under failed/ with a summary, bounded to the newest N, and pruned again at start", async () => {
    const scratch = await mkdtemp(path.join(tmpdir(), "polar-failed-"));
    const start = (keepFailedSessions: number) =>
      startGatewayRig({
        nodeId: "gpu-failed",
        token: TOKEN,
        scratch,
        gateway: { keepFailedSessions, runtimeSettings: { local: { sandbox: "never", bwrapPath: "bwrap" } } },
      });
    rig = await start(2);
    const failedDir = path.join(rig.gateway.workRoot, FAILED_DIR);
    const runs = ["a", "b", "c"].map(failing);
    for (const a of runs) {
      rig.cp.send(a);
      const { result } = await rig.cp.waitFor(isResultOf(a.lease_id));
      expect(result).toMatchObject({ status: "ERROR", error: { kind: "agent" } });
      const kept = path.join(failedDir, `${a.session.session_id}.a1`);
      expect(result.trajectory.metadata.kept_logs).toBe(kept);
      // The workspace is gone; the logs are not.
      expect(existsSync(path.join(rig.gateway.workRoot, "sessions", a.session.session_id))).toBe(false);
      const tag = a === runs[0] ? "a" : a === runs[1] ? "b" : "c";
      expect(await readFile(path.join(kept, "logs", "agent", "shell.step00.stdout.log"), "utf8")).toContain(
        `out-${tag}`,
      );
      expect(await readFile(path.join(kept, "logs", "agent", "shell.step00.stderr.log"), "utf8")).toContain(
        `err-${tag}`,
      );
      const summary = JSON.parse(await readFile(path.join(kept, "result.json"), "utf8"));
      expect(summary).toMatchObject({
        session_id: a.session.session_id,
        status: "ERROR",
        error: { kind: "agent", message: expect.stringContaining("exited with code 3") },
        trajectory: { trace_count: 0 },
      });
      expect(summary.trajectory.traces).toBeUndefined();
      await new Promise((r) => setTimeout(r, 20)); // distinct modification times
    }
    // Bound 2: the oldest (a) went when c was kept.
    expect((await readdir(failedDir)).sort()).toEqual(
      [runs[1], runs[2]].map((a) => `${a!.session.session_id}.a1`).sort(),
    );
    // A completed session keeps nothing.
    const ok = makeAssign({ command: ASK });
    rig.cp.send(ok);
    expect((await rig.cp.waitFor(isResultOf(ok.lease_id))).result.status).toBe("COMPLETED");
    expect((await readdir(failedDir)).sort()).toEqual(
      [runs[1], runs[2]].map((a) => `${a!.session.session_id}.a1`).sort(),
    );
    // The folder survives a restart, pruned to the new bound; 0 keeps nothing more.
    const restart = async (keep: number) => {
      // Not rig.stop(): that removes the scratch folder, and the work root must survive.
      await rig!.gateway.stop();
      await rig!.cp.close();
      await rig!.engine.close();
      rig = await start(keep);
    };
    await restart(1);
    expect(await readdir(failedDir)).toEqual([`${runs[2]!.session.session_id}.a1`]);
    await restart(0);
    expect(await readdir(failedDir)).toEqual([]);
    const none = failing("d");
    rig.cp.send(none);
    const { result } = await rig.cp.waitFor(isResultOf(none.lease_id));
    expect(result.trajectory.metadata.kept_logs).toBeUndefined();
    expect(await readdir(failedDir)).toEqual([]);
  });
});

describe("FailedSessionKeeper under many failures at once", () => {
  it("200 sessions failing together: none throws, the bound holds, every kept folder is whole", async () => {
    const root = await mkdtemp(path.join(tmpdir(), "polar-keeper-"));
    const { lines, logger } = recordingLogger();
    try {
      const keeper = new FailedSessionKeeper(root, 5, logger);
      const kept = await Promise.all(
        Array.from({ length: 200 }, async (_, i) => {
          const logs = path.join(root, "sessions", `s${i}`, "logs");
          await mkdir(path.join(logs, "agent"), { recursive: true });
          await writeFile(path.join(logs, "agent", "shell.stdout.log"), `out ${i}\n`.repeat(50));
          const dir = await keeper.keepLogs(`b.${i}`, 1, [{ logsDir: logs, as: "logs" }]);
          if (dir)
            await keeper.writeSummary(dir, { session_id: `b.${i}`, trajectory: { traces: [] } } as never);
          return dir;
        }),
      );
      // Every call kept its folder (none failed mid-move); pruning then bounded them.
      expect(kept.filter((d) => d === null)).toEqual([]);
      await keeper.prune();
      const left = await readdir(path.join(root, FAILED_DIR));
      expect(left.length).toBe(5);
      for (const name of left) {
        expect(
          await readFile(path.join(root, FAILED_DIR, name, "logs", "agent", "shell.stdout.log"), "utf8"),
        ).toMatch(/^out \d+\n/);
        expect(
          JSON.parse(await readFile(path.join(root, FAILED_DIR, name, "result.json"), "utf8")),
        ).toMatchObject({ session_id: name.replace(/\.a1$/, "") });
      }
      expect(lines.filter((l) => l.level === "warn")).toEqual([]);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
