/**
 * A Node base image built from this host's own files, for hosts (CI among them) that reach no
 * container registry and so cannot pull the `node:20-bookworm-slim` that
 * `deploy/gateway/Containerfile` starts from by default. The image holds what that Containerfile
 * and the gateway need of a base and nothing more: this host's `node` and `bash` (the local
 * runtime runs every command with bash) with the libraries `ldd` lists for them, the npm
 * installed beside node, busybox-static for `sh` and the coreutils of the `RUN` steps,
 * `/usr/bin/env` (npm's shebang), `/tmp`, and a root user. The same Containerfile is then built
 * with `--build-arg BASE=<this image>`.
 *
 *   npx tsx scripts/build-node-base-image.ts     # prints the tag, e.g. localhost/polar-node-base:20.20.2
 *
 * Needs podman and busybox-static (`apt-get install podman busybox-static`).
 *
 * @module
 */
import { execFileSync } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

/**
 * The tag of the base image for this host's Node version (one image per version, so an upgraded
 * host never reuses a base with another Node).
 *
 * @example
 * ```ts
 * nodeBaseImageTag("v20.20.2"); // "localhost/polar-node-base:20.20.2"
 * ```
 */
export function nodeBaseImageTag(version: string = process.version): string {
  return `localhost/polar-node-base:${version.replace(/^v/, "")}`;
}

/** The shared libraries a dynamically linked binary loads, as `ldd` resolves them here. */
function sharedLibraries(binary: string): string[] {
  return execFileSync("ldd", [binary])
    .toString()
    .split("\n")
    .map((l) => /=> (\/\S+) \(0x/.exec(l)?.[1] ?? /^\s*(\/\S+) \(0x/.exec(l)?.[1])
    .filter((p): p is string => Boolean(p));
}

/** `binary`'s path on PATH, or null. */
function onPath(binary: string): string | null {
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    const candidate = path.join(dir, binary);
    if (dir && existsSync(candidate)) return candidate;
  }
  return null;
}

/**
 * Builds the base image for this host's Node (`process.execPath` and the npm installed with it)
 * unless it exists; returns its tag.
 *
 * @example
 * ```ts
 * const base = ensureNodeBaseImage(); // then: podman build --build-arg BASE=${base} …
 * ```
 */
export function ensureNodeBaseImage(): string {
  const tag = nodeBaseImageTag();
  try {
    execFileSync("podman", ["image", "exists", tag]);
    return tag;
  } catch {
    // Not built yet on this host.
  }
  const node = realpathSync(process.execPath);
  // npm is installed beside node: <prefix>/bin/node and <prefix>/lib/node_modules/npm.
  const npm = path.join(path.dirname(path.dirname(node)), "lib", "node_modules", "npm");
  if (!existsSync(path.join(npm, "bin", "npm-cli.js")))
    throw new Error(`no npm beside ${node} (looked for ${npm}/bin/npm-cli.js)`);
  const bash = onPath("bash");
  if (!bash) throw new Error("bash is not on PATH");
  const busybox = onPath("busybox");
  if (!busybox) throw new Error("busybox is not installed (apt-get install busybox-static)");
  const root = mkdtempSync(path.join(tmpdir(), "polar-node-base-"));
  try {
    for (const d of ["bin", "usr/bin", "usr/local/bin", "usr/lib/node_modules", "etc", "root", "tmp"])
      mkdirSync(path.join(root, d), { recursive: true });
    chmodSync(path.join(root, "tmp"), 0o1777);
    // bash too: the gateway's local runtime runs every command with `bash -c`.
    for (const [binary, name] of [
      [node, "node"],
      [bash, "bash"],
    ] as const) {
      copyFileSync(binary, path.join(root, "usr", "bin", name));
      chmodSync(path.join(root, "usr", "bin", name), 0o755);
      for (const lib of sharedLibraries(binary)) {
        const dest = path.join(root, lib);
        mkdirSync(path.dirname(dest), { recursive: true });
        copyFileSync(lib, dest);
      }
    }
    cpSync(npm, path.join(root, "usr", "lib", "node_modules", "npm"), { recursive: true });
    symlinkSync("../lib/node_modules/npm/bin/npm-cli.js", path.join(root, "usr", "bin", "npm"));
    symlinkSync("../lib/node_modules/npm/bin/npx-cli.js", path.join(root, "usr", "bin", "npx"));
    copyFileSync(busybox, path.join(root, "bin", "busybox"));
    chmodSync(path.join(root, "bin", "busybox"), 0o755);
    for (const applet of execFileSync(busybox, ["--list"]).toString().trim().split("\n"))
      if (applet && !existsSync(path.join(root, "bin", applet)))
        symlinkSync("busybox", path.join(root, "bin", applet));
    // npm's scripts start with `#!/usr/bin/env node`.
    symlinkSync("/bin/busybox", path.join(root, "usr", "bin", "env"));
    writeFileSync(path.join(root, "etc", "passwd"), "root:x:0:0:root:/root:/bin/sh\n");
    writeFileSync(path.join(root, "etc", "group"), "root:x:0:\n");
    execFileSync(
      "bash",
      [
        "-c",
        `tar -C "$ROOT" -c . | podman import --change ENV=PATH=/usr/local/bin:/usr/bin:/bin --change ENV=HOME=/root --change CMD=/bin/sh - "$TAG"`,
      ],
      { env: { ...process.env, ROOT: root, TAG: tag }, stdio: ["ignore", "ignore", "pipe"] },
    );
    return tag;
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) console.log(ensureNodeBaseImage());
