/**
 * A session's logs as one bounded artifact. Every command a session runs (prepare steps, the
 * harness's install, steps and post steps, evaluator commands) writes its stdout and stderr to
 * `<logName>.stdout.log` / `.stderr.log` in its runtime's `logs/` folder (`runtime/process.ts`).
 * Before the runtimes are torn down, those files are read into streams by name:
 *
 * - `prepare`: `prepare-<i>.*` (the task's prepare actions);
 * - `harness.stdout` / `harness.stderr`: `agent/*.stdout.log` / `agent/*.stderr.log`;
 * - `evaluator`: `eval*` files, and everything of a separate eval runtime;
 * - `other`: any other file (e.g. an upload step of a container runtime).
 *
 * Files of a stream follow each other by modification time, each under a `==> name <==` line
 * (as `tail` prints several files). Each stream keeps its last `limitBytes` bytes (cut at a
 * character boundary); `bytes_total` counts what was seen, headers included.
 *
 * The `logs/` folder is inside the session folder, which the sandbox may write: symlinks are
 * never followed (a planted link must not make the gateway read a host file) and at most
 * {@link MAX_LOG_FILES} files are read.
 *
 * @module
 */
import { constants } from "node:fs";
import { lstat, open, readdir } from "node:fs/promises";
import path from "node:path";
import { LOG_STREAM_LIMIT_BYTES, LOG_STREAM_NAMES, type LogStream, type LogsUpload } from "../protocol";

/** Files read from one session's log folders at most (a sandbox could create any number). */
export const MAX_LOG_FILES = 1000;
/** Folder depth searched below a `logs/` folder (`agent/` is one level down). */
const MAX_DEPTH = 3;

/** A runtime's log folder and whose it is (`eval`: a separate eval runtime). */
export interface LogDir {
  dir: string;
  origin: "session" | "eval";
}

interface LogFile {
  stream: string;
  label: string;
  size: number;
  mtimeMs: number;
  /** The file's last bytes (at most the stream limit). */
  tail: Buffer;
}

/**
 * The stream a log file belongs to, from its path relative to its `logs/` folder.
 *
 * @example
 * ```ts
 * streamOf("agent/shell.step00.stderr.log", "session"); // "harness.stderr"
 * ```
 */
export function streamOf(rel: string, origin: LogDir["origin"]): string {
  if (origin === "eval" || rel.startsWith("eval")) return "evaluator";
  if (rel.startsWith("prepare-")) return "prepare";
  if (rel.startsWith("agent/")) {
    if (rel.endsWith(".stdout.log")) return "harness.stdout";
    if (rel.endsWith(".stderr.log")) return "harness.stderr";
  }
  return "other";
}

/** Regular files under `dir` (never through a symlink), relative paths, up to `budget` of them. */
async function listFiles(dir: string, budget: { left: number }, depth = 0, prefix = ""): Promise<string[]> {
  if (depth > MAX_DEPTH || budget.left <= 0) return [];
  const entries = await readdir(path.join(dir, prefix), { withFileTypes: true }).catch(() => []);
  const out: string[] = [];
  for (const e of entries.sort((x, y) => (x.name < y.name ? -1 : 1))) {
    if (budget.left <= 0) break;
    const rel = prefix ? `${prefix}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...(await listFiles(dir, budget, depth + 1, rel)));
    else if (e.isFile()) {
      out.push(rel);
      budget.left--;
    }
  }
  return out;
}

/** The last `limit` bytes of a regular file opened without following a symlink; null if unreadable. */
async function readTail(file: string, limit: number): Promise<Omit<LogFile, "stream" | "label"> | null> {
  const st = await lstat(file).catch(() => null);
  if (!st?.isFile()) return null;
  const fh = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch(
    () => null,
  );
  if (!fh) return null;
  try {
    const s = await fh.stat();
    if (!s.isFile()) return null;
    const length = Math.min(limit, s.size);
    const tail = Buffer.alloc(length);
    const { bytesRead } = await fh.read(tail, 0, length, s.size - length);
    return { size: s.size, mtimeMs: s.mtimeMs, tail: tail.subarray(0, bytesRead) };
  } catch {
    return null;
  } finally {
    await fh.close().catch(() => {});
  }
}

/** Drops the UTF-8 continuation bytes a cut left at the start (at most three). */
function fromCharBoundary(buf: Buffer): Buffer {
  let i = 0;
  while (i < 3 && i < buf.length && (buf[i]! & 0xc0) === 0x80) i++;
  return buf.subarray(i);
}

/** One stream from its files, oldest first: the tail of `==> label <==\n` + content, repeated. */
function toStream(name: string, files: LogFile[], limit: number): LogStream {
  const parts: Buffer[] = [];
  let total = 0;
  for (const f of files) {
    const header = Buffer.from(`==> ${f.label} <==\n`);
    total += header.length + f.size;
    parts.push(header, f.tail);
  }
  // The newest bytes are what a post-mortem needs: walk back from the end until the limit.
  const kept: Buffer[] = [];
  let room = limit;
  for (let i = parts.length - 1; i >= 0 && room > 0; i--) {
    const p = parts[i]!;
    const piece = p.length <= room ? p : p.subarray(p.length - room);
    kept.unshift(piece);
    room -= piece.length;
  }
  const truncated = total > limit;
  const buf = truncated ? fromCharBoundary(Buffer.concat(kept)) : Buffer.concat(kept);
  return { name, bytes_total: total, bytes_kept: buf.length, truncated, text: buf.toString("utf8") };
}

/**
 * Reads the log folders of a session into bounded streams (only the streams that have a file,
 * in {@link LOG_STREAM_NAMES} order; empty files are left out). Never throws: an unreadable file
 * or folder is skipped.
 *
 * @example
 * ```ts
 * const logs = await collectSessionLogs([{ dir: runtime.logsDir, origin: "session" }]);
 * logs.streams.find((s) => s.name === "harness.stderr")?.text;
 * ```
 */
export async function collectSessionLogs(
  dirs: readonly LogDir[],
  limitBytes = LOG_STREAM_LIMIT_BYTES,
): Promise<LogsUpload> {
  const budget = { left: MAX_LOG_FILES };
  const byStream = new Map<string, LogFile[]>();
  for (const { dir, origin } of dirs) {
    const dirStat = await lstat(dir).catch(() => null);
    if (!dirStat?.isDirectory()) continue;
    for (const rel of await listFiles(dir, budget)) {
      const stream = streamOf(rel, origin);
      const read = await readTail(path.join(dir, rel), limitBytes);
      if (!read || read.size === 0) continue;
      const label = origin === "eval" ? `eval-runtime/${rel}` : rel;
      const list = byStream.get(stream) ?? [];
      list.push({ stream, label, ...read });
      byStream.set(stream, list);
    }
  }
  const streams: LogStream[] = [];
  for (const name of LOG_STREAM_NAMES) {
    const files = byStream.get(name);
    if (!files?.length) continue;
    files.sort((x, y) => x.mtimeMs - y.mtimeMs || (x.label < y.label ? -1 : 1));
    streams.push(toStream(name, files, limitBytes));
  }
  return { limit_bytes: limitBytes, streams };
}
