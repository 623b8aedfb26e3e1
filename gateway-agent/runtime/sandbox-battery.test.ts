/**
 * The sandbox battery: what a session must not be able to do, tried for real in each runtime
 * (`local` in bubblewrap, `local` without it, podman containers), with the gateway running as root
 * (as in CI and on most GPU hosts) so its harnesses run as users of their own. Each case is one
 * test and names the protection it checks; the expectations tell apart which layer stopped the
 * attempt (a path hidden by the sandbox answers "No such file", one protected by the session's
 * uid "Permission denied"), so removing a layer fails the test of that layer.
 *
 * Bombs and hogs are small and bounded: a process cap of 64, a memory limit of 64 MiB, a few
 * seconds each.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync, realpathSync } from "node:fs";
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import http from "node:http";
import net, { type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RuntimeSpec } from "../../protocol";
import { describeWith, itWith, type OptionalTool } from "../../test/support/optional-tools";
import { ensureTestImage, PODMAN_SETTINGS } from "../testing/images";
import { CONTAINER_UIDS, DockerRuntime } from "./docker";
import { releaseLimits } from "./limits";
import { LocalRuntime } from "./local";
import { DEFAULT_SESSION_UIDS, userPids } from "./session-user";
import { DEFAULT_RUNTIME_SETTINGS, type Runtime, type RuntimeContext } from "./types";

/** The battery is about a root gateway: its sessions must not keep root. */
const ROOT: OptionalTool = {
  name: "root",
  install: "run the tests as root (CI does): the gateway then runs every session as a user of its own",
  probe: () => (process.getuid?.() === 0 ? null : "the tests do not run as root"),
};

const SECRET = `battery-secret-${randomBytes(8).toString("hex")}`;
/** Variables of the gateway's environment that must never reach a session. */
const GATEWAY_SECRETS = {
  POLAR_GATEWAY_TOKEN: SECRET,
  POLAR_TRAINER_TOKEN: SECRET,
  POLAR_ADMIN_TOKEN: SECRET,
  AWS_SECRET_ACCESS_KEY: SECRET,
};
const CAP = 64;

let root: string; // the gateway's work root
let visible: string; // a host folder the sandbox shows (outside /tmp, the home and the work root)
let engine: http.Server;
let controlPlane: http.Server;
let proxy: http.Server;
let engineSocket: net.Server;
/** A root process of the gateway's whose environment holds the secrets (as the gateway's does). */
let holder: ChildProcess;
const port = (s: http.Server) => (s.address() as AddressInfo).port;
let proxyUrl: string;

async function listen(name: string): Promise<http.Server> {
  const s = http.createServer((_req, res) => res.end(`${name}-reached`));
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  return s;
}

beforeAll(async () => {
  Object.assign(process.env, GATEWAY_SECRETS);
  root = await mkdtemp(path.join(tmpdir(), "polar-battery-"));
  const base = existsSync("/var/tmp") ? "/var/tmp" : process.cwd();
  visible = await mkdtemp(path.join(base, ".polar-battery-"));
  await chmod(visible, 0o755);
  // The gateway's files: journal and topology in the work root, a token file beside the host's.
  await mkdir(path.join(root, "journal"), { recursive: true });
  await writeFile(path.join(root, "journal", "results.jsonl"), `{"token":"${SECRET}"}\n`);
  await writeFile(path.join(root, "topology.yaml"), `token: ${SECRET}\n`);
  await writeFile(path.join(visible, "gateway.env"), `POLAR_GATEWAY_TOKEN=${SECRET}\n`, { mode: 0o600 });
  // A root-only Unix socket, as a container engine's API socket is.
  engineSocket = net.createServer((c) => c.end("engine-api-reached"));
  await new Promise<void>((r) => engineSocket.listen(path.join(visible, "engine.sock"), r));
  await chmod(path.join(visible, "engine.sock"), 0o600);
  holder = spawn("sleep", ["600"], { env: { ...process.env, ...GATEWAY_SECRETS }, stdio: "ignore" });
  engine = await listen("engine");
  controlPlane = await listen("control-plane");
  proxy = await listen("proxy");
  proxyUrl = `http://127.0.0.1:${port(proxy)}`;
}, 30_000);

afterAll(async () => {
  for (const k of Object.keys(GATEWAY_SECRETS)) delete process.env[k];
  holder?.kill("SIGKILL");
  for (const s of [engine, controlPlane, proxy]) {
    s?.closeAllConnections();
    await new Promise<void>((r) => (s ? s.close(() => r()) : r()));
  }
  await new Promise<void>((r) => (engineSocket ? engineSocket.close(() => r()) : r()));
  if (root) await rm(root, { recursive: true, force: true });
  if (visible) await rm(visible, { recursive: true, force: true });
  releaseLimits();
}, 30_000);

/** Runs `command` in `rt` with the environment a session gets; stdout and stderr. */
async function run(rt: Runtime, command: string, extra: { timeoutMs?: number; logName?: string } = {}) {
  const logName = extra.logName ?? `battery-${randomBytes(3).toString("hex")}`;
  const r = await rt.exec(command, {
    env: rt.baseEnv(),
    logName,
    capture: true,
    ...(extra.timeoutMs !== undefined ? { timeoutMs: extra.timeoutMs } : {}),
  });
  const err = await readFile(path.join(rt.logsDir, `${logName}.stderr.log`), "utf8").catch(() => "");
  return { ...r, out: r.stdout ?? "", err };
}

/**
 * A shell line per attempt: `label OK`, or `label ERR <first line of its error output>`.
 * `sh` syntax (busybox in the test image).
 */
const attempt = (label: string, command: string) =>
  `o=$( { ${command} ; } 2>&1 ) && echo "${label} OK" || echo "${label} ERR $(printf '%s' "$o" | head -n 1)"`;

/** `label` → what the attempt printed after it (`OK` or `ERR …`). */
function outcomes(out: string): Record<string, string> {
  const map: Record<string, string> = {};
  for (const line of out.split("\n")) {
    const m = /^(\S+) (OK|ERR.*)$/.exec(line);
    if (m) map[m[1] as string] = m[2] as string;
  }
  return map;
}

const HIDDEN = /No such file or directory|can't open|nonexistent|not found/i;
const DENIED = /Permission denied|Operation not permitted/i;
const READ_ONLY = /Read-only file system/i;

/** Processes whose command line holds `marker` (uid-independent: counts root's too). */
async function countMarked(marker: string): Promise<number> {
  let n = 0;
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    let cmd = "";
    try {
      cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8");
    } catch {
      continue;
    }
    if (cmd.includes(marker)) n++;
  }
  return n;
}

/**
 * A bounded fork bomb in `bomb` (killed after `ms`) while `other` (another session) must keep
 * working; returns the peak number of bomb processes, what `other` printed, and the bomb's result.
 */
async function forkBomb(bomb: Runtime, other: Runtime, ms: number, shell = "sh") {
  const marker = `polarbomb${randomBytes(4).toString("hex")}`;
  let peak = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      peak = Math.max(peak, await countMarked(marker));
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  const running = run(bomb, `${shell} -c '${marker}(){ ${marker} | ${marker} & }; ${marker}; sleep 30'`, {
    timeoutMs: ms,
    logName: "bomb",
  });
  await new Promise((r) => setTimeout(r, ms / 2));
  const alive = await run(other, "echo alive", { timeoutMs: 15_000 });
  const gateway = execFileSync("echo", ["gateway alive"], { encoding: "utf8" });
  const result = await running;
  sampling = false;
  await sampler;
  // A container's processes are killed by a command sent after the CLI: give it a moment.
  let left = await countMarked(marker);
  for (let i = 0; i < 50 && left > 0; i++) {
    await new Promise((r) => setTimeout(r, 100));
    left = await countMarked(marker);
  }
  return { peak, other: alive.out, gateway, result, left };
}

// ---------------------------------------------------------------------------------------------
// local runtime

for (const variant of ["bubblewrap", "no sandbox"] as const) {
  const sandboxed = variant === "bubblewrap";
  const needs = sandboxed ? [ROOT, "bubblewrap" as const] : [ROOT];
  describeWith(needs, `sandbox battery: local runtime, ${variant}`, { timeout: 60_000 }, () => {
    let a: LocalRuntime;
    let b: LocalRuntime;
    const ctx = (name: string, local: Partial<RuntimeContext["settings"]["local"]> = {}): RuntimeContext => ({
      workRoot: root,
      name: `${sandboxed ? "bw" : "plain"}-${name}`,
      session_id: name,
      node_id: "n",
      proxyUrl,
      settings: {
        ...DEFAULT_RUNTIME_SETTINGS,
        local: { sandbox: sandboxed ? "always" : "never", bwrapPath: "bwrap", ...local },
      },
      warn() {},
    });
    const spec = (s: Record<string, unknown> = {}) => RuntimeSpec.parse({ allow_internet: false, ...s });

    beforeAll(async () => {
      a = await LocalRuntime.create(spec(), ctx("a"));
      b = await LocalRuntime.create(spec(), ctx("b"));
      await a.start();
      await b.start();
      await writeFile(path.join(b.workspace, "secret.txt"), SECRET);
      await run(b, "chmod 600 secret.txt");
    }, 60_000);
    afterAll(async () => {
      await a?.teardown({ keep: false });
      await b?.teardown({ keep: false });
    }, 60_000);

    it("runs as an unprivileged uid of its own: not root, not the gateway's, another per session, no capabilities", async () => {
      const r = await run(
        a,
        "id -u; id -g; id -G; grep CapEff /proc/self/status; whoami 2>/dev/null || echo unnamed",
      );
      const [uid, gid, groups, caps, name] = r.out.trim().split("\n");
      expect(Number(uid)).toBe(a.user?.uid);
      expect(Number(uid)).toBeGreaterThanOrEqual(DEFAULT_SESSION_UIDS.first);
      expect(Number(gid)).toBe(Number(uid));
      expect(groups).toBe(uid); // no supplementary group (root's would be 0)
      expect(caps).toMatch(/^CapEff:\s+0+$/);
      // bubblewrap shows a passwd naming it; the host's has no entry for it.
      expect(name).toBe(sandboxed ? "polar-session" : "unnamed");
      const other = (await run(b, "id -u")).out.trim();
      expect(Number(other)).not.toBe(Number(uid));
      // Setuid binaries do not give root back (no_new_privs).
      expect((await run(a, "grep NoNewPrivs /proc/self/status")).out).toMatch(/NoNewPrivs:\s+1/);
    });

    it("writes outside the session folder fail; inside they land, owned by the session user", async () => {
      const escapePath = path.join(process.cwd(), `.polar-battery-escape-${process.pid}`);
      const r = await run(
        a,
        [
          attempt("workspace", "echo ok > inside.txt"),
          attempt("checkout", `echo x > '${escapePath}'`),
          attempt("etc", "echo x > /etc/polar-battery-escape"),
          attempt("visible", `echo x > '${visible}/escape'`),
          attempt("journal", `echo x >> '${root}/journal/results.jsonl'`),
        ].join("; "),
      );
      const o = outcomes(r.out);
      expect(o.workspace).toBe("OK");
      // bubblewrap: the host is mounted read-only; without it, the uid owns none of these.
      for (const k of ["etc", "visible"]) expect(o[k]).toMatch(sandboxed ? READ_ONLY : DENIED);
      // A checkout under /tmp is not there at all in the sandbox (its /tmp is a private tmpfs).
      const checkoutInTmp = !path
        .relative(realpathSync(tmpdir()), realpathSync(process.cwd()))
        .startsWith("..");
      expect(o.checkout).toMatch(sandboxed ? (checkoutInTmp ? HIDDEN : READ_ONLY) : DENIED);
      expect(o.journal).toMatch(sandboxed ? HIDDEN : DENIED);
      expect(existsSync(escapePath)).toBe(false);
      expect(existsSync("/etc/polar-battery-escape")).toBe(false);
      expect(existsSync(path.join(visible, "escape"))).toBe(false);
      expect(await readFile(path.join(root, "journal", "results.jsonl"), "utf8")).toBe(
        `{"token":"${SECRET}"}\n`,
      );
      expect(
        execFileSync("stat", ["-c", "%u", path.join(a.workspace, "inside.txt")], { encoding: "utf8" }).trim(),
      ).toBe(String(a.user?.uid));
    });

    it("another session's workspace cannot be read or listed", async () => {
      const r = await run(
        a,
        [
          attempt("file", `cat '${b.workspace}/secret.txt'`),
          attempt("list", `ls '${b.workspace}'`),
          attempt("sessions", `ls '${path.dirname(b.hostDir)}'`),
        ].join("; "),
      );
      const o = outcomes(r.out);
      // bubblewrap hides the work root (its sessions folder holds only this session); without
      // it, b's folder is b's uid's alone (0700) and the sessions folder cannot be listed (0711).
      for (const k of ["file", "list"]) expect(o[k]).toMatch(sandboxed ? HIDDEN : DENIED);
      if (sandboxed) {
        const listed = await run(a, `ls -A '${path.dirname(b.hostDir)}'`);
        expect(listed.out).toBe(`${path.basename(a.hostDir)}\n`);
      } else expect(o.sessions).toMatch(DENIED);
      expect(r.out).not.toContain(SECRET);
    });

    it("the gateway's files cannot be read: journal and topology in the work root, its token file", async () => {
      const r = await run(
        a,
        [
          attempt("journal", `cat '${root}/journal/results.jsonl'`),
          attempt("topology", `cat '${root}/topology.yaml'`),
          attempt("tokens", `cat '${visible}/gateway.env'`),
        ].join("; "),
      );
      const o = outcomes(r.out);
      expect(o.tokens).toMatch(DENIED); // 0600 root: the uid
      if (sandboxed) {
        expect(o.journal).toMatch(HIDDEN); // the work root is hidden
        expect(o.topology).toMatch(HIDDEN);
        expect(r.out).not.toContain(SECRET);
      } else {
        // Without a sandbox the work root must stay passable to reach the session folder: files
        // the gateway leaves world-readable there are readable (documented; see docs/gateway.md).
        expect(o.journal).toBe("OK");
      }
    });

    it("no process's environ holds the gateway's secrets; the gateway's own cannot be read", async () => {
      const r = await run(
        a,
        [
          attempt("gateway", `cat /proc/${holder.pid}/environ`),
          `for f in /proc/[0-9]*/environ; do cat "$f" 2>/dev/null; echo; done | grep -c '${SECRET}' || true`,
        ].join("; "),
      );
      const o = outcomes(r.out);
      // bubblewrap: own PID namespace, the gateway is not there; without it, another uid's.
      expect(o.gateway).toMatch(sandboxed ? HIDDEN : DENIED);
      expect(r.out.trim().split("\n").at(-1)).toBe("0");
    });

    it("the gateway's secrets are not in the session's environment", async () => {
      const r = await run(a, "env");
      expect(r.out).not.toContain(SECRET);
      for (const k of Object.keys(GATEWAY_SECRETS)) expect(r.out).not.toContain(`${k}=`);
      expect(r.out).toContain(`HOME=${path.join(a.hostDir, "home")}`);
    });

    it("a root-only Unix socket on the host (a container engine's API) cannot be reached", async () => {
      const r = await run(
        a,
        attempt(
          "socket",
          `node -e 'require("net").connect(process.argv[1]).on("data",d=>{console.log(String(d));process.exit(0)}).on("error",e=>{console.error(e.code);process.exit(1)})' '${visible}/engine.sock'`,
        ),
      );
      expect(outcomes(r.out).socket).toMatch(/ERR EACCES/);
    });

    if (sandboxed) {
      it("allow_internet false: host loopback (engine, control plane) and other addresses unreachable; the proxy answers", async () => {
        const probe = (url: string) =>
          `node -e 'fetch(process.argv[1],{signal:AbortSignal.timeout(5000)}).then(r=>r.text()).then(t=>console.log(t),e=>console.log("FAIL",e.cause?.code??e.name))' '${url}'`;
        const r = await run(
          a,
          [
            probe(`${proxyUrl}/`),
            probe(`http://127.0.0.1:${port(engine)}/`),
            probe(`http://127.0.0.1:${port(controlPlane)}/`),
            probe(`http://localhost:${port(engine)}/`),
            probe("http://192.0.2.1/"),
          ].join("; "),
        );
        const lines = r.out.trim().split("\n");
        expect(lines[0]).toBe("proxy-reached");
        for (const line of lines.slice(1)) expect(line).toMatch(/^FAIL /);
        expect(lines).toHaveLength(5);
      });
    }

    it(`a fork bomb stops at the session's process cap (${CAP}, the uid's hard RLIMIT_NPROC, no cgroup); the gateway and another session live on`, async () => {
      const bomb = await LocalRuntime.create(
        spec({ allow_internet: true }),
        ctx("bomb", { maxPids: CAP, cgroups: false }),
      );
      const other = await LocalRuntime.create(
        spec({ allow_internet: true }),
        ctx("bomb-other", { maxPids: CAP, cgroups: false }),
      );
      try {
        await bomb.start();
        await other.start();
        const r = await forkBomb(bomb, other, 3_000, "bash");
        // The cap counts the session user's processes; bwrap's own two (root) carry the marker too.
        expect(r.peak).toBeLessThanOrEqual(CAP + 3);
        expect(r.other).toBe("alive\n");
        expect(r.gateway).toBe("gateway alive\n");
        expect(r.result.timedOut || r.result.exitCode !== 0).toBe(true);
        expect(r.result.err).toMatch(/Resource temporarily unavailable/); // it hit the cap
        expect(r.left).toBe(0);
        expect(await userPids(bomb.user?.uid ?? -1)).toEqual([]);
      } finally {
        await bomb.teardown({ keep: false });
        await other.teardown({ keep: false });
      }
    });

    itWith(
      ["cgroups"],
      "a memory hog is killed at runtime.memory_mb; the gateway and another session live on",
      async () => {
        const hog = await LocalRuntime.create(spec({ allow_internet: true, memory_mb: 64 }), ctx("hog"));
        try {
          await hog.start();
          const r = await run(
            hog,
            `node -e 'const a=[];for(let i=0;i<32;i++){a.push(Buffer.alloc(16<<20,1))}console.log("survived")'`,
            { timeoutMs: 30_000 },
          );
          expect(r.out).not.toContain("survived");
          expect(r.limitHit).toMatch(/memory limit of 64 MiB/);
          expect((await run(b, "echo alive")).out).toBe("alive\n");
        } finally {
          await hog.teardown({ keep: false });
        }
      },
    );

    it("uploads and working folders never follow a symlink the session planted out of its folder", async () => {
      // A host folder only root may write: the gateway writing through the link would land there.
      const target = await mkdtemp(path.join(visible, "target-"));
      await chmod(target, 0o755);
      const src = path.join(root, "upload-src.txt");
      await writeFile(src, "payload");
      await run(a, `ln -sfn '${target}' link`);
      await expect(a.uploadFile(src, "link/planted.txt")).rejects.toThrow(/cannot place/);
      const srcDir = await mkdtemp(path.join(visible, "src-"));
      await writeFile(path.join(srcDir, "f.txt"), "payload");
      await expect(a.uploadDir(srcDir, "link/tree")).rejects.toThrow(/cannot place/);
      await expect(a.exec("true", { env: a.baseEnv(), logName: "cwd", cwd: "link/sub" })).rejects.toThrow(
        /outside the session folder/,
      );
      expect(await readdir(target)).toEqual([]);
      // The same uploads without the link land, the session user's.
      await a.uploadFile(src, "in/planted.txt");
      expect(await readFile(path.join(a.workspace, "in", "planted.txt"), "utf8")).toBe("payload");
    });
  });
}

// ---------------------------------------------------------------------------------------------
// containers (podman, rootful: every container's users mapped to unprivileged host uids)

describeWith([ROOT, "podman"], "sandbox battery: podman containers", { timeout: 180_000 }, () => {
  let image: string;
  let nodeDir: string;
  let a: DockerRuntime;
  let b: DockerRuntime;
  const ctx = (name: string, pidsLimit = 4096): RuntimeContext => ({
    workRoot: root,
    name: `ctr-${name}`,
    session_id: name,
    node_id: "n",
    proxyUrl,
    settings: { ...DEFAULT_RUNTIME_SETTINGS, docker: { ...PODMAN_SETTINGS, pidsLimit } },
    warn() {},
  });
  /** The test image with the host's node (and /usr) mounted read-only: the proxy forwarder. */
  const spec = (s: Record<string, unknown> = {}) =>
    RuntimeSpec.parse({
      backend: "docker",
      image,
      allow_internet: false,
      kwargs: { shell: "sh" },
      env: { PATH: "/polar-bin:/bin:/usr/bin" },
      volumes: ["/usr:/usr:ro", `${nodeDir}:/polar-bin:ro`],
      ...s,
    });

  beforeAll(async () => {
    image = ensureTestImage();
    nodeDir = await mkdtemp(path.join(root, "node-"));
    await chmod(nodeDir, 0o755);
    await symlink(realpathSync(process.execPath), path.join(nodeDir, "node"));
    a = await DockerRuntime.create(spec(), ctx("a"));
    b = await DockerRuntime.create(spec({ allow_internet: true }), ctx("b"));
    await Promise.all([a.start(), b.start()]);
    await run(b, `echo ${SECRET} > /polar/session/workspace/secret.txt`);
  }, 180_000);
  afterAll(async () => {
    await Promise.all([a?.teardown({ keep: false }), b?.teardown({ keep: false })]);
  }, 120_000);

  it("the container's root is not the host's: its users map to unprivileged host uids", async () => {
    const r = await run(a, "id -u; head -n 1 /proc/self/uid_map");
    const [uid, map] = r.out.trim().split("\n");
    expect(uid).toBe("0");
    expect(map?.trim().split(/\s+/)).toEqual([
      "0",
      String(CONTAINER_UIDS.first),
      String(CONTAINER_UIDS.count),
    ]);
    // Seen from the host, what runs in the containers (their forwarder, their init) runs as that uid.
    expect((await userPids(CONTAINER_UIDS.first)).length).toBeGreaterThan(0);
  });

  it("writes outside the container land nowhere on the host: the gateway's mounts are read-only", async () => {
    const r = await run(
      a,
      [
        attempt("workspace", "echo ok > /polar/session/workspace/inside.txt"),
        attempt("forwarders", "echo x > /polar/forwarders/escape"),
        attempt("proxydir", "echo x > /polar/proxy/escape"),
        attempt("usr", "echo x > /usr/polar-battery-escape"),
      ].join("; "),
    );
    const o = outcomes(r.out);
    expect(o.workspace).toBe("OK");
    for (const k of ["forwarders", "proxydir", "usr"]) expect(o[k]).toMatch(READ_ONLY);
    expect(existsSync("/usr/polar-battery-escape")).toBe(false);
    expect(
      execFileSync("stat", ["-c", "%u", path.join(a.hostDir, "workspace", "inside.txt")], {
        encoding: "utf8",
      }).trim(),
    ).toBe(String(CONTAINER_UIDS.first));
  });

  it("another session's workspace, the gateway's files and the host's engine socket are not in the container", async () => {
    const r = await run(
      a,
      [
        attempt("other", `cat '${b.hostDir}/workspace/secret.txt'`),
        attempt("journal", `cat '${root}/journal/results.jsonl'`),
        attempt("tokens", `cat '${visible}/gateway.env'`),
        attempt("socket", `ls '${visible}/engine.sock'`),
      ].join("; "),
    );
    const o = outcomes(r.out);
    for (const k of ["other", "journal", "tokens", "socket"]) expect(o[k]).toMatch(HIDDEN);
    expect(r.out).not.toContain(SECRET);
  });

  it("no process's environ holds the gateway's secrets, nor does the container's environment", async () => {
    const r = await run(
      a,
      [
        `for f in /proc/[0-9]*/environ; do cat "$f" 2>/dev/null; echo; done | grep -c '${SECRET}' || true`,
        attempt("gateway", `cat /proc/${holder.pid}/environ | grep -c '${SECRET}'`),
        "env",
      ].join("; "),
    );
    expect(r.out.split("\n")[0]).toBe("0");
    expect(outcomes(r.out).gateway).toMatch(/^ERR/);
    expect(r.out).not.toContain(SECRET);
    for (const k of Object.keys(GATEWAY_SECRETS)) expect(r.out).not.toContain(`${k}=`);
  });

  it("allow_internet false: host loopback (engine, control plane) and other addresses unreachable; the proxy answers", async () => {
    const probe = (url: string) =>
      `node -e 'fetch(process.argv[1],{signal:AbortSignal.timeout(5000)}).then(r=>r.text()).then(t=>console.log(t),e=>console.log("FAIL",e.cause?.code??e.name))' '${url}'`;
    const r = await run(
      a,
      [
        probe(`${proxyUrl}/`),
        probe(`http://127.0.0.1:${port(engine)}/`),
        probe(`http://127.0.0.1:${port(controlPlane)}/`),
        probe("http://192.0.2.1/"),
      ].join("; "),
    );
    const lines = r.out.trim().split("\n");
    expect(lines[0]).toBe("proxy-reached");
    for (const line of lines.slice(1)) expect(line).toMatch(/^FAIL /);
    expect(lines).toHaveLength(4);
  });

  it(`a fork bomb stops at --pids-limit (${CAP}); the gateway and another container live on`, async () => {
    const bomb = await DockerRuntime.create(spec({ allow_internet: true, volumes: [] }), ctx("bomb", CAP));
    try {
      await bomb.start();
      const r = await forkBomb(bomb, b, 6_000);
      expect(r.result.err).toMatch(/can't fork|Resource temporarily unavailable/); // it hit the cap
      // The container's processes, plus the podman CLI on the host, whose command line holds it too.
      expect(r.peak).toBeLessThanOrEqual(CAP + 2);
      expect(r.other).toBe("alive\n");
      expect(r.gateway).toBe("gateway alive\n");
      expect(r.left).toBe(0);
    } finally {
      await bomb.teardown({ keep: false });
    }
  });

  it("a memory hog is killed at runtime.memory_mb; another container lives on", async () => {
    const hog = await DockerRuntime.create(
      spec({ allow_internet: true, volumes: [], memory_mb: 64 }),
      ctx("hog"),
    );
    try {
      await hog.start();
      const strayMarker = path.join(process.cwd(), "oom");
      const markerBefore = existsSync(strayMarker);
      // Doubles a string up to 128 MiB (twice that while copying): far past 64 MiB.
      const r = await run(hog, `awk 'BEGIN{s="x"; for(i=0;i<27;i++) s=s s; print "survived", length(s)}'`, {
        timeoutMs: 60_000,
      });
      expect(r.out).not.toContain("survived");
      expect(r.exitCode).not.toBe(0);
      // podman's conmon marks the OOM kill with a file in its working folder: the runtime's own
      // folder, where the gateway reads it to name the limit, never the gateway process's folder.
      expect(r.limitHit).toMatch(/^memory limit of 64 MiB \(runtime\.memory_mb\) hit/);
      expect(existsSync(strayMarker)).toBe(markerBefore);
      expect((await run(b, "echo alive")).out).toBe("alive\n");
    } finally {
      await hog.teardown({ keep: false });
    }
  });
});

describe("sandbox battery: the gateway's own identity", () => {
  it("session uids and container uids are disjoint ranges below 2^31", () => {
    expect(DEFAULT_SESSION_UIDS.first + DEFAULT_SESSION_UIDS.count).toBeLessThanOrEqual(CONTAINER_UIDS.first);
    expect(CONTAINER_UIDS.first + CONTAINER_UIDS.count).toBeLessThan(2 ** 31);
  });
});
