/**
 * The result journal: every finished result is written to disk before it is sent and removed
 * when the control plane acknowledges it, so a gateway killed between the two re-sends it after a
 * restart (the control plane accepts a session's result once; a re-send is acked `duplicate`).
 *
 * One file per lease, written to a temporary name, fsynced and renamed: rename is atomic on
 * POSIX filesystems, so a crash leaves either the old state or the whole new file.
 *
 * @module
 */
import { mkdirSync } from "node:fs";
import { open, readdir, readFile, rename, rm, stat } from "node:fs/promises";
import path from "node:path";
import { ResultMessage } from "../protocol";
import type { GatewayLogger } from "./errors";

const SUFFIX = ".result.json";

/**
 * @example
 * ```ts
 * const journal = new ResultJournal("/var/lib/polar/journal", logger);
 * for (const m of await journal.load()) runner.adoptUnacked(m);
 * await journal.put(message); send(message); // later, on ack: await journal.remove(leaseId)
 * ```
 */
export class ResultJournal {
  constructor(
    readonly dir: string,
    private readonly logger: GatewayLogger,
  ) {
    mkdirSync(dir, { recursive: true });
  }

  private file(leaseId: string): string {
    // Lease ids are opaque strings: encode so any id is one safe file name.
    return path.join(this.dir, `${Buffer.from(leaseId).toString("base64url")}${SUFFIX}`);
  }

  /** Durably records a result (before it is sent). */
  async put(message: ResultMessage): Promise<void> {
    const target = this.file(message.lease_id);
    const tmp = `${target}.tmp`;
    const handle = await open(tmp, "w");
    try {
      await handle.writeFile(JSON.stringify(message));
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tmp, target);
    // fsync the folder too, so the rename itself survives a power cut.
    const dirHandle = await open(this.dir, "r");
    try {
      await dirHandle.sync();
    } finally {
      await dirHandle.close();
    }
  }

  /** Forgets an acknowledged result. */
  async remove(leaseId: string): Promise<void> {
    await rm(this.file(leaseId), { force: true });
  }

  /** Results still waiting for an ack (oldest first); unreadable files are logged and skipped. */
  async load(): Promise<ResultMessage[]> {
    const names = (await readdir(this.dir)).filter((n) => n.endsWith(SUFFIX)).sort();
    const out: Array<{ at: number; message: ResultMessage }> = [];
    for (const name of names) {
      const file = path.join(this.dir, name);
      try {
        const message = ResultMessage.parse(JSON.parse(await readFile(file, "utf8")));
        const { mtimeMs } = await stat(file);
        out.push({ at: mtimeMs, message });
      } catch (err) {
        this.logger.error("journal entry unreadable; moved aside", { file, error: String(err) });
        await rename(file, `${file}.corrupt`).catch(() => {});
      }
    }
    return out.sort((a, b) => a.at - b.at).map((e) => e.message);
  }
}
