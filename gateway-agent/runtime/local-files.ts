/**
 * How the `local` runtime touches a session user's folder without being led astray by it: a
 * working folder is created only where its real path stays inside the session folder, and an
 * upload staged by the gateway is moved into place by the session user itself.
 *
 * @module
 */
import { lstat, mkdir, realpath } from "node:fs/promises";
import path from "node:path";
import { quote } from "shell-quote";
import { SessionFailure } from "../errors";

const exists = (p: string) =>
  lstat(p).then(
    () => true,
    () => false,
  );

/**
 * Creates a working folder (as the gateway) only when its deepest existing parent really lies
 * inside the session folder: a symlink the session planted cannot make the gateway create
 * folders elsewhere. (Nothing of the session runs between commands, so the check holds.)
 *
 * @example
 * ```ts
 * await mkdirInside(hostDir, path.join(hostDir, "workspace/build"));
 * ```
 */
export async function mkdirInside(hostDir: string, dir: string): Promise<void> {
  if (await exists(dir)) return;
  let parent = path.dirname(dir);
  while (!(await exists(parent))) parent = path.dirname(parent);
  const [real, root] = await Promise.all([realpath(parent).catch(() => null), realpath(hostDir)]);
  const rel = real === null ? ".." : path.relative(root, real);
  if (rel.startsWith("..") || path.isAbsolute(rel))
    throw new SessionFailure("infra", `cwd: '${dir}' leads outside the session folder`);
  await mkdir(dir, { recursive: true });
}

/**
 * The script the session user runs to move a staged upload into place: a file replaces what is
 * there; a folder is merged into an existing one, as a plain copy would, or moved in.
 *
 * @example
 * ```ts
 * await runAsSessionUser(placeScript(`${stage}/item`, dest, "dir"));
 * ```
 */
export function placeScript(staged: string, dest: string, kind: "file" | "dir"): string {
  const [src, dst] = [quote([staged]), quote([dest])];
  const parent = `mkdir -p -- "$(dirname -- ${dst})"`;
  return kind === "file"
    ? `${parent} && mv -fT -- ${src} ${dst}`
    : `if [ -d ${dst} ]; then cp -a -- ${src}/. ${dst}/; else ${parent} && mv -T -- ${src} ${dst}; fi`;
}
