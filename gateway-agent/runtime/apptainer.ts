/**
 * The `apptainer` runtime (daemonless, common on HPC GPU hosts): an instance per session with a
 * writable overlay folder, the session folder bound at `/polar/session`, `--nv` for GPUs and
 * `--net --network none` without internet. Commands by `apptainer exec instance://NAME`.
 *
 * @module
 */
import { cp, mkdir, rm, stat } from "node:fs/promises";
import path from "node:path";
import { execa } from "execa";
import type { RuntimeSpec } from "../../protocol";
import { SessionFailure } from "../errors";
import { CONTAINER_SESSION_PATH, execArgv, shellOf } from "./docker";
import { createSessionDir } from "./local";
import { hostPathOf } from "./prepare";
import { runProcess } from "./process";
import { diskUsage } from "./storage";
import type { CommandResult, ExecOptions, Runtime, RuntimeContext } from "./types";

/**
 * `apptainer instance start` argv (without the CLI).
 *
 * @example
 * ```ts
 * apptainerStartArgs(spec, { instance: "polar-x", hostDir: "/w/sessions/x" });
 * // ["instance", "start", "--overlay", "/w/sessions/x/overlay", "--bind", …, "docker://img", "polar-x"]
 * ```
 */
export function apptainerStartArgs(spec: RuntimeSpec, o: { instance: string; hostDir: string }): string[] {
  if (!spec.image)
    throw new SessionFailure("configuration", "runtime.image: required for the apptainer backend");
  // A host overlay folder, not the default 64 MB tmpfs: agents install packages.
  const args = ["instance", "start", "--overlay", path.join(o.hostDir, "overlay")];
  args.push("--bind", `${o.hostDir}:${CONTAINER_SESSION_PATH}`);
  for (const volume of spec.volumes) args.push("--bind", volume);
  if (spec.gpus > 0) args.push("--nv");
  if (!spec.allow_internet) args.push("--net", "--network", "none");
  if (spec.cpus !== undefined) args.push("--cpus", String(spec.cpus));
  if (spec.memory_mb !== undefined) args.push("--memory", `${spec.memory_mb}M`);
  for (const [k, v] of Object.entries(spec.env)) args.push("--env", `${k}=${v}`);
  args.push(spec.image, o.instance);
  return args;
}

/**
 * `apptainer exec` argv (without the CLI).
 *
 * @example
 * ```ts
 * apptainerExecArgs("polar-x", ["bash", "-lc"], "make", "/polar/session/workspace", { A: "1" });
 * ```
 */
export function apptainerExecArgs(
  instance: string,
  shell: string[],
  command: string,
  cwd: string,
  env: Record<string, string>,
): string[] {
  return execArgv({ cwd: "--pwd", env: "--env" }, `instance://${instance}`, shell, command, cwd, env);
}

/**
 * A session's apptainer instance.
 *
 * @example
 * ```ts
 * const rt = await ApptainerRuntime.create(spec, ctx);
 * await rt.start();
 * ```
 */
export class ApptainerRuntime implements Runtime {
  readonly backend = "apptainer";
  readonly logsDir: string;
  readonly sessionPath = CONTAINER_SESSION_PATH;
  readonly instance: string;
  private started = false;

  private constructor(
    readonly hostDir: string,
    private readonly spec: RuntimeSpec,
    private readonly ctx: RuntimeContext,
  ) {
    this.logsDir = path.join(hostDir, "logs");
    this.instance = `polar-${ctx.name.replace(/[^A-Za-z0-9_.-]/g, "_").slice(0, 80)}`;
  }

  static async create(spec: RuntimeSpec, ctx: RuntimeContext): Promise<ApptainerRuntime> {
    shellOf(spec);
    if (!spec.image)
      throw new SessionFailure("configuration", "runtime.image: required for the apptainer backend");
    const dir = await createSessionDir(ctx.workRoot, ctx.name);
    await mkdir(path.join(dir, "overlay"), { recursive: true });
    return new ApptainerRuntime(dir, spec, ctx);
  }

  get workdir(): string {
    return this.spec.workdir ?? `${CONTAINER_SESSION_PATH}/workspace`;
  }

  baseEnv(): Record<string, string> {
    return {};
  }

  async start(signal?: AbortSignal): Promise<void> {
    const r = await execa(
      this.ctx.settings.apptainer.cli,
      apptainerStartArgs(this.spec, { instance: this.instance, hostDir: this.hostDir }),
      {
        reject: false,
        cancelSignal: signal,
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
        extendEnv: false,
      },
    );
    if (signal?.aborted) throw signal.reason;
    if (r.exitCode !== 0)
      throw new SessionFailure("infra", `apptainer instance start failed: ${`${r.stderr}`.slice(0, 800)}`);
    this.started = true;
  }

  exec(command: string, opts: ExecOptions): Promise<CommandResult> {
    return runProcess(
      [
        this.ctx.settings.apptainer.cli,
        ...apptainerExecArgs(this.instance, shellOf(this.spec), command, opts.cwd ?? this.workdir, opts.env),
      ],
      {
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
        signal: opts.signal,
        timeoutMs: opts.timeoutMs,
        logsDir: this.logsDir,
        logName: opts.logName,
        capture: opts.capture,
      },
    );
  }

  async uploadFile(source: string, target: string): Promise<void> {
    await this.copyIn(source, target);
  }

  async uploadDir(source: string, target: string): Promise<void> {
    await this.copyIn(source, target);
  }

  /** Host copies under the session bind; elsewhere a tar stream through `apptainer exec`. */
  private async copyIn(source: string, target: string): Promise<void> {
    if (!(await stat(source).catch(() => null)))
      throw new SessionFailure("infra", `upload: source '${source}' does not exist`);
    const abs = path.posix.isAbsolute(target) ? target : path.posix.join(this.workdir, target);
    const host = hostPathOf(this, abs);
    if (host) {
      await mkdir(path.dirname(host), { recursive: true });
      await cp(source, host, { recursive: true });
      return;
    }
    const staged = path.join(this.hostDir, ".upload", path.basename(source));
    await cp(source, staged, { recursive: true });
    const inside = `${CONTAINER_SESSION_PATH}/.upload/${path.basename(source)}`;
    const r = await this.exec(`mkdir -p '${path.posix.dirname(abs)}' && cp -a '${inside}' '${abs}'`, {
      env: {},
      logName: "upload",
    });
    await rm(path.join(this.hostDir, ".upload"), { recursive: true, force: true });
    if (r.exitCode !== 0) throw new SessionFailure("infra", `upload to '${abs}' failed (exit ${r.exitCode})`);
  }

  /** The session folder on the host, which holds the instance's writable overlay. */
  storageBytes(): Promise<number> {
    return diskUsage(this.hostDir);
  }

  async teardown(opts: { keep: boolean }): Promise<void> {
    if (this.started) {
      await execa(this.ctx.settings.apptainer.cli, ["instance", "stop", this.instance], { reject: false });
    }
    this.started = false;
    if (!opts.keep) await rm(this.hostDir, { recursive: true, force: true });
  }
}
