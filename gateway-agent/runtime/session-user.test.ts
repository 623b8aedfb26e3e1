/**
 * Session users: uid claims are exclusive across gateways and taken over from dead ones, uids
 * `/etc/passwd` names are skipped, `handOver` gives the gateway's files to the session user but
 * leaves shared (`o+w`) entries, symlinks and hard links alone, and `killUserProcesses` reaches
 * what left the process group.
 */
import { execFileSync, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { link, lstat, mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { describeWith, type OptionalTool } from "../../test/support/optional-tools";
import { bwrapArgs } from "./bwrap";
import {
  claimSessionUid,
  dropPrivileges,
  ENV_LOADER,
  handOver,
  killUserProcesses,
  type SessionUser,
  userPids,
  writeIdentityFiles,
} from "./session-user";

const ROOT: OptionalTool = {
  name: "root",
  install: "run the tests as root (CI does): the gateway then runs every session as a user of its own",
  probe: () => (process.getuid?.() === 0 ? null : "the tests do not run as root"),
};

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "polar-session-user-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("uid claims", () => {
  it("never hands one uid out twice, and frees it on release", async () => {
    const registry = path.join(dir, "registry-a");
    const range = { first: 2_100_500_000, count: 3 };
    const claims = await Promise.all([0, 1, 2].map(() => claimSessionUid(range, registry)));
    expect(new Set(claims.map((c) => c.uid)).size).toBe(3);
    await expect(claimSessionUid(range, registry)).rejects.toThrow(/no free session uid/);
    await claims[1]?.release();
    expect((await claimSessionUid(range, registry)).uid).toBe(claims[1]?.uid);
  });

  it("takes over the claim of a gateway that died, keeps a live one's", async () => {
    const registry = path.join(dir, "registry-b");
    const range = { first: 2_100_600_000, count: 1 };
    await mkdir(path.join(registry, String(range.first)), { recursive: true });
    // The recorded gateway is gone (no such pid): its claim is stale.
    await writeFile(path.join(registry, String(range.first), "owner"), "999999999 1\n");
    const claim = await claimSessionUid(range, registry);
    expect(claim.uid).toBe(range.first);
    expect(await readFile(path.join(registry, String(range.first), "owner"), "utf8")).toMatch(
      new RegExp(`^${process.pid} \\d+\\n$`),
    );
    await expect(claimSessionUid(range, registry)).rejects.toThrow(/no free session uid/);
  });

  it("skips uids /etc/passwd names", async () => {
    const named = Number(execFileSync("id", ["-u", "nobody"], { encoding: "utf8" }).trim());
    const claim = await claimSessionUid({ first: named, count: 2 }, path.join(dir, "registry-c"));
    expect(claim.uid).toBe(named + 1);
  });
});

describe("the sandbox's identity files and argv", () => {
  const user: SessionUser = {
    uid: 2_100_000_007,
    gid: 2_100_000_007,
    name: "polar-session",
    setpriv: "/usr/bin/setpriv",
    bash: "/bin/bash",
  };

  it("passwd and group name the session user, replacing an entry of the same name or id", async () => {
    const files = await writeIdentityFiles(path.join(dir), user, "/w/sessions/s/home");
    const passwd = await readFile(files.passwd, "utf8");
    expect(passwd).toContain(
      "polar-session:x:2100000007:2100000007:Polar session:/w/sessions/s/home:/bin/bash\n",
    );
    expect(passwd).toMatch(/^root:/m);
    expect(passwd.match(/^polar-session:/gm)).toHaveLength(1);
    expect(await readFile(files.group, "utf8")).toContain("polar-session:x:2100000007:\n");
  });

  it("bubblewrap sets up as root and drops to the user last; /tmp and /dev/shm are sticky 1777", () => {
    const argv = bwrapArgs(
      {
        bwrapPath: "bwrap",
        sessionDir: "/w/sessions/s",
        workRoot: "/w",
        cwd: "/w/sessions/s/workspace",
        allowInternet: true,
        hostHome: "/root",
        user: { ...user, passwd: "/p/passwd", group: "/p/group" },
      },
      "make",
    );
    const joined = argv.join(" ");
    expect(joined).toContain("--perms 1777 --tmpfs /tmp");
    expect(joined).toContain("--perms 1777 --tmpfs /dev/shm");
    expect(joined).toContain("--ro-bind /p/passwd /etc/passwd --ro-bind /p/group /etc/group");
    expect(joined).toContain("--tmpfs /root");
    expect(argv.slice(argv.indexOf("--") + 1)).toEqual([
      ...dropPrivileges(user),
      "/bin/bash",
      "--noprofile",
      "--norc",
      "-c",
      ENV_LOADER,
      "polar-env",
      "make",
    ]);
    expect(dropPrivileges(user)).toEqual([
      "/usr/bin/setpriv",
      "--reuid",
      "2100000007",
      "--regid",
      "2100000007",
      "--clear-groups",
      "--inh-caps=-all",
      "--bounding-set=-all",
      "--no-new-privs",
      "--",
    ]);
  });
});

describeWith([ROOT], "handing files over and killing leftovers (as root)", () => {
  const uid = 2_100_700_001;

  it("gives the gateway's folders and files to the user; o+w entries, symlinks and hard links keep their owner", async () => {
    const top = path.join(dir, "hand");
    await mkdir(path.join(top, "a", "b"), { recursive: true });
    await writeFile(path.join(top, "a", "b", "f.txt"), "x");
    await mkdir(path.join(top, "shared"), { mode: 0o733 });
    execFileSync("chmod", ["0733", path.join(top, "shared")]);
    await symlink("/etc/passwd", path.join(top, "link"));
    await writeFile(path.join(dir, "outside.txt"), "x");
    await link(path.join(dir, "outside.txt"), path.join(top, "hard"));
    expect(await handOver(top, uid, uid)).toBe("");
    for (const p of ["", "a", "a/b", "a/b/f.txt"]) expect((await stat(path.join(top, p))).uid).toBe(uid);
    expect((await stat(path.join(top, "shared"))).uid).toBe(0);
    expect((await lstat(path.join(top, "link"))).uid).toBe(0);
    expect((await stat("/etc/passwd")).uid).toBe(0);
    expect((await stat(path.join(dir, "outside.txt"))).uid).toBe(0);
  });

  it("kills every process of the uid, also one that left its process group", async () => {
    // One process in its own group (`setsid`) and one in a group of its own spawn: both must go.
    const child = spawn("setsid", ["sleep", "60"], { uid, gid: uid, detached: true, stdio: "ignore" });
    child.unref();
    const grouped = spawn("sleep", ["61"], { uid, gid: uid, stdio: "ignore" });
    grouped.unref();
    // `setsid` forks (the spawned process already leads its group) and its parent exits: wait for
    // the forked `sleep` itself, not the short-lived parent a first look may catch.
    const sleeping = async () => {
      const pids = await userPids(uid);
      return pids.filter((pid) => {
        try {
          return readFileSync(`/proc/${pid}/comm`, "utf8").trim() === "sleep";
        } catch {
          return false;
        }
      });
    };
    await vi.waitFor(async () => expect((await sleeping()).length).toBe(2), {
      timeout: 10_000,
      interval: 20,
    });
    expect(await killUserProcesses(uid)).toBeGreaterThan(0);
    expect(await userPids(uid)).toEqual([]);
  });
});
