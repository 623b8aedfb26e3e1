/**
 * The `docker` runtime through a docker-compatible CLI (`docker` or `podman`): one long-lived
 * container per session (`create … sleep infinity`, `start`), commands by `exec`, uploads by `cp`
 * (or plain host copies under the session mount), `rm -f` on teardown. The host session folder is
 * bind-mounted at `/polar/session`.
 *
 * With `allow_internet: false` the container gets `--network none` and reaches the proxy through
 * a forwarder as its PID 1 (see `container-bridge.ts`) instead of `sleep infinity`.
 *
 * @module
 */
import { randomBytes } from "node:crypto";
import { cp, mkdir, rm, stat } from "node:fs/promises";
import path from "node:path";
import { execa } from "execa";
import type { RuntimeSpec } from "../../protocol";
import { SessionFailure } from "../errors";
import {
  type ContainerBridge,
  forwarderCreateArgs,
  forwarderScript,
  startContainerBridge,
  waitForForwarder,
} from "./container-bridge";
import { createSessionDir } from "./local";
import { hostPathOf } from "./prepare";
import { runProcess } from "./process";
import { diskUsage } from "./storage";
import type { CommandResult, ExecOptions, Runtime, RuntimeContext } from "./types";

/** Where the host session folder appears inside a container. */
export const CONTAINER_SESSION_PATH = "/polar/session";
/** Longest a container create+start may take (image unpack on a cold host included). */
export const CONTAINER_START_TIMEOUT_MS = 600_000;

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
  },
): string[] {
  if (!spec.image)
    throw new SessionFailure("configuration", "runtime.image: required for the docker backend");
  const args = ["create", "--name", o.name];
  for (const [k, v] of Object.entries(o.labels)) args.push("--label", `${k}=${v}`);
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
  const args = ["exec", "-w", cwd];
  for (const [k, v] of Object.entries(env)) args.push("-e", `${k}=${v}`);
  return [...args, container, ...shell, command];
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

  private constructor(
    readonly hostDir: string,
    private readonly spec: RuntimeSpec,
    private readonly ctx: RuntimeContext,
  ) {
    this.logsDir = path.join(hostDir, "logs");
    const safe = ctx.name.replace(/[^A-Za-z0-9_.-]/g, "_").slice(0, 80);
    this.container = `polar-${safe}-${randomBytes(3).toString("hex")}`;
  }

  static async create(spec: RuntimeSpec, ctx: RuntimeContext): Promise<DockerRuntime> {
    shellOf(spec); // validate early
    if (!spec.image)
      throw new SessionFailure("configuration", "runtime.image: required for the docker backend");
    return new DockerRuntime(await createSessionDir(ctx.workRoot, ctx.name), spec, ctx);
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

  async start(signal?: AbortSignal): Promise<void> {
    if (!this.spec.allow_internet) this.bridge = await startContainerBridge(this.ctx.proxyUrl);
    const args = dockerCreateArgs(this.spec, {
      name: this.container,
      hostDir: this.hostDir,
      labels: { "polar.node": this.ctx.node_id, "polar.session": this.ctx.session_id },
      createArgs: this.ctx.settings.docker.createArgs,
      forwarder: this.bridge ?? undefined,
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
    const argv = [
      cli,
      ...globalArgs,
      ...dockerExecArgs(this.container, shellOf(this.spec), command, opts.cwd ?? this.workdir, opts.env),
    ];
    return runProcess(argv, {
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
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
    const host = hostPathOf(this, abs);
    if (host) {
      // Under the session mount a host copy is enough (and faster than `cp`).
      await mkdir(path.dirname(host), { recursive: true });
      await cp(source, host, { recursive: true });
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
    if (!opts.keep) await rm(this.hostDir, { recursive: true, force: true });
  }
}
