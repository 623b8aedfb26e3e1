import { mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { type PolarProcess, spawnPolar } from "../cli/processes";
import { type GatewayMessage, type HelloMessage, type ResultMessage, WIRE_VERSION } from "../protocol";
import { type FixtureEngine, startFixtureEngine } from "../proxy/testing/fixture-engine";
import { type JournalEntry, ResultJournal } from "./journal";
import { startFakeControlPlane } from "./testing/fake-control-plane";
import { ASK, makeAssign } from "./testing/session-fixtures";

const TOKEN = "journal-test-token";
const MODEL = "Qwen/Qwen3-8B";
const quiet = { info() {}, warn() {}, error() {} };

/** While `on`, the journal's file operations are recorded (base names), in the order they are called. */
const fsTrace = vi.hoisted(() => ({ on: false, ops: [] as string[] }));
vi.mock("node:fs/promises", async (importOriginal) => {
  const fs = await importOriginal<typeof import("node:fs/promises")>();
  const name = (p: unknown) => String(p).split("/").pop();
  const open = async (file: Parameters<typeof fs.open>[0], flags?: string, mode?: number) => {
    const handle = await fs.open(file, flags, mode);
    if (!fsTrace.on) return handle;
    fsTrace.ops.push(`open ${name(file)} ${flags}`);
    return new Proxy(handle, {
      get(target, prop) {
        const value: unknown = Reflect.get(target, prop, target);
        if (typeof value !== "function") return value;
        return (...args: unknown[]) => {
          if (prop === "writeFile" || prop === "sync" || prop === "close")
            fsTrace.ops.push(`${String(prop)} ${name(file)}`);
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
  };
  const rename = async (from: string, to: string) => {
    if (fsTrace.on) fsTrace.ops.push(`rename ${name(from)} ${name(to)}`);
    return fs.rename(from, to);
  };
  return { ...fs, default: { ...fs, open, rename }, open, rename };
});

function message(leaseId: string, sessionId = "b.t1.0"): ResultMessage {
  return {
    v: WIRE_VERSION,
    type: "result",
    lease_id: leaseId,
    result: {
      session_id: sessionId,
      task_id: "t1",
      batch_id: "b",
      status: "COMPLETED",
      reward: 1,
      trajectory: { status: "COMPLETED", traces: [], metadata: {}, error: null },
      timing: { queued_ms: 0, init_ms: 0, ready_ms: 0, run_ms: 0, postrun_ms: 0, total_ms: 0 },
      node_id: "n",
      attempt: 1,
      error: null,
      metadata: {},
    },
  };
}

const entryOf = (
  leaseId: string,
  finishedAt: number,
  pending: JournalEntry["pending"] = {},
): JournalEntry => ({
  v: 2,
  message: message(leaseId),
  pending,
  finished_at: finishedAt,
});

/** The file a lease's entry is kept in. */
const fileOf = (dir: string, leaseId: string) =>
  path.join(dir, `${Buffer.from(leaseId).toString("base64url")}.result.json`);

function recordingLogger() {
  const errors: Array<{ message: string; fields: unknown }> = [];
  return {
    errors,
    logger: {
      info() {},
      warn() {},
      error: (m: string, f?: object) => errors.push({ message: m, fields: f }),
    },
  };
}

let engine: FixtureEngine;
let scratch: string;
beforeAll(async () => {
  engine = await startFixtureEngine({ model: MODEL });
  scratch = await mkdtemp(path.join(tmpdir(), "polar-journal-test-"));
});
afterAll(async () => {
  await engine.close();
  await rm(scratch, { recursive: true, force: true });
});

describe("ResultJournal", () => {
  it("keeps entries (records pending upload included) across instances until removed, loads the earlier format, moves unreadable entries aside, counts bytes", async () => {
    const dir = path.join(scratch, "unit");
    const a = makeAssign({ command: "true" });
    const sent = message("lease/with:odd chars", a.session.session_id);
    const records = [{ opaque: "record" }];
    const entry: JournalEntry = { v: 2, message: sent, pending: { completions: records }, finished_at: 1 };
    const journal = new ResultJournal(dir, quiet);
    const bytes = await journal.put(entry);
    expect(journal.bytes).toBe(bytes);
    await writeFile(path.join(dir, "garbage.result.json"), "{not json");
    // The earlier format (a bare result message, uploads done) still loads, with nothing pending.
    const legacy: ResultMessage = { ...sent, lease_id: "legacy-lease" };
    await writeFile(path.join(dir, "bGVnYWN5LWxlYXNl.result.json"), JSON.stringify(legacy));
    const reopened = new ResultJournal(dir, quiet);
    const loaded = await reopened.load();
    expect(loaded).toContainEqual(entry);
    expect(loaded.find((e) => e.message.lease_id === "legacy-lease")).toMatchObject({
      message: legacy,
      pending: {},
    });
    expect((await readdir(dir)).filter((n) => n.endsWith(".corrupt"))).toHaveLength(1);
    expect(reopened.bytes).toBe(bytes + Buffer.byteLength(JSON.stringify(legacy)));
    await reopened.remove(sent.lease_id);
    await reopened.remove("legacy-lease");
    expect(reopened.bytes).toBe(0);
    expect(await new ResultJournal(dir, quiet).load()).toEqual([]);
  });

  it("writes an entry to a temporary file, fsyncs and closes it, renames it over the entry, then fsyncs the folder", async () => {
    const dir = path.join(scratch, "fsync");
    // A fresh copy of the module, bound to the recording `node:fs/promises` even where test files
    // share loaded modules (the mutation runs' `isolate: false`).
    vi.resetModules();
    const { ResultJournal: Journal } = await import("./journal");
    const journal = new Journal(dir, quiet);
    const tmp = `${path.basename(fileOf(dir, "L"))}.tmp`;
    const file = path.basename(fileOf(dir, "L"));
    fsTrace.ops = [];
    fsTrace.on = true;
    try {
      await journal.put(entryOf("L", 1));
    } finally {
      fsTrace.on = false;
    }
    expect(fsTrace.ops).toEqual([
      `open ${tmp} w`,
      `writeFile ${tmp}`,
      `sync ${tmp}`,
      `close ${tmp}`,
      `rename ${tmp} ${file}`,
      `open fsync r`,
      "sync fsync",
      "close fsync",
    ]);
    expect(JSON.parse(await readFile(fileOf(dir, "L"), "utf8"))).toEqual(entryOf("L", 1));
  });

  it("creates its folder with any missing parents; a put replaces the lease's entry and counts only the newest, in UTF-8 bytes", async () => {
    const dir = path.join(scratch, "nested", "deeper", "journal");
    const journal = new ResultJournal(dir, quiet);
    const first = await journal.put(entryOf("L", 1, { completions: ["é".repeat(100)] }));
    expect(first).toBe((await stat(fileOf(dir, "L"))).size);
    const second = await journal.put(entryOf("L", 2));
    expect(second).toBe((await stat(fileOf(dir, "L"))).size);
    expect(second).toBeLessThan(first);
    expect(journal.bytes).toBe(second);
    expect(await readdir(dir)).toEqual([path.basename(fileOf(dir, "L"))]);
    const other = await journal.put(entryOf("M", 3, { completions: ["ü"] }));
    expect(journal.bytes).toBe(second + other);
    // Loading counts the same bytes as writing did.
    const reopened = new ResultJournal(dir, quiet);
    expect(await reopened.load()).toEqual([entryOf("L", 2), entryOf("M", 3, { completions: ["ü"] })]);
    expect(reopened.bytes).toBe(second + other);
  });

  it("removing a lease it does not hold (never written, or removed already) changes nothing", async () => {
    const dir = path.join(scratch, "remove");
    const journal = new ResultJournal(dir, quiet);
    const bytes = await journal.put(entryOf("kept", 1));
    await journal.remove("never-written");
    await journal.remove("kept");
    await journal.remove("kept");
    expect(journal.bytes).toBe(0);
    await journal.put(entryOf("kept", 1));
    await journal.remove("never-written");
    expect(journal.bytes).toBe(bytes);
    expect(await readdir(dir)).toEqual([path.basename(fileOf(dir, "kept"))]);
  });

  it("loads entries oldest finished first whatever their files' names, an earlier-format entry dated by its file's mtime", async () => {
    const dir = path.join(scratch, "order");
    const journal = new ResultJournal(dir, quiet);
    await journal.put(entryOf("zz-early", 1000));
    await journal.put(entryOf("aa-late", 3000));
    const legacy = message("mm-legacy");
    await writeFile(fileOf(dir, "mm-legacy"), JSON.stringify(legacy));
    await utimes(fileOf(dir, "mm-legacy"), 2, 2); // seconds: mtimeMs 2000
    // The files' names (base64url of the lease ids) sort the other way round.
    const names = (await readdir(dir)).sort();
    expect(names.map((n) => Buffer.from(n.replace(".result.json", ""), "base64url").toString())).toEqual([
      "aa-late",
      "mm-legacy",
      "zz-early",
    ]);
    const loaded = await new ResultJournal(dir, quiet).load();
    expect(loaded.map((e) => [e.message.lease_id, e.finished_at])).toEqual([
      ["zz-early", 1000],
      ["mm-legacy", 2000],
      ["aa-late", 3000],
    ]);
  });

  it("moves aside and logs a torn entry and JSON that is neither an entry nor a result, loads the rest, and leaves an unfinished write's temporary file alone", async () => {
    const dir = path.join(scratch, "corrupt");
    const journal = new ResultJournal(dir, quiet);
    const good = await journal.put(entryOf("good", 1));
    const torn = JSON.stringify(entryOf("torn", 2));
    await writeFile(fileOf(dir, "torn"), torn.slice(0, torn.length / 2));
    await writeFile(fileOf(dir, "alien"), JSON.stringify({ v: 2, hello: "world" }));
    const tmp = `${fileOf(dir, "unfinished")}.tmp`;
    await writeFile(tmp, torn.slice(0, 10));
    const { errors, logger } = recordingLogger();
    const reopened = new ResultJournal(dir, logger);
    expect(await reopened.load()).toEqual([entryOf("good", 1)]);
    expect(reopened.bytes).toBe(good);
    expect(errors).toEqual(
      [fileOf(dir, "alien"), fileOf(dir, "torn")].map((file) => ({
        message: "journal entry unreadable; moved aside",
        fields: { file, error: expect.any(String) },
      })),
    );
    expect((await readdir(dir)).sort()).toEqual(
      [`${fileOf(dir, "alien")}.corrupt`, fileOf(dir, "good"), tmp, `${fileOf(dir, "torn")}.corrupt`]
        .map((f) => path.basename(f))
        .sort(),
    );
    expect(await readFile(tmp, "utf8")).toBe(torn.slice(0, 10));
    // What was moved aside is not read again.
    expect(await new ResultJournal(dir, logger).load()).toEqual([entryOf("good", 1)]);
    expect(errors).toHaveLength(2);
  });
});

describe("journal across a SIGKILL (real gateway processes)", { timeout: 120_000 }, () => {
  it("re-sends a finished, unacknowledged result after kill -9 and restart; once acked it is gone", async () => {
    const cp = await startFakeControlPlane({ token: TOKEN, autoAck: false });
    const workRoot = path.join(scratch, "work");
    const launch = (): PolarProcess =>
      spawnPolar(
        "gateway",
        [
          "serve_gateway",
          "--control-plane",
          cp.url,
          "--node-id",
          "kill-node",
          "--engine-url",
          engine.url,
          "--model",
          MODEL,
          "--work-root",
          workRoot,
        ],
        { POLAR_GATEWAY_TOKEN: TOKEN, PATH: process.env.PATH ?? "/usr/bin:/bin" },
      );
    const hellos = () => cp.received.filter((r) => r.message.type === "hello");
    let gw = launch();
    try {
      await cp.waitFor((m) => m.type === "hello", 60_000);
      const a = makeAssign({ command: ASK, prefix: "kill" });
      cp.send(a);
      const first = (await cp.waitFor(
        (m) => m.type === "result" && m.lease_id === a.lease_id,
        60_000,
      )) as ResultMessage;
      expect(first.result.status).toBe("COMPLETED");

      // kill -9 between result and ack.
      await gw.kill();
      gw = launch();
      const second = (await cp.waitFor(
        (m: GatewayMessage, r) => m.type === "hello" && r.connection === 1,
        60_000,
      )) as HelloMessage;
      expect(second.leases).toEqual([{ lease_id: a.lease_id, session_id: a.session.session_id }]);
      const resent = (await cp.waitFor(
        (m, r) => m.type === "result" && m.lease_id === a.lease_id && r.connection === 1,
        30_000,
      )) as ResultMessage;
      expect(resent.result).toEqual(first.result);

      // The control plane accepts it (once); the journal entry goes away.
      cp.send({
        v: WIRE_VERSION,
        type: "ack",
        lease_id: a.lease_id,
        session_id: a.session.session_id,
        status: "accepted",
      });
      await expect
        .poll(async () => (await readdir(path.join(workRoot, "journal"))).length, { timeout: 10_000 })
        .toBe(0);
      await gw.kill();
      gw = launch();
      const third = (await cp.waitFor(
        (m, r) => m.type === "hello" && r.connection === 2,
        60_000,
      )) as HelloMessage;
      expect(third.leases).toEqual([]);
      // A result re-sent on this connection would come with the welcome, before this request's answer.
      cp.send({ v: WIRE_VERSION, type: "admin", request_id: "after-welcome", action: "status" });
      await cp.waitFor(
        (m, r) => m.type === "admin_ack" && m.request_id === "after-welcome" && r.connection === 2,
      );
      const results = cp.received.filter((r) => r.message.type === "result");
      expect(results.map((r) => r.connection)).toEqual([0, 1]);
      expect(hellos()).toHaveLength(3);
    } finally {
      await gw.kill();
      await cp.close();
    }
  });
});
