/**
 * Reading a session's log folders into bounded streams: classification by file, the tail kept at
 * the limit with the sizes stated, a cut at a character boundary, and no symlink followed.
 */
import { mkdir, mkdtemp, rm, symlink, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { LOG_STREAM_LIMIT_BYTES } from "../protocol";
import { collectSessionLogs, streamOf } from "./session-logs";

let root: string;
let logs: string;

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "polar-session-logs-"));
  logs = path.join(root, "logs");
  await mkdir(path.join(logs, "agent"), { recursive: true });
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

/** Writes a log file with a given modification time (seconds from now), so the order is fixed. */
async function put(rel: string, text: string | Buffer, ageSeconds = 0): Promise<void> {
  const file = path.join(logs, rel);
  await writeFile(file, text);
  const at = Date.now() / 1000 - ageSeconds;
  await utimes(file, at, at);
}

describe("session logs", () => {
  it("sorts files into the named streams, oldest first, each under its header; empty files left out", async () => {
    await put("prepare-0.stdout.log", "cloned\n", 50);
    await put("prepare-0.stderr.log", "", 50);
    await put("agent/shell.install.stdout.log", "installed\n", 40);
    await put("agent/shell.step00.stdout.log", "step output\n", 30);
    await put("agent/shell.step00.stderr.log", "boom\n", 30);
    await put("eval-test.stdout.log", "1 passed\n", 20);
    await put("upload.stderr.log", "copied\n", 10);
    const out = await collectSessionLogs([{ dir: logs, origin: "session" }]);
    expect(out.limit_bytes).toBe(LOG_STREAM_LIMIT_BYTES);
    expect(out.streams.map((s) => s.name)).toEqual([
      "prepare",
      "harness.stdout",
      "harness.stderr",
      "evaluator",
      "other",
    ]);
    const stdout = out.streams[1]!;
    const text =
      "==> agent/shell.install.stdout.log <==\ninstalled\n==> agent/shell.step00.stdout.log <==\nstep output\n";
    expect(stdout).toEqual({
      name: "harness.stdout",
      bytes_total: Buffer.byteLength(text),
      bytes_kept: Buffer.byteLength(text),
      truncated: false,
      text,
    });
    expect(out.streams[2]!.text).toBe("==> agent/shell.step00.stderr.log <==\nboom\n");
    expect(out.streams[0]!.text).toBe("==> prepare-0.stdout.log <==\ncloned\n");
  });

  it("keeps the tail of a stream over the limit and states bytes seen and kept", async () => {
    const lines = Array.from({ length: 2000 }, (_, i) => `line ${i}\n`).join("");
    await put("agent/shell.step00.stderr.log", lines);
    const limit = 1024;
    const [s] = (await collectSessionLogs([{ dir: logs, origin: "session" }], limit)).streams;
    const header = "==> agent/shell.step00.stderr.log <==\n";
    expect(s!.truncated).toBe(true);
    expect(s!.bytes_total).toBe(Buffer.byteLength(header) + Buffer.byteLength(lines));
    expect(s!.bytes_kept).toBe(limit);
    expect(s!.text).toBe(lines.slice(-limit)); // the newest bytes; the header scrolled out
    expect(s!.text.endsWith("line 1999\n")).toBe(true);
  });

  it("cuts a truncated stream at a character boundary", async () => {
    // "é" is two bytes: a 7-byte tail of "éééé\n" starts inside one.
    await put("agent/x.stdout.log", "aéééé\n");
    const [s] = (await collectSessionLogs([{ dir: logs, origin: "session" }], 8)).streams;
    expect(s!.text).toBe("ééé\n");
    expect(s!.bytes_kept).toBe(7);
    expect(s!.text).not.toContain("\uFFFD");
  });

  it("does not follow a symlink planted in the logs folder, file or folder", async () => {
    const secret = path.join(root, "host-secret.txt");
    await writeFile(secret, "TOP SECRET\n");
    await symlink(secret, path.join(logs, "agent", "shell.step00.stdout.log"));
    await symlink(root, path.join(logs, "agent", "linked"));
    await put("agent/shell.step00.stderr.log", "real\n");
    const out = await collectSessionLogs([{ dir: logs, origin: "session" }]);
    expect(JSON.stringify(out)).not.toContain("TOP SECRET");
    expect(out.streams.map((s) => s.name)).toEqual(["harness.stderr"]);
  });

  it("puts everything of a separate eval runtime under evaluator, after the session's own eval files", async () => {
    const evalLogs = path.join(root, "eval-logs");
    await mkdir(evalLogs);
    await put("eval-guard.stdout.log", "guard\n", 20);
    await writeFile(path.join(evalLogs, "eval_prepare-0.stdout.log"), "fresh\n");
    await writeFile(path.join(evalLogs, "eval-test.stdout.log"), "graded\n");
    const out = await collectSessionLogs([
      { dir: logs, origin: "session" },
      { dir: evalLogs, origin: "eval" },
      { dir: path.join(root, "missing"), origin: "eval" },
    ]);
    expect(out.streams).toHaveLength(1);
    expect(out.streams[0]!.text).toContain("==> eval-guard.stdout.log <==\nguard\n");
    expect(out.streams[0]!.text).toContain("==> eval-runtime/eval-test.stdout.log <==\ngraded\n");
    expect(out.streams[0]!.text.indexOf("guard")).toBeLessThan(out.streams[0]!.text.indexOf("graded"));
  });

  it("names streams by file", () => {
    expect(streamOf("agent/codex.post00.stdout.log", "session")).toBe("harness.stdout");
    expect(streamOf("prepare-3.stderr.log", "session")).toBe("prepare");
    expect(streamOf("eval_prepare-0.stdout.log", "session")).toBe("evaluator");
    expect(streamOf("prepare-0.stdout.log", "eval")).toBe("evaluator");
    expect(streamOf("agent/notes.txt", "session")).toBe("other");
  });
});
