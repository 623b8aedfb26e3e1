import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { PrepareAction, RuntimeSpec } from "../../protocol";
import { describeWith } from "../../test/support/optional-tools";
import { SessionFailure } from "../errors";
import { LocalRuntime, PRIVATE_DIR } from "./local";
import { runPrepare } from "./prepare";
import { switchesUsers } from "./session-user";
import { DEFAULT_RUNTIME_SETTINGS, type RuntimeContext } from "./types";

let root: string;
const warnings: string[] = [];
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "polar-rt-test-"));
  warnings.length = 0;
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

const action = (a: unknown) => PrepareAction.parse(a);
const spec = (s: Record<string, unknown> = {}) => RuntimeSpec.parse(s);
/** Live (not zombie) processes whose command line is `sleep ARG`, from the host's /proc. */
function sleepsWith(arg: string): number[] {
  const found: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readFileSync(`/proc/${name}/cmdline`, "utf8") !== `sleep\0${arg}\0`) continue;
      if (/^\S+ \(.*\) Z/.test(readFileSync(`/proc/${name}/stat`, "utf8"))) continue;
      found.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

function ctx(
  name: string,
  sandbox: "auto" | "never" | "always" = "never",
  proxyUrl = "http://127.0.0.1:9",
): RuntimeContext {
  return {
    workRoot: root,
    name,
    session_id: name,
    node_id: "n",
    proxyUrl,
    settings: { ...DEFAULT_RUNTIME_SETTINGS, local: { sandbox, bwrapPath: "bwrap" } },
    warn: (m) => warnings.push(m),
  };
}
// HOME points at an empty folder so `bash -l` reads no profile of the machine running the tests.
const PATH_ENV = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: tmpdir() };

describe("LocalRuntime (plain processes)", () => {
  it("creates the session folder, runs commands in the workspace with the given env, logs output", async () => {
    const rt = await LocalRuntime.create(spec(), ctx("b.t.0"));
    await rt.start();
    expect(rt.workdir).toBe(path.join(root, "sessions", "b.t.0", "workspace"));
    const r = await rt.exec('echo "$GREETING from $(pwd)"; echo oops >&2; exit 4', {
      env: { ...PATH_ENV, GREETING: "hello" },
      logName: "cmd",
      capture: true,
    });
    expect(r).toMatchObject({ exitCode: 4, interrupted: false, stdout: `hello from ${rt.workdir}\n` });
    expect(await readFile(path.join(rt.logsDir, "cmd.stdout.log"), "utf8")).toBe(
      `hello from ${rt.workdir}\n`,
    );
    expect(await readFile(path.join(rt.logsDir, "cmd.stderr.log"), "utf8")).toBe("oops\n");
    await rt.teardown({ keep: false });
    expect(existsSync(rt.hostDir)).toBe(false);
  });

  it("runs prepare actions: uploads, exec with env, retries up to max_attempts", async () => {
    const src = path.join(root, "src");
    await mkdir(path.join(src, "dir"), { recursive: true });
    await writeFile(path.join(src, "file.txt"), "payload");
    await writeFile(path.join(src, "dir", "inner.txt"), "inner");
    const rt = await LocalRuntime.create(spec(), ctx("s1"));
    await runPrepare(
      rt,
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
      PATH_ENV,
      undefined,
    );
    expect(await readFile(path.join(rt.workdir, "a/b/file.txt"), "utf8")).toBe("payload");
    expect(await readFile(path.join(rt.workdir, "copied/inner.txt"), "utf8")).toBe("inner");
    expect(await readFile(path.join(rt.workdir, "out.txt"), "utf8")).toBe("from-env\n");
    await rt.teardown({ keep: true });
    expect(existsSync(rt.workdir)).toBe(true);
  });

  it("refuses upload targets outside the session folder and names the failing action", async () => {
    const file = path.join(root, "f.txt");
    await writeFile(file, "x");
    const rt = await LocalRuntime.create(spec(), ctx("s2"));
    for (const target of ["../../escape.txt", "/etc/escape.txt", "a/../../../escape.txt"]) {
      const run = runPrepare(
        rt,
        [action({ type: "upload_file", source: file, target })],
        PATH_ENV,
        undefined,
      );
      await expect(run).rejects.toBeInstanceOf(SessionFailure);
      await expect(run).rejects.toThrow(/prepare\[0\] \(upload_file\).*outside the session folder/);
    }
    expect(existsSync(path.join(root, "sessions", "escape.txt"))).toBe(false);
  });

  it("reports a failing exec with its exit code as an infra failure", async () => {
    const rt = await LocalRuntime.create(spec(), ctx("s3"));
    await expect(
      runPrepare(rt, [action({ type: "exec", command: "exit 7" })], PATH_ENV, undefined),
    ).rejects.toMatchObject({
      kind: "infra",
      message: expect.stringContaining("exited with code 7"),
    });
  });

  it("kills the whole process group on abort and on timeout, the background child too", async () => {
    const rt = await LocalRuntime.create(spec(), ctx("s4"));
    // Durations no other process uses, so the host's /proc tells these sleeps apart (a sandbox's
    // PID namespace is visible from the host).
    const abortArg = `30.${process.pid}1`;
    const timeoutArg = `30.${process.pid}2`;
    const ac = new AbortController();
    const aborted = rt.exec(`sleep ${abortArg} & sleep ${abortArg}; wait`, {
      env: PATH_ENV,
      signal: ac.signal,
      logName: "k",
    });
    // Both sleeps, the background one included, run before the abort.
    await vi.waitFor(() => expect(sleepsWith(abortArg)).toHaveLength(2), { timeout: 15_000, interval: 50 });
    ac.abort(new Error("stop"));
    expect(await aborted).toMatchObject({ interrupted: true, exitCode: null });
    await vi.waitFor(() => expect(sleepsWith(abortArg)).toEqual([]), { timeout: 10_000, interval: 50 });

    const t = await rt.exec(`sleep ${timeoutArg} & sleep ${timeoutArg}; wait`, {
      env: PATH_ENV,
      timeoutMs: 1_000,
      logName: "t",
    });
    expect(t).toMatchObject({ timedOut: true, interrupted: false, exitCode: null });
    await vi.waitFor(() => expect(sleepsWith(timeoutArg)).toEqual([]), { timeout: 10_000, interval: 50 });
  });

  it("refuses a session id that is not a plain folder name", async () => {
    await expect(LocalRuntime.create(spec(), ctx("../evil"))).rejects.toThrow(/not a plain folder name/);
  });

  it("fails loudly when the sandbox is required but bwrap is missing; in auto mode warns and runs without it", async () => {
    const noBwrap = () => warnings.filter((w) => w.startsWith("BUBBLEWRAP NOT FOUND"));
    const c = ctx("s5", "always");
    c.settings = { ...c.settings, local: { sandbox: "always", bwrapPath: "/nonexistent/bwrap" } };
    await expect(LocalRuntime.create(spec(), c)).rejects.toThrow(/bubblewrap.*required/);
    expect(noBwrap()).toEqual([]); // refused, not warned
    const auto = ctx("s6", "auto");
    auto.settings = { ...auto.settings, local: { sandbox: "auto", bwrapPath: "/nonexistent/bwrap" } };
    const rt = await LocalRuntime.create(spec(), auto);
    // Said once per gateway process; no earlier test in this file runs auto mode without bwrap.
    expect(noBwrap()).toHaveLength(1);
    expect(noBwrap()[0]).toContain("WITHOUT a sandbox");
    expect(rt.sandboxed).toBe(false);
    expect(await rt.exec("echo unsandboxed", { env: PATH_ENV, logName: "a" })).toMatchObject({ exitCode: 0 });
  });
});

describeWith(["bubblewrap"], "LocalRuntime inside bubblewrap", () => {
  let server: http.Server;
  let serverUrl: string;
  beforeEach(async () => {
    server = http.createServer((_req, res) => res.end("proxy-reached"));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    serverUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterEach(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });

  it("keeps writes inside the session folder and hides other sessions and the journal", async () => {
    await mkdir(path.join(root, "journal"), { recursive: true });
    await writeFile(path.join(root, "journal", "secret.json"), "other results");
    const outside = path.join(process.cwd(), `polar-escape-${process.pid}.txt`);
    const rt = await LocalRuntime.create(spec({ allow_internet: true }), ctx("box1", "auto", serverUrl));
    expect(rt.sandboxed).toBe(true);
    await rt.start();
    const r = await rt.exec(
      [
        "echo ok > inside.txt",
        `echo x > '${outside}' && echo ESCAPED-CWD`,
        "echo x > /etc/polar-escape && echo ESCAPED-ETC",
        `cat '${path.join(root, "journal", "secret.json")}' && echo SAW-JOURNAL`,
        "ls /proc | grep -E '^[0-9]+$' | wc -l",
      ].join("; "),
      { env: PATH_ENV, logName: "escape", capture: true },
    );
    expect(r.stdout).not.toMatch(/ESCAPED|SAW-JOURNAL/);
    // Own PID namespace: only a handful of processes (bwrap's init, bash, ls, grep, wc).
    expect(Number(r.stdout?.trim().split("\n").at(-1))).toBeLessThan(10);
    expect(existsSync(outside)).toBe(false);
    expect(existsSync("/etc/polar-escape")).toBe(false);
    expect(await readFile(path.join(rt.workdir, "inside.txt"), "utf8")).toBe("ok\n");
    await rt.teardown({ keep: false });
  });

  it("with allow_internet false: no TCP to the host, but the proxy port still answers through the bridge", async () => {
    const other = http.createServer((_req, res) => res.end("host-service"));
    await new Promise<void>((r) => other.listen(0, "127.0.0.1", r));
    const otherPort = (other.address() as AddressInfo).port;
    try {
      const rt = await LocalRuntime.create(spec({ allow_internet: false }), ctx("box2", "auto", serverUrl));
      await rt.start();
      const probe = (url: string) =>
        `node -e 'fetch(${JSON.stringify(url)}).then(r=>r.text()).then(t=>console.log("GOT",t),e=>console.log("FAIL",e.cause?.code??e.message))'`;
      const r = await rt.exec(`${probe(`http://127.0.0.1:${otherPort}/`)}; ${probe(`${serverUrl}/`)}`, {
        env: PATH_ENV,
        logName: "net",
        capture: true,
      });
      const lines = (r.stdout ?? "").trim().split("\n");
      expect(lines[0]).toMatch(/^FAIL/);
      expect(lines[1]).toBe("GOT proxy-reached");
      await rt.teardown({ keep: false });
    } finally {
      other.closeAllConnections();
      await new Promise<void>((r) => other.close(() => r()));
    }
  });
});

describeWith(
  [
    {
      name: "session users",
      install: "run the tests as root with the session uids mapped (CI does)",
      probe: () => (switchesUsers() ? null : "this gateway would not switch to a session user"),
    },
  ],
  "LocalRuntime with a session user of its own",
  () => {
    it("keeps the gateway-only files under the work root's private folder, 0700, gone with the session", async () => {
      const rt = await LocalRuntime.create(spec(), ctx("own1"));
      await rt.start();
      expect(rt.user?.uid).toBeGreaterThan(0);
      const privateRoot = path.join(root, PRIVATE_DIR);
      const [mine] = readdirSync(privateRoot);
      expect(mine).toMatch(/^own1-/);
      expect(readdirSync(path.join(privateRoot, mine!)).sort()).toEqual(
        expect.arrayContaining(["group", "passwd"]),
      );
      expect(statSync(privateRoot).mode & 0o777).toBe(0o700);
      expect(statSync(path.join(privateRoot, mine!)).mode & 0o777).toBe(0o700);
      // Not reachable by the session's own user.
      const r = await rt.exec(`cat '${path.join(privateRoot, mine!, "passwd")}'`, {
        env: PATH_ENV,
        logName: "peek",
        capture: true,
      });
      expect(r.exitCode).not.toBe(0);
      await rt.teardown({ keep: false });
      expect(readdirSync(privateRoot)).toEqual([]);
    });
  },
);
