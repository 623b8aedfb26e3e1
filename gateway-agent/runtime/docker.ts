/**
 * The `docker` runtime through a docker-compatible CLI (`docker` or `podman`): one long-lived
 * container per session (`create … sleep infinity`, `start`), commands by `exec`, uploads by `cp`
 * (or plain host copies under the session mount), `rm -f` on teardown. The host session folder is
 * bind-mounted at `/polar/session`.
 *
 * With `allow_internet: false` the container gets `--network none` and reaches the proxy through
 * a forwarder as its PID 1 (see `container-bridge.ts`) instead of `sleep infinity`.
 *
 * Every container gets `--pids-limit` (a fork bomb stops there). When the gateway runs as root
 * and the CLI is podman, the container runs in a user namespace: its root (and every user of the
 * image) is mapped to unprivileged host uids ({@link CONTAINER_UIDS}, one shared range so image
 * layers are mapped once), unless `create_args` choose a user namespace themselves. The session
 * folder then belongs to the container's root on the host, and what the gateway writes into it is
 * handed over before each command, as for local session users. Docker cannot map per container
 * (`dockerd --userns-remap` does it daemon-wide): without it a root gateway warns once that the
 * containers' root is the host's.
 *
 * Uploads under the session mount never follow what the container planted: they are staged in a
 * fresh host folder and moved into place by a command inside the container.
 *
 * @module
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { cp, mkdir, mkdtemp, rm, stat } from "node:fs/promises";
import path from "node:path";
import { execa } from "execa";
import { quote } from "shell-quote";
import type { RuntimeSpec } from "../../protocol";
import { SessionFailure } from "../errors";
import {
  type ContainerBridge,
  forwarderCreateArgs,
  forwarderScript,
  startContainerBridge,
  waitForForwarder,
} from "./container-bridge";
import { SESSION_MAX_PIDS } from "./limits";
import { createSessionDir, PRIVATE_DIR } from "./local-setup";
import { hostPathOf } from "./prepare";
import { runProcess } from "./process";
import { DEFAULT_SESSION_UIDS, handOver, switchesUsers, type UidRange } from "./session-user";
import { diskUsage } from "./storage";
import type { CommandResult, ExecOptions, Runtime, RuntimeContext } from "./types";

/** Where the host session folder appears inside a container. */
export const CONTAINER_SESSION_PATH = "/polar/session";
/** Longest a container create+start may take (image unpack on a cold host included). */
export const CONTAINER_START_TIMEOUT_MS = 600_000;
/** Host uids the users of a rootful podman container are mapped to (container uid 0 = `first`). */
export const CONTAINER_UIDS: UidRange = {
  first: DEFAULT_SESSION_UIDS.first + DEFAULT_SESSION_UIDS.count,
  count: 65_536,
};

const cliKinds = new Map<string, "podman" | "docker">();
/** `podman` or `docker`, from `<cli> --version` (once per CLI). */
export function cliKind(cli: string): "podman" | "docker" {
  let kind = cliKinds.get(cli);
  if (!kind) {
    let out = "";
    try {
      out = execFileSync(cli, ["--version"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
    } catch {
      // Missing CLI: create fails later and says so.
    }
    kind = /podman/i.test(out) ? "podman" : "docker";
    cliKinds.set(cli, kind);
  }
  return kind;
}

/**
 * The user-namespace flags for a container (see the module notes): `--uidmap`/`--gidmap` onto
 * {@link CONTAINER_UIDS} for rootful podman unless `createArgs` pick a namespace themselves;
 * none otherwise.
 *
 * @example
 * ```ts
 * userNamespaceArgs("podman", [], true); // ["--uidmap", "0:2100065536:65536", "--gidmap", …]
 * ```
 */
export function userNamespaceArgs(kind: "podman" | "docker", createArgs: string[], root: boolean): string[] {
  if (kind !== "podman" || !root) return [];
  if (createArgs.some((a) => /^--(userns|uidmap|gidmap|subuidname|subgidname)(=|$)/.test(a))) return [];
  const map = `0:${CONTAINER_UIDS.first}:${CONTAINER_UIDS.count}`;
  return ["--uidmap", map, "--gidmap", map];
}

let warnedHostRoot = false;

/** Shell used for commands: `kwargs.shell` (`sh` for images without bash), default `bash -lc`. */
export function shellOf(spec: RuntimeSpec): string[] {
  const shell = spec.kwargs.shell;
  if (shell === undefined) return ["bash", "-lc"];
  if (typeof shell !== "string" || shell.length === 0)
    throw new SessionFailure("configuration", "runtime.kwargs.shell: must be a non-empty string");
  return shell === "bash" ? ["bash", "-lc"] : [shell, "-c"];
}

/**
 * The `create` argv (without the CLI and its global flags). With `forwarder` (no internet) the
 * proxy socket folder and forwarder scripts are mounted and the forwarder is the main process.
 *
 * @example
 * ```ts
 * dockerCreateArgs(spec, { name: "polar-x", hostDir: "/w/sessions/x", labels: {}, createArgs: [] });
 * ```
 */
export function dockerCreateArgs(
  spec: RuntimeSpec,
  o: {
    name: string;
    hostDir: string;
    labels: Record<string, string>;
    createArgs: string[];
    forwarder?: { hostDir: string; port: number };
    /** `--pids-limit` (before `createArgs`, which may override it). */
    pidsLimit?: number;
    /** User-namespace flags ({@link userNamespaceArgs}). */
    userns?: string[];
  },
): string[] {
  if (!spec.image)
    throw new SessionFailure("configuration", "runtime.image: required for the docker backend");
  const args = ["create", "--name", o.name];
  for (const [k, v] of Object.entries(o.labels)) args.push("--label", `${k}=${v}`);
  if (o.pidsLimit !== undefined) args.push("--pids-limit", String(o.pidsLimit));
  args.push(...(o.userns ?? []));
  args.push(...o.createArgs);
  args.push("-v", `${o.hostDir}:${CONTAINER_SESSION_PATH}`);
  // No internet means no network at all (upstream: `--network none` when allow_internet=false).
  args.push("--network", spec.allow_internet ? spec.network : "none");
  if (o.forwarder && !spec.allow_internet) args.push(...forwarderCreateArgs(o.forwarder));
  if (spec.cpus !== undefined) args.push("--cpus", String(spec.cpus));
  if (spec.memory_mb !== undefined) args.push("--memory", `${spec.memory_mb}m`);
  if (spec.gpus > 0) args.push("--gpus", String(spec.gpus));
  for (const volume of [...spec.volumes, ...stringList(spec.kwargs.volumes, "runtime.kwargs.volumes")]) {
    args.push("-v", volume);
  }
  // No `-w` here: the workdir usually comes from a prepare step; each `exec` passes its own.
  for (const [k, v] of Object.entries(spec.env)) args.push("-e", `${k}=${v}`);
  if (o.forwarder && !spec.allow_internet) {
    // `sh` whatever kwargs.shell says: the probe is POSIX and bash may be missing.
    args.push(spec.image, "sh", "-c", forwarderScript(o.forwarder.port));
  } else {
    args.push(spec.image, "sleep", "infinity");
  }
  return args;
}

function stringList(value: unknown, field: string): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || value.some((v) => typeof v !== "string"))
    throw new SessionFailure("configuration", `${field}: must be a list of strings`);
  return value as string[];
}

/**
 * The `exec` argv (without the CLI and its global flags).
 *
 * @example
 * ```ts
 * dockerExecArgs("polar-x", ["bash", "-lc"], "make", "/polar/session/workspace", { A: "1" });
 * ```
 */
export function dockerExecArgs(
  container: string,
  shell: string[],
  command: string,
  cwd: string,
  env: Record<string, string>,
): string[] {
  return execArgv({ cwd: "-w", env: "-e" }, container, shell, command, cwd, env);
}

/**
 * An `exec` argv in a container CLI's own spelling of the working-folder and environment flags:
 * `exec <cwd flag> <cwd> (<env flag> K=V)… <target> <shell…> <command>`.
 *
 * @example
 * ```ts
 * execArgv({ cwd: "--pwd", env: "--env" }, "instance://polar-x", ["bash", "-lc"], "make", "/w", {});
 * ```
 */
export function execArgv(
  flags: { cwd: string; env: string },
  target: string,
  shell: string[],
  command: string,
  cwd: string,
  env: Record<string, string>,
): string[] {
  const args = ["exec", flags.cwd, cwd];
  for (const [k, v] of Object.entries(env)) args.push(flags.env, `${k}=${v}`);
  return [...args, target, ...shell, command];
}

/**
 * A session container.
 *
 * @example
 * ```ts
 * const rt = await DockerRuntime.create(spec, ctx);
 * await rt.start();
 * await rt.exec("pytest -q", { env: {}, logName: "eval" });
 * await rt.teardown({ keep: false });
 * ```
 */
export class DockerRuntime implements Runtime {
  readonly backend = "docker";
  readonly logsDir: string;
  readonly sessionPath = CONTAINER_SESSION_PATH;
  readonly container: string;
  private started = false;
  private bridge: ContainerBridge | null = null;
  /** The forwarder running as PID 1 (`node`, `python3`, `socat`), null with internet. */
  forwarder: string | null = null;
  /** Host uid/gid of the container's root when it runs in a user namespace of ours. */
  readonly user: { uid: number; gid: number } | null;
  private readonly userns: string[];

  private constructor(
    readonly hostDir: string,
    /**
     * The working folder of every container CLI call, the gateway's alone (under the work root's
     * `private/`, removed at teardown). The `conmon` that podman starts to watch a container
     * inherits it, and writes an empty file named `oom` into it whenever the container's cgroup
     * OOM-kills a process: run from the gateway's own folder, that file landed (and stayed) there.
     */
    private readonly cliDir: string,
    private readonly spec: RuntimeSpec,
    private readonly ctx: RuntimeContext,
  ) {
    this.logsDir = path.join(hostDir, "logs");
    const safe = ctx.name.replace(/[^A-Za-z0-9_.-]/g, "_").slice(0, 80);
    this.container = `polar-${safe}-${randomBytes(3).toString("hex")}`;
    const { cli, createArgs } = ctx.settings.docker;
    this.userns = userNamespaceArgs(cliKind(cli), createArgs, switchesUsers(CONTAINER_UIDS));
    this.user = this.userns.length > 0 ? { uid: CONTAINER_UIDS.first, gid: CONTAINER_UIDS.first } : null;
  }

  static async create(spec: RuntimeSpec, ctx: RuntimeContext): Promise<DockerRuntime> {
    shellOf(spec); // validate early
    if (!spec.image)
      throw new SessionFailure("configuration", "runtime.image: required for the docker backend");
    const hostDir = await createSessionDir(ctx.workRoot, ctx.name);
    const privateRoot = path.resolve(ctx.workRoot, PRIVATE_DIR);
    await mkdir(privateRoot, { recursive: true });
    const cliDir = await mkdtemp(path.join(privateRoot, `${path.basename(hostDir)}-cli-`));
    return new DockerRuntime(hostDir, cliDir, spec, ctx);
  }

  get workdir(): string {
    return this.spec.workdir ?? `${CONTAINER_SESSION_PATH}/workspace`;
  }

  baseEnv(): Record<string, string> {
    return {};
  }

  /** Runs the CLI with the gateway's allow-listed environment (never the gateway's secrets). */
  private cli(args: string[], opts: { timeoutMs?: number; signal?: AbortSignal } = {}) {
    const { cli, globalArgs } = this.ctx.settings.docker;
    return execa(cli, [...globalArgs, ...args], {
      cwd: this.cliDir,
      reject: false,
      timeout: opts.timeoutMs,
      cancelSignal: opts.signal,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
      extendEnv: false,
      stdin: "ignore",
    });
  }

  private async must(args: string[], what: string, opts: { timeoutMs?: number; signal?: AbortSignal } = {}) {
    const r = await this.cli(args, opts);
    if (opts.signal?.aborted) throw opts.signal.reason;
    if (r.exitCode !== 0) {
      const detail = `${r.stderr || r.stdout || r.message}`.trim().slice(0, 800);
      throw new SessionFailure("infra", `${this.ctx.settings.docker.cli} ${what} failed: ${detail}`);
    }
    return r;
  }

  /** Warns once when a root gateway's docker engine does not remap the containers' root. */
  private async warnIfHostRoot(): Promise<void> {
    if (warnedHostRoot || !switchesUsers() || this.user || cliKind(this.ctx.settings.docker.cli) !== "docker")
      return;
    warnedHostRoot = true;
    const r = await this.cli(["info", "--format", "{{json .SecurityOptions}}"], { timeoutMs: 30_000 });
    if (/userns/.test(String(r.stdout))) return;
    this.ctx.warn(
      "CONTAINERS RUN AS THE HOST'S ROOT: the docker engine does not remap user namespaces, so a container's root (the image's default user) is root on this host. Enable dockerd --userns-remap, or use podman (the gateway maps each container's users to unprivileged host uids).",
    );
  }

  async start(signal?: AbortSignal): Promise<void> {
    await this.warnIfHostRoot();
    if (!this.spec.allow_internet) this.bridge = await startContainerBridge(this.ctx.proxyUrl);
    if (this.user) await handOver(this.hostDir, this.user.uid, this.user.gid);
    const args = dockerCreateArgs(this.spec, {
      name: this.container,
      hostDir: this.hostDir,
      labels: { "polar.node": this.ctx.node_id, "polar.session": this.ctx.session_id },
      createArgs: this.ctx.settings.docker.createArgs,
      forwarder: this.bridge ?? undefined,
      pidsLimit: this.ctx.settings.docker.pidsLimit ?? SESSION_MAX_PIDS,
      userns: this.userns,
    });
    await this.must(args, "create", { timeoutMs: CONTAINER_START_TIMEOUT_MS, signal });
    this.started = true;
    await this.must(["start", this.container], "start", { timeoutMs: CONTAINER_START_TIMEOUT_MS, signal });
    if (this.bridge) {
      // Prepare steps and the harness may call the proxy right away: wait until it listens.
      this.forwarder = await waitForForwarder(
        {
          logs: async () => {
            const r = await this.cli(["logs", this.container], { timeoutMs: 30_000 });
            return `${r.stdout}\n${r.stderr}`;
          },
          running: async () => {
            const r = await this.cli(["inspect", "--format", "{{.State.Running}}", this.container], {
              timeoutMs: 30_000,
            });
            return String(r.stdout).trim() === "true";
          },
        },
        this.spec.image ?? "",
        { signal },
      );
    }
  }

  async exec(command: string, opts: ExecOptions): Promise<CommandResult> {
    const { cli, globalArgs } = this.ctx.settings.docker;
    if (this.user) await handOver(this.hostDir, this.user.uid, this.user.gid);
    const argv = [
      cli,
      ...globalArgs,
      ...dockerExecArgs(this.container, shellOf(this.spec), command, opts.cwd ?? this.workdir, opts.env),
    ];
    const oomMarker = path.join(this.cliDir, "oom");
    await rm(oomMarker, { force: true });
    const result = await runProcess(argv, {
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
      cwd: this.cliDir,
      signal: opts.signal,
      timeoutMs: opts.timeoutMs,
      logsDir: this.logsDir,
      logName: opts.logName,
      capture: opts.capture,
      // Killing the CLI client does not stop the process inside the container: kill every
      // process in it except its init (`kill -9 -1` spares PID 1 and the caller).
      onKill: async () => {
        await this.cli(["exec", this.container, ...shellOf(this.spec), "kill -9 -1"], { timeoutMs: 30_000 });
      },
    });
    // podman's conmon marked an OOM kill in the container while the command ran (docker writes
    // no such file): the command ends naming the limit, as on the local runtime.
    if (this.spec.memory_mb && (await stat(oomMarker).catch(() => null)))
      return {
        ...result,
        limitHit: `memory limit of ${this.spec.memory_mb} MiB (runtime.memory_mb) hit: killed by the kernel OOM killer`,
      };
    return result;
  }

  async uploadFile(source: string, target: string): Promise<void> {
    const info = await stat(source).catch(() => null);
    if (!info?.isFile()) throw new SessionFailure("infra", `upload_file: source '${source}' is not a file`);
    await this.copyIn(source, target);
  }

  async uploadDir(source: string, target: string): Promise<void> {
    const info = await stat(source).catch(() => null);
    if (!info?.isDirectory())
      throw new SessionFailure("infra", `upload_dir: source '${source}' is not a folder`);
    await this.copyIn(source, target);
  }

  private async copyIn(source: string, target: string): Promise<void> {
    const abs = path.posix.isAbsolute(target) ? target : path.posix.join(this.workdir, target);
    if (hostPathOf(this, abs)) {
      // Under the session mount: a host copy into a fresh folder (faster than `cp`), moved into
      // place inside the container, so nothing the container planted on the way is followed on
      // the host.
      const stage = await mkdtemp(path.join(this.hostDir, ".polar-upload-"));
      try {
        await cp(source, path.join(stage, "item"), { recursive: true });
        if (this.user) await handOver(stage, this.user.uid, this.user.gid);
        const staged = quote([path.posix.join(CONTAINER_SESSION_PATH, path.basename(stage), "item")]);
        const dst = quote([abs]);
        const parent = `mkdir -p "$(dirname ${dst})"`;
        const place = (await stat(source)).isDirectory()
          ? `if [ -d ${dst} ]; then cp -a ${staged}/. ${dst}/; else ${parent} && mv ${staged} ${dst}; fi`
          : `${parent} && rm -f ${dst} && mv ${staged} ${dst}`;
        // As the container's root, whatever the image's user: the gateway's host copy was root's too.
        await this.must(
          ["exec", "--user", "0:0", this.container, ...shellOf(this.spec), place],
          "exec (upload)",
        );
      } finally {
        await rm(stage, { recursive: true, force: true });
      }
      return;
    }
    const parent = path.posix.dirname(abs);
    await this.must(["exec", this.container, ...shellOf(this.spec), `mkdir -p '${parent}'`], "exec mkdir");
    // `cp SRC/. DEST` copies a folder's contents into DEST whether or not it exists.
    const src = (await stat(source)).isDirectory() ? `${source}/.` : source;
    await this.must(["cp", src, `${this.container}:${abs}`], "cp");
  }

  /**
   * The container's writable layer (`inspect --size`: what the session wrote over its image) plus
   * the session folder mounted at `/polar/session`. Task `volumes` are the host's, not counted.
   */
  async storageBytes(): Promise<number> {
    const host = await diskUsage(this.hostDir);
    if (!this.started) return host;
    const r = await this.cli(["container", "inspect", "--size", "--format", "{{.SizeRw}}", this.container], {
      timeoutMs: 60_000,
    });
    const layer = Number(String(r.stdout).trim());
    if (r.exitCode !== 0 || !Number.isFinite(layer))
      throw new SessionFailure(
        "infra",
        `${this.ctx.settings.docker.cli} inspect --size failed: ${`${r.stderr}`.slice(0, 300)}`,
      );
    return host + layer;
  }

  async teardown(opts: { keep: boolean }): Promise<void> {
    if (this.started) await this.cli(["rm", "-f", this.container], { timeoutMs: 120_000 });
    this.started = false;
    await this.bridge?.close();
    this.bridge = null;
    await rm(this.cliDir, { recursive: true, force: true });
    if (!opts.keep) await rm(this.hostDir, { recursive: true, force: true });
    else if (this.user) await handOver(this.hostDir, process.getuid?.() ?? 0, process.getgid?.() ?? 0);
  }
}
