/**
 * Logs of failed sessions, kept on the gateway host for a post-mortem. A session's folder
 * (`work_root/sessions/<id>`, with its workspace) is removed at teardown; when the session did not
 * complete (ERROR or TIMEOUT; a cancel is not a failure) its `logs/` folder — prepare steps, the
 * harness's install and run output, evaluator commands — is first moved to
 * `work_root/failed/<session id>.a<attempt>/logs` (the eval runtime's to `eval-logs/`) with a
 * `result.json` summary (status, error, timing, trajectory metadata; no traces).
 *
 * Retention: the newest {@link DEFAULT_KEEP_FAILED_SESSIONS} (topology
 * `gateway.keep_failed_sessions`, 0 = none) by modification time; older ones are removed whenever
 * one is kept and at gateway start. The folder survives restarts (unlike `sessions/`).
 *
 * @module
 */
import { cp, mkdir, readdir, rename, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import type { Logger, SessionResult } from "../protocol";
import { messageOf } from "./errors";

/** Failed sessions whose logs are kept by default. */
export const DEFAULT_KEEP_FAILED_SESSIONS = 20;
/** Folder under the work root. */
export const FAILED_DIR = "failed";

/** A runtime's log folder to keep, and the name it gets in the kept folder. */
export interface LogSource {
  logsDir: string;
  as: "logs" | "eval-logs";
}

/**
 * Keeps and bounds the logs of failed sessions.
 *
 * @example
 * ```ts
 * const keeper = new FailedSessionKeeper(workRoot, 20, logger);
 * await keeper.prune(); // at start
 * const dir = await keeper.keepLogs("b.0.1", 1, [{ logsDir: runtime.logsDir, as: "logs" }]);
 * if (dir) await keeper.writeSummary(dir, result);
 * ```
 */
export class FailedSessionKeeper {
  readonly dir: string;
  /** Kept folders being filled by {@link keepLogs}: never pruned meanwhile. */
  private readonly filling = new Set<string>();
  /** The prune running now, if any; prunes asked for meanwhile fold into one more pass. */
  private pruning: Promise<void> | null = null;
  private pruneAgain = false;

  constructor(
    workRoot: string,
    /** How many failed sessions to keep (0 = none). */
    readonly keep: number,
    private readonly logger: Logger,
  ) {
    this.dir = path.join(workRoot, FAILED_DIR);
  }

  /**
   * Moves the given log folders into `failed/<session>.a<attempt>/` and prunes the oldest beyond
   * the bound. Returns the kept folder, or null when nothing was kept. Never throws.
   */
  async keepLogs(sessionId: string, attempt: number, sources: LogSource[]): Promise<string | null> {
    if (this.keep <= 0) return null;
    const name = `${sessionId}.a${attempt}`;
    const target = path.join(this.dir, name);
    this.filling.add(name);
    try {
      await rm(target, { recursive: true, force: true });
      await mkdir(target, { recursive: true });
      for (const src of sources) {
        if (!(await stat(src.logsDir).catch(() => null))) continue;
        await moveDir(src.logsDir, path.join(target, src.as));
      }
    } catch (err) {
      this.logger.warn("could not keep the logs of a failed session", {
        session_id: sessionId,
        error: messageOf(err),
      });
      return null;
    } finally {
      this.filling.delete(name);
    }
    await this.prune();
    return target;
  }

  /** Writes `result.json` (the result without its traces) next to the kept logs. Never throws. */
  async writeSummary(dir: string, result: SessionResult): Promise<void> {
    const { traces, ...trajectory } = result.trajectory;
    const summary = { ...result, trajectory: { ...trajectory, trace_count: traces.length } };
    await writeFile(path.join(dir, "result.json"), `${JSON.stringify(summary, null, 2)}\n`).catch(
      (err: unknown) => {
        // Pruned meanwhile: more than `keep` sessions failed since, and this one is past the bound.
        if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
        this.logger.warn("could not write a failed session's summary", { dir, error: messageOf(err) });
      },
    );
  }

  /**
   * Removes kept folders beyond the bound, oldest first, except those being filled. One pass at a
   * time: sessions failing together each ask for one, and two passes removing the same folder
   * while a third moves logs into it fail with ENOTEMPTY. Never throws.
   */
  async prune(): Promise<void> {
    if (this.pruning) {
      this.pruneAgain = true;
      return this.pruning;
    }
    this.pruning = (async () => {
      do {
        this.pruneAgain = false;
        await this.prunePass().catch((err: unknown) =>
          this.logger.warn("could not prune the logs of failed sessions", { error: messageOf(err) }),
        );
      } while (this.pruneAgain);
    })();
    try {
      await this.pruning;
    } finally {
      this.pruning = null;
    }
  }

  private async prunePass(): Promise<void> {
    const names = await readdir(this.dir).catch(() => [] as string[]);
    if (names.length <= this.keep) return;
    const dated = await Promise.all(
      names.map(async (name) => ({
        name,
        at: (await stat(path.join(this.dir, name)).catch(() => null))?.mtimeMs ?? 0,
      })),
    );
    dated.sort((x, y) => y.at - x.at || (x.name < y.name ? 1 : -1));
    await Promise.all(
      dated
        .slice(this.keep)
        .filter((d) => !this.filling.has(d.name))
        .map((d) => rm(path.join(this.dir, d.name), { recursive: true, force: true })),
    );
  }
}

/** `rename` (same filesystem: the usual case under one work root), else copy and remove. */
async function moveDir(from: string, to: string): Promise<void> {
  try {
    await rename(from, to);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EXDEV") throw err;
    await cp(from, to, { recursive: true });
    await rm(from, { recursive: true, force: true });
  }
}
