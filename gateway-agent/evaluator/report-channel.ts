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
  /** `command` with `{{REPORT}}` replaced by the (quoted) sandbox path. */
  command(testCommand: string): string;
  /** Reads the report: null when the runner wrote none; throws {@link ReportRefused} when unsafe. */
  read(): Promise<string | null>;
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
  return {
    sandboxPath,
    hostPath,
    command: (testCommand) => testCommand.split(REPORT_PLACEHOLDER).join(quote([sandboxPath])),
    async read() {
      // The folder must still be the one the gateway made: not swapped for a link or another folder.
      const now = await lstat(dirHost).catch(() => null);
      if (!now?.isDirectory() || now.ino !== made.ino || now.dev !== made.dev)
        throw new ReportRefused("the report folder was replaced during the tests");
      let handle: Awaited<ReturnType<typeof open>>;
      try {
        handle = await open(hostPath, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code === "ENOENT") return null;
        if (code === "ELOOP") throw new ReportRefused("the report path is a symlink");
        throw new ReportRefused(`the report cannot be opened (${code})`);
      }
      try {
        const info = await handle.stat();
        if (!info.isFile()) throw new ReportRefused("the report is not a regular file");
        if (info.size > MAX_REPORT_BYTES)
          throw new ReportRefused(`the report has ${info.size} bytes (limit ${MAX_REPORT_BYTES})`);
        return (await handle.readFile()).toString("utf8");
      } finally {
        await handle.close();
      }
    },
    dispose: () => rm(dirHost, { recursive: true, force: true }),
  };
}
