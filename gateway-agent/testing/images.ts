/**
 * Builds the small container images the docker/podman tests use, locally and without a registry:
 * a rootfs of busybox-static plus the host's git binary and the libraries it links, imported with
 * `podman import`. Test-only.
 *
 * @module
 */
import { execFileSync } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

/** Image with sh, coreutils-like applets, patch, wget (busybox) and git. */
export const TEST_IMAGE = "localhost/polar-test-git:1";

/** podman flags this kernel needs (see the project's container notes). */
export const PODMAN_SETTINGS = {
  cli: "podman",
  globalArgs: ["--runtime", "/usr/sbin/runc"],
  createArgs: ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"],
};

const which = (bin: string) => {
  try {
    return (
      execFileSync("bash", ["-c", `command -v ${bin}`])
        .toString()
        .trim() || null
    );
  } catch {
    return null;
  }
};

/** True when podman, runc, busybox and git are all installed (the tests need each). */
export function canBuildTestImage(): boolean {
  return ["podman", "busybox", "git"].every((b) => which(b) !== null) && existsSync("/usr/sbin/runc");
}

/**
 * Builds {@link TEST_IMAGE} unless it exists.
 *
 * @example
 * ```ts
 * ensureTestImage();
 * ```
 */
export function ensureTestImage(): string {
  try {
    execFileSync("podman", ["image", "exists", TEST_IMAGE]);
    return TEST_IMAGE;
  } catch {
    // Not there yet: build it.
  }
  const root = mkdtempSync(path.join(tmpdir(), "polar-rootfs-"));
  try {
    for (const d of ["bin", "tmp", "etc", "root", "usr/bin", "work"])
      mkdirSync(path.join(root, d), { recursive: true });
    chmodSync(path.join(root, "tmp"), 0o1777);
    const busybox = which("busybox") as string;
    copyFileSync(busybox, path.join(root, "bin", "busybox"));
    chmodSync(path.join(root, "bin", "busybox"), 0o755);
    const applets = execFileSync(busybox, ["--list"]).toString().trim().split("\n");
    for (const applet of applets) {
      if (applet && !existsSync(path.join(root, "bin", applet)))
        symlinkSync("busybox", path.join(root, "bin", applet));
    }
    const git = which("git") as string;
    copyFileSync(git, path.join(root, "usr", "bin", "git"));
    chmodSync(path.join(root, "usr", "bin", "git"), 0o755);
    // The shared libraries git links (from `ldd`), at the same paths.
    const libs = execFileSync("ldd", [git])
      .toString()
      .split("\n")
      .map((l) => /(\/\S+) \(0x/.exec(l)?.[1] ?? /^\s*(\/\S+)/.exec(l)?.[1])
      .filter((p): p is string => Boolean(p));
    for (const lib of libs) {
      const dest = path.join(root, lib);
      mkdirSync(path.dirname(dest), { recursive: true });
      copyFileSync(lib, dest);
    }
    writeFileSync(path.join(root, "etc", "passwd"), "root:x:0:0:root:/root:/bin/sh\n");
    writeFileSync(path.join(root, "etc", "group"), "root:x:0:\n");
    execFileSync("bash", [
      "-c",
      `tar -C '${root}' -c . | podman import --change ENV=PATH=/usr/bin:/bin --change ENV=HOME=/root - ${TEST_IMAGE}`,
    ]);
    return TEST_IMAGE;
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
