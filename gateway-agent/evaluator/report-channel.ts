/**
 * The report channel of the patch evaluators: a fresh folder whose name carries a random nonce,
 * created by the gateway on the host after the agent's change is applied and just before the
 * tests start, so no file the agent left (or wrote into its diff) can already be there. The test
 * command writes its structured report to `{{REPORT}}` inside it; the gateway reads it back on
 * the host without following symlinks, then removes the folder.
 *
 * What the nonce does not do: hide the path from the code under test while the tests run (it can
 * list the session folder or read the runner's command line). A report it writes there still has
 * to agree with the runner's own exit status, which it cannot set (see docs/evaluators.md).
 *
 * @module
 */
import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { chmod, lstat, mkdir, open, rm } from "node:fs/promises";
import path from "node:path";
import { quote } from "shell-quote";
import { SessionFailure } from "../errors";
import { hostPathOf } from "../runtime/prepare";
import type { Runtime } from "../runtime/types";
import { MAX_REPORT_BYTES } from "./junit";

/** Placeholder in `test_command` for the report's path (shell-quoted when substituted). */
export const REPORT_PLACEHOLDER = "{{REPORT}}";

/** A report location made for one test run. */
export interface ReportChannel {
  /** The report's path as the sandbox sees it. */
  sandboxPath: string;
  /** The same file on the gateway host. */
  hostPath: string;
  /** The nonce folder, as the sandbox and the host see it. */
  folder: { sandbox: string; host: string };
  /** `command` with `{{REPORT}}` replaced by the (quoted) sandbox path. */
  command(testCommand: string): string;
  /** Reads the report: null when the runner wrote none; throws {@link ReportRefused} when unsafe. */
  read(): Promise<string | null>;
  /**
   * Reads another file the test run wrote in the folder (`name` relative to it, no `..`), with
   * the report's checks: null when absent; {@link ReportRefused} for a link, a non-file, too large.
   */
  readFile(name: string): Promise<string | null>;
  /** Removes the folder. */
  dispose(): Promise<void>;
}

/** The report file is there but the grader will not read it (a symlink, a folder, too large). */
export class ReportRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ReportRefused";
  }
}

/**
 * Creates the nonce folder inside `runtime`'s session folder (which every backend shares with
 * the host) and returns the channel.
 *
 * @example
 * ```ts
 * const channel = await openReportChannel(grading);
 * await grading.exec(channel.command("pytest --junitxml={{REPORT}}"), opts);
 * const xml = await channel.read();
 * ```
 */
export async function openReportChannel(runtime: Runtime): Promise<ReportChannel> {
  const nonce = randomBytes(16).toString("hex");
  const dirInside = path.posix.join(runtime.sessionPath, `.polar-report-${nonce}`);
  const dirHost = hostPathOf(runtime, dirInside);
  if (!dirHost) throw new SessionFailure("infra", "grading runtime has no session folder for the report");
  // Not recursive: fails if anything already sits at the nonce path, and never follows a link.
  await mkdir(dirHost);
  // A container user other than the gateway's must be able to write the report (not list it).
  await chmod(dirHost, 0o733);
  const made = await lstat(dirHost);
  const sandboxPath = path.posix.join(dirInside, "report.xml");
  const hostPath = path.join(dirHost, "report.xml");
  const readFile = async (name: string): Promise<string | null> => {
    // The folder must still be the one the gateway made: not swapped for a link or another folder.
    const now = await lstat(dirHost).catch(() => null);
    if (!now?.isDirectory() || now.ino !== made.ino || now.dev !== made.dev)
      throw new ReportRefused("the report folder was replaced during the tests");
    const parts = name.split("/");
    if (parts.some((p) => p === "" || p === "." || p === ".."))
      throw new SessionFailure("infra", `report channel: '${name}' is not a plain relative name`);
    // Every folder on the way must be a real folder of this one, not a link planted in it.
    let dir = dirHost;
    for (const part of parts.slice(0, -1)) {
      dir = path.join(dir, part);
      const info = await lstat(dir).catch(() => null);
      if (!info) return null;
      if (!info.isDirectory()) throw new ReportRefused(`${name}: ${part} is not a folder`);
    }
    let handle: Awaited<ReturnType<typeof open>>;
    try {
      handle = await open(
        path.join(dirHost, ...parts),
        constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK,
      );
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === "ENOENT") return null;
      if (code === "ELOOP") throw new ReportRefused(`${name} is a symlink`);
      throw new ReportRefused(`${name} cannot be opened (${code})`);
    }
    try {
      const info = await handle.stat();
      if (!info.isFile()) throw new ReportRefused(`${name} is not a regular file`);
      if (info.size > MAX_REPORT_BYTES)
        throw new ReportRefused(`${name} has ${info.size} bytes (limit ${MAX_REPORT_BYTES})`);
      return (await handle.readFile()).toString("utf8");
    } finally {
      await handle.close();
    }
  };
  return {
    sandboxPath,
    hostPath,
    folder: { sandbox: dirInside, host: dirHost },
    command: (testCommand) => testCommand.split(REPORT_PLACEHOLDER).join(quote([sandboxPath])),
    async read() {
      try {
        return await readFile("report.xml");
      } catch (e) {
        if (e instanceof ReportRefused)
          throw new ReportRefused(e.message.replace(/^report\.xml/, "the report"));
        throw e;
      }
    },
    readFile,
    dispose: () => rm(dirHost, { recursive: true, force: true }),
  };
}
