import { execFileSync } from "node:child_process";
import type { Stats } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import {
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readlink,
  realpath,
  rename,
  rm,
  symlink,
  truncate,
  writeFile,
} from "node:fs/promises";
import { createRequire, syncBuiltinESMExports } from "node:module";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { RuntimeSpec } from "../../protocol";
import { SessionFailure } from "../errors";
import { LocalRuntime } from "../runtime/local";
import { DEFAULT_RUNTIME_SETTINGS } from "../runtime/types";
import { MAX_REPORT_BYTES } from "./junit";
import { openReportChannel, type ReportChannel, ReportRefused } from "./report-channel";

/**
 * Two things a unit test cannot make for real: a folder of another filesystem mounted over the
 * nonce folder with the same inode number, and a disk that fails mid-read. For them the channel's
 * `lstat` and `open` (Node's `fs/promises`) are wrapped while this file runs, passing through
 * unless a test sets a hook (cleared after each test). `syncBuiltinESMExports` carries the wrapper
 * to every ES import of them, also in a report-channel.ts another test file loaded first (Stryker
 * runs without isolation), which a `vi.mock` of the module would not reach.
 */
const fsp = createRequire(import.meta.url)("node:fs/promises") as typeof import("node:fs/promises");
const realFs = { lstat: fsp.lstat, open: fsp.open };
const hooks = {
  lstat: null as null | ((target: string, stats: Stats) => Stats),
  open: null as null | ((target: string, handle: FileHandle) => FileHandle),
};
function wrapFs(): void {
  fsp.lstat = (async (...args: Parameters<typeof fsp.lstat>) => {
    const stats = (await realFs.lstat(...args)) as Stats;
    return hooks.lstat ? hooks.lstat(String(args[0]), stats) : stats;
  }) as typeof fsp.lstat;
  fsp.open = (async (...args: Parameters<typeof fsp.open>) => {
    const handle = await realFs.open(...args);
    return hooks.open ? hooks.open(String(args[0]), handle) : handle;
  }) as typeof fsp.open;
  syncBuiltinESMExports();
}
function unwrapFs(): void {
  Object.assign(fsp, realFs);
  syncBuiltinESMExports();
}

/** How many of this process's open descriptors point at `file` (Linux's /proc). */
async function descriptorsOn(file: string): Promise<number> {
  let n = 0;
  for (const fd of await readdir("/proc/self/fd")) {
    if ((await readlink(`/proc/self/fd/${fd}`).catch(() => "")) === file) n += 1;
  }
  return n;
}

/** The error a promise rejects with (fails the test when it resolves). */
async function rejection(p: Promise<unknown>): Promise<Error> {
  const outcome = await p.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  if (!("error" in outcome)) throw new Error(`expected a rejection, got ${JSON.stringify(outcome.value)}`);
  return outcome.error as Error;
}

describe("the report channel on a real session folder", { timeout: 60_000 }, () => {
  let root: string;
  let rt: LocalRuntime;
  const open: ReportChannel[] = [];
  const channel = async () => {
    const c = await openReportChannel(rt);
    open.push(c);
    return c;
  };

  beforeAll(async () => {
    wrapFs();
    root = await mkdtemp(path.join(tmpdir(), "polar-report-channel-"));
    rt = await LocalRuntime.create(RuntimeSpec.parse({}), {
      workRoot: root,
      name: "rc",
      session_id: "rc",
      node_id: "n",
      proxyUrl: "http://127.0.0.1:9",
      settings: { ...DEFAULT_RUNTIME_SETTINGS, local: { sandbox: "never", bwrapPath: "bwrap" } },
      warn() {},
    });
  });
  afterEach(async () => {
    hooks.lstat = null;
    hooks.open = null;
    for (const c of open.splice(0)) await c.dispose();
  });
  afterAll(async () => {
    unwrapFs();
    await rt?.teardown({ keep: false });
    await rm(root, { recursive: true, force: true });
  });

  describe("the nonce folder must still be the one the gateway made", () => {
    it("a folder removed during the tests: ReportRefused 'replaced', not a TypeError", async () => {
      const c = await channel();
      await rm(c.folder.host, { recursive: true });
      const e = await rejection(c.read());
      expect(e).toBeInstanceOf(ReportRefused);
      expect(e.message).toBe("the report folder was replaced during the tests");
    });

    it("a folder swapped for a symlink to a folder holding a report: refused, the report unread", async () => {
      const c = await channel();
      const moved = `${c.folder.host}-moved`;
      await rename(c.folder.host, moved);
      await writeFile(path.join(moved, "report.xml"), "<testsuites/>");
      await symlink(moved, c.folder.host);
      await expect(c.read()).rejects.toThrow("the report folder was replaced during the tests");
      await rm(c.folder.host);
      await rename(moved, c.folder.host);
    });

    it("a new folder at the same path (another inode): refused", async () => {
      const c = await channel();
      await rename(c.folder.host, `${c.folder.host}-moved`);
      await mkdir(c.folder.host);
      await writeFile(c.hostPath, "<testsuites/>");
      await expect(c.read()).rejects.toThrow("the report folder was replaced during the tests");
      await rm(`${c.folder.host}-moved`, { recursive: true });
    });

    it("the same inode number on another device (a mount over the folder): refused", async () => {
      const c = await channel();
      await writeFile(c.hostPath, "<testsuites/>");
      // Inode numbers are per filesystem: a tmpfs or bind mount over the nonce folder can carry the
      // inode number of the folder it hides. Only the device tells them apart.
      hooks.lstat = (target, stats) => {
        if (target === c.folder.host) stats.dev += 1;
        return stats;
      };
      await expect(c.read()).rejects.toThrow("the report folder was replaced during the tests");
      hooks.lstat = null;
      expect(await c.read()).toBe("<testsuites/>");
    });
  });

  describe("report.xml must be a regular file of at most MAX_REPORT_BYTES", () => {
    it("a symlink to a readable file: ReportRefused 'the report is a symlink' (named ReportRefused)", async () => {
      const c = await channel();
      const victim = path.join(root, "victim.xml");
      await writeFile(victim, "<testsuites/>");
      await symlink(victim, c.hostPath);
      const e = await rejection(c.read());
      expect(e).toBeInstanceOf(ReportRefused);
      // The name is what a log line or String(e) shows of the refusal.
      expect(e.name).toBe("ReportRefused");
      expect(String(e)).toBe("ReportRefused: the report is a symlink");
    });

    it("a FIFO: refused as not a regular file, without blocking on it", async () => {
      const c = await channel();
      execFileSync("mkfifo", [c.hostPath]);
      const e = await rejection(c.read());
      expect(e).toBeInstanceOf(ReportRefused);
      expect(e.message).toBe("the report is not a regular file");
    });

    it("a folder: refused as not a regular file (not an EISDIR from reading it)", async () => {
      const c = await channel();
      await mkdir(c.hostPath);
      const e = await rejection(c.read());
      expect(e).toBeInstanceOf(ReportRefused);
      expect(e.message).toBe("the report is not a regular file");
    });

    it("a unix socket, which cannot be opened: refused naming the errno (ENXIO), not called a symlink", async () => {
      const c = await channel();
      // A socket's path is limited to ~108 bytes: bind it in a short folder, then move it in.
      const short = await mkdtemp(path.join(tmpdir(), "prc-"));
      const server = createServer();
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(path.join(short, "s"), resolve);
      });
      try {
        await rename(path.join(short, "s"), c.hostPath);
        const e = await rejection(c.read());
        expect(e).toBeInstanceOf(ReportRefused);
        expect(e.message).toBe("the report cannot be opened (ENXIO)");
      } finally {
        await new Promise((resolve) => server.close(resolve));
        await rm(short, { recursive: true, force: true });
      }
    });

    it("one byte over MAX_REPORT_BYTES: refused with its size; exactly MAX_REPORT_BYTES: read whole", async () => {
      const c = await channel();
      // Sparse files: the size is what is checked, nothing is written.
      await writeFile(c.hostPath, "");
      await truncate(c.hostPath, MAX_REPORT_BYTES + 1);
      const e = await rejection(c.read());
      expect(e).toBeInstanceOf(ReportRefused);
      expect(e.message).toBe(`the report has ${MAX_REPORT_BYTES + 1} bytes (limit ${MAX_REPORT_BYTES})`);
      await truncate(c.hostPath, MAX_REPORT_BYTES);
      expect((await c.read())?.length).toBe(MAX_REPORT_BYTES);
    });

    it("a report read, and one refused after opening, leave no descriptor open on the file", async () => {
      const c = await channel();
      await writeFile(c.hostPath, "<testsuites/>");
      const file = await realpath(c.hostPath);
      expect(await c.read()).toBe("<testsuites/>");
      expect(await descriptorsOn(file)).toBe(0);
      // Refused after the open succeeded: the handle is closed on the error path too.
      await truncate(c.hostPath, MAX_REPORT_BYTES + 1);
      await expect(c.read()).rejects.toThrow(ReportRefused);
      expect(await descriptorsOn(file)).toBe(0);
    });

    it("an I/O error while reading is the host's, not the agent's: it reaches the caller unchanged, not as ReportRefused", async () => {
      const c = await channel();
      await writeFile(c.hostPath, "<testsuites/>");
      const eio = Object.assign(new Error("EIO: i/o error, read"), { code: "EIO" });
      hooks.open = (target, handle) => {
        if (target === c.hostPath) handle.readFile = (() => Promise.reject(eio)) as FileHandle["readFile"];
        return handle;
      };
      const e = await rejection(c.read());
      // swebench grades a ReportRefused as report_invalid (reward 0); a disk fault must not be one.
      expect(e).toBe(eio);
      expect(e).not.toBeInstanceOf(ReportRefused);
    });
  });

  describe("readFile: other files of the folder (guard/records, exit_status)", () => {
    it("guard/records with no guard folder: null", async () => {
      const c = await channel();
      expect(await c.readFile("guard/records")).toBeNull();
    });

    it("guard/records in a real guard folder: its text", async () => {
      const c = await channel();
      await mkdir(path.join(c.folder.host, "guard"));
      await writeFile(path.join(c.folder.host, "guard", "records"), "signed");
      expect(await c.readFile("guard/records")).toBe("signed");
    });

    it("guard planted as a symlink to a folder with records: refused, the records unread", async () => {
      const c = await channel();
      const elsewhere = path.join(root, `elsewhere-${path.basename(c.folder.host)}`);
      await mkdir(elsewhere);
      await writeFile(path.join(elsewhere, "records"), "forged");
      await symlink(elsewhere, path.join(c.folder.host, "guard"));
      const e = await rejection(c.readFile("guard/records"));
      expect(e).toBeInstanceOf(ReportRefused);
      expect(e.message).toBe("guard/records: guard is not a folder");
    });

    it("guard planted as a regular file: refused as not a folder (not an ENOTDIR open error)", async () => {
      const c = await channel();
      await writeFile(path.join(c.folder.host, "guard"), "x");
      await expect(c.readFile("guard/records")).rejects.toThrow("guard/records: guard is not a folder");
    });

    it("a symlinked file other than the report keeps its own name in the refusal", async () => {
      const c = await channel();
      await writeFile(path.join(root, "status"), "0\n");
      await symlink(path.join(root, "status"), path.join(c.folder.host, "exit_status"));
      await expect(c.readFile("exit_status")).rejects.toThrow(/^exit_status is a symlink$/);
    });

    // Today's callers read fixed names ("report.xml", "exit_status", "guard/records"): the check
    // is for a future caller passing a name on, which ".." would take out of the folder.
    it.each([
      ["a '..'", "../outside.txt"],
      ["a '.'", "./report.xml"],
      ["an empty", "guard//records"],
      ["an empty", ""],
    ])(
      "a name with %s segment (%j): SessionFailure infra, though what it resolves to exists",
      async (_, name) => {
        const c = await channel();
        // Each name resolves to something there (a file; for "" the folder itself), so only the name
        // check stands between it and a read outside the plain names of the folder.
        await writeFile(path.join(c.folder.host, "..", "outside.txt"), "outside");
        await writeFile(c.hostPath, "<testsuites/>");
        await mkdir(path.join(c.folder.host, "guard"));
        await writeFile(path.join(c.folder.host, "guard", "records"), "signed");
        const e = await rejection(c.readFile(name));
        expect(e).toBeInstanceOf(SessionFailure);
        expect((e as SessionFailure).kind).toBe("infra");
        expect(e.message).toBe(`report channel: '${name}' is not a plain relative name`);
      },
    );
  });

  it("dispose removes the folder with what the run wrote in it, and a second dispose is a no-op", async () => {
    const c = await openReportChannel(rt);
    await mkdir(path.join(c.folder.host, "guard"));
    await writeFile(path.join(c.folder.host, "guard", "records"), "signed");
    await writeFile(c.hostPath, "<testsuites/>");
    await c.dispose();
    await expect(lstat(c.folder.host)).rejects.toMatchObject({ code: "ENOENT" });
    await expect(c.dispose()).resolves.toBeUndefined();
  });
});
