/**
 * `runtime.storage_mb` with real processes and real containers: the watchdog measures what a
 * session wrote (the session folder, a container's writable layer), stops the writer, refuses
 * later commands, and bubblewrap's private /tmp is bounded too.
 */
import { execFileSync } from "node:child_process";
import { link, mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { RuntimeSpec } from "../../protocol";
import { describeWith, itWith } from "../../test/support/optional-tools";
import { ensureTestImage, PODMAN_SETTINGS } from "../testing/images";
import { ApptainerRuntime } from "./apptainer";
import { bwrapSupportsSize } from "./bwrap";
import { DockerRuntime } from "./docker";
import { LocalRuntime } from "./local";
import { diskUsage, limitStorage, MIN_SAMPLE_INTERVAL_MS, walkDiskUsage } from "./storage";
import { DEFAULT_RUNTIME_SETTINGS, type Runtime, type RuntimeContext } from "./types";

let root: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "polar-storage-"));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

function ctx(name: string, sandbox: "never" | "always" = "never"): RuntimeContext {
  return {
    workRoot: root,
    name,
    session_id: name,
    node_id: "n",
    proxyUrl: "http://127.0.0.1:9",
    settings: {
      ...DEFAULT_RUNTIME_SETTINGS,
      local: { sandbox, bwrapPath: "bwrap" },
      docker: PODMAN_SETTINGS,
    },
    warn() {},
  };
}
const ENV = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: tmpdir() };
const MiB = 1024 * 1024;

describe("diskUsage", () => {
  it("counts allocated blocks like du, hard links once, symlinks not followed", async () => {
    const dir = path.join(root, "tree");
    await mkdir(path.join(dir, "sub"), { recursive: true });
    await writeFile(path.join(dir, "a.bin"), Buffer.alloc(3 * MiB, 1));
    await writeFile(path.join(dir, "sub", "b.bin"), Buffer.alloc(MiB, 2));
    await link(path.join(dir, "a.bin"), path.join(dir, "sub", "a-again.bin"));
    const outside = path.join(root, "outside.bin");
    await writeFile(outside, Buffer.alloc(5 * MiB, 3));
    await symlink(outside, path.join(dir, "to-outside"));
    const used = await diskUsage(dir);
    const du = Number(execFileSync("du", ["-sk", dir], { encoding: "utf8" }).split("\t")[0]) * 1024;
    expect(used).toBe(du);
    expect(await walkDiskUsage(dir)).toBe(du); // the fallback without du measures the same
    expect(used).toBeGreaterThanOrEqual(4 * MiB);
    expect(used).toBeLessThan(4.5 * MiB); // neither the link nor the symlink's target doubled it
    expect(await diskUsage(path.join(root, "missing"))).toBe(0);
  });
});

describe("storage_mb on the local runtime (plain processes)", { timeout: 60_000 }, () => {
  async function local(mb: number, sandbox: "never" | "always" = "never") {
    const spec = RuntimeSpec.parse({ storage_mb: mb });
    const raw = await LocalRuntime.create(spec, ctx(`s-${mb}-${sandbox}`, sandbox));
    await raw.start();
    return { raw, rt: limitStorage(raw, mb) };
  }

  it("a command that wrote past the limit ends with limitHit; later commands are refused unrun", async () => {
    const { rt } = await local(4);
    const small = await rt.exec("dd if=/dev/zero of=small bs=1M count=1 status=none", {
      env: ENV,
      logName: "small",
    });
    expect(small.exitCode).toBe(0);
    expect(small.limitHit).toBeUndefined();
    const big = await rt.exec("dd if=/dev/zero of=big bs=1M count=8 status=none", {
      env: ENV,
      logName: "big",
    });
    expect(big.exitCode).toBe(0); // it finished before a sample: the measurement after exit caught it
    expect(big.limitHit).toMatch(
      /^storage limit of 4 MiB \(runtime\.storage_mb\) hit: the session holds (9|10) MiB$/,
    );
    expect(rt.storageExceeded).toBe(big.limitHit);
    const after = await rt.exec("touch ran", { env: ENV, logName: "after" });
    expect(after).toMatchObject({ exitCode: null, limitHit: big.limitHit, durationMs: 0 });
    expect(await diskUsage(path.join(rt.workdir, "ran"))).toBe(0); // never ran
    await rt.teardown({ keep: false });
  });

  it("stops a writer that keeps writing, within a few sampling intervals", async () => {
    const { rt } = await local(3);
    const started = Date.now();
    const r = await rt.exec(
      "for i in $(seq 1 200); do dd if=/dev/zero of=f$i bs=1M count=1 status=none; sleep 0.05; done; echo done",
      { env: ENV, logName: "writer", capture: true },
    );
    expect(r.limitHit).toContain("storage limit of 3 MiB (runtime.storage_mb) hit");
    expect(r.interrupted).toBe(false);
    expect(r.exitCode).toBeNull(); // killed
    expect(r.stdout).not.toContain("done");
    expect(Date.now() - started).toBeLessThan(200 * 50); // long before the loop's own end
    expect(Date.now() - started).toBeGreaterThanOrEqual(MIN_SAMPLE_INTERVAL_MS);
    await rt.teardown({ keep: false });
  });

  it("the caller's own abort stays an interrupt, not a limit hit", async () => {
    const { rt } = await local(100);
    const abort = new AbortController();
    setTimeout(() => abort.abort(), 200);
    const r = await rt.exec("sleep 30", { env: ENV, logName: "sleep", signal: abort.signal });
    expect(r.interrupted).toBe(true);
    expect(r.limitHit).toBeUndefined();
    await rt.teardown({ keep: false });
  });

  itWith(
    ["bubblewrap"],
    "inside bubblewrap: the workspace is watched and the private /tmp is a tmpfs of storage_mb",
    async () => {
      const { rt } = await local(2, "always");
      const tmp = await rt.exec("dd if=/dev/zero of=/tmp/x bs=1M count=8 status=none", {
        env: ENV,
        logName: "tmp",
      });
      if (bwrapSupportsSize("bwrap")) expect(tmp.exitCode).not.toBe(0); // ENOSPC at 2 MiB
      expect(tmp.limitHit).toBeUndefined(); // /tmp is not the session folder
      const ws = await rt.exec("dd if=/dev/zero of=big bs=1M count=4 status=none", {
        env: ENV,
        logName: "ws",
      });
      expect(ws.limitHit).toContain("storage limit of 2 MiB");
      await rt.teardown({ keep: false });
    },
  );
});

describe("storage_mb on apptainer", () => {
  it("measures the session folder, which holds the instance's writable overlay", async () => {
    // No apptainer on the CI machine: the instance is not started; what is measured is the host side.
    const spec = RuntimeSpec.parse({ backend: "apptainer", image: "docker://busybox", storage_mb: 1 });
    const rt = await ApptainerRuntime.create(spec, ctx("app-storage"));
    const empty = await rt.storageBytes();
    await writeFile(path.join(rt.hostDir, "overlay", "upper.bin"), Buffer.alloc(3 * MiB, 1));
    expect((await rt.storageBytes()) - empty).toBeGreaterThanOrEqual(3 * MiB);
    await rt.teardown({ keep: false });
  });
});

describeWith(["podman"], "storage_mb on podman", { timeout: 180_000 }, () => {
  let rt: Runtime | null = null;
  afterEach(async () => {
    await rt?.teardown({ keep: false });
    rt = null;
  }, 60_000); // podman waits for the container's main process before it kills it

  it("counts the container's writable layer: writing over the image stops at the limit", async () => {
    const spec = RuntimeSpec.parse({
      backend: "docker",
      image: ensureTestImage(),
      kwargs: { shell: "sh" },
      storage_mb: 10,
    });
    const raw = await DockerRuntime.create(spec, ctx("pod-storage"));
    rt = limitStorage(raw, 10);
    await rt.start();
    const before = await raw.storageBytes();
    expect(before).toBeLessThan(MiB);
    const ok = await rt.exec("dd if=/dev/zero of=/small bs=1M count=2 2>/dev/null", {
      env: {},
      logName: "small",
    });
    expect(ok.limitHit).toBeUndefined();
    expect(await raw.storageBytes()).toBeGreaterThanOrEqual(2 * MiB); // outside the session mount: the layer
    const big = await rt.exec("dd if=/dev/zero of=/big bs=1M count=20 2>/dev/null", {
      env: {},
      logName: "big",
    });
    expect(big.limitHit).toMatch(
      /^storage limit of 10 MiB \(runtime\.storage_mb\) hit: the session holds 2[2-3] MiB$/,
    );
  });
});
