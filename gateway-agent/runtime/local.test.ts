import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { PrepareAction } from "../../protocol";
import { SessionFailure } from "../errors";
import { baseEnv } from "../harness/env";
import { LocalRuntime } from "./local";

let root: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "polar-rt-test-"));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

const action = (a: unknown) => PrepareAction.parse(a);

describe("LocalRuntime", () => {
  it("creates workspace and logs, runs commands there with exactly the given env, logs their output", async () => {
    const rt = await LocalRuntime.create(root, "b.t.0");
    expect(rt.workspace).toBe(path.join(root, "b.t.0", "workspace"));
    const r = await rt.exec('echo "$GREETING from $(pwd)"; echo oops >&2; exit 4', {
      env: { ...baseEnv(), GREETING: "hello" },
      logName: "cmd",
    });
    expect(r).toMatchObject({ exitCode: 4, interrupted: false });
    expect(await readFile(path.join(rt.logsDir, "cmd.stdout.log"), "utf8")).toBe(
      `hello from ${rt.workspace}\n`,
    );
    expect(await readFile(path.join(rt.logsDir, "cmd.stderr.log"), "utf8")).toBe("oops\n");
    await rt.teardown({ keep: false });
    expect(existsSync(path.join(root, "b.t.0"))).toBe(false);
  });

  it("runs prepare actions: uploads into the workspace, exec with env, retries up to max_attempts", async () => {
    const src = path.join(root, "src");
    await mkdir(path.join(src, "dir"), { recursive: true });
    await writeFile(path.join(src, "file.txt"), "payload");
    await writeFile(path.join(src, "dir", "inner.txt"), "inner");
    const rt = await LocalRuntime.create(root, "s1");
    await rt.prepare(
      [
        action({ type: "upload_file", source: path.join(src, "file.txt"), target: "a/b/file.txt" }),
        action({ type: "upload_dir", source: path.join(src, "dir"), target: "copied" }),
        // Fails on the first attempt, succeeds on the second.
        action({
          type: "exec",
          command: 'test -f marker || { touch marker; exit 1; }; echo "$X" > out.txt',
          env: { X: "from-env" },
          max_attempts: 2,
        }),
      ],
      baseEnv(),
    );
    expect(await readFile(path.join(rt.workspace, "a/b/file.txt"), "utf8")).toBe("payload");
    expect(await readFile(path.join(rt.workspace, "copied/inner.txt"), "utf8")).toBe("inner");
    expect(await readFile(path.join(rt.workspace, "out.txt"), "utf8")).toBe("from-env\n");
    await rt.teardown({ keep: true });
    expect(existsSync(rt.workspace)).toBe(true);
  });

  it("refuses upload targets that escape the workspace and names the failing action", async () => {
    const file = path.join(root, "f.txt");
    await writeFile(file, "x");
    const rt = await LocalRuntime.create(root, "s2");
    for (const target of ["../escape.txt", "/etc/escape.txt", "a/../../escape.txt"]) {
      const run = rt.prepare([action({ type: "upload_file", source: file, target })], baseEnv());
      await expect(run).rejects.toBeInstanceOf(SessionFailure);
      await expect(run).rejects.toThrow(/prepare\[0\] \(upload_file\).*escapes the workspace/);
    }
    expect(existsSync(path.join(root, "s2", "escape.txt"))).toBe(false);
  });

  it("reports a failing exec with its exit code as an infra failure", async () => {
    const rt = await LocalRuntime.create(root, "s3");
    await expect(rt.prepare([action({ type: "exec", command: "exit 7" })], baseEnv())).rejects.toMatchObject({
      kind: "infra",
      message: expect.stringContaining("exited with code 7"),
    });
  });

  it("kills the whole process group when the signal aborts", async () => {
    const rt = await LocalRuntime.create(root, "s4");
    const ac = new AbortController();
    const started = Date.now();
    setTimeout(() => ac.abort(new Error("stop")), 200);
    const r = await rt.exec("sleep 30 & sleep 30; wait", { env: baseEnv(), signal: ac.signal, logName: "k" });
    expect(r.interrupted).toBe(true);
    expect(r.exitCode).toBeNull();
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it("refuses a session id that is not a plain folder name", async () => {
    await expect(LocalRuntime.create(root, "../evil")).rejects.toThrow(/not a plain folder name/);
  });
});
