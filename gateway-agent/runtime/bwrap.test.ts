/**
 * The sandbox hides the gateway user's home, but pre-installed harness CLIs kept there (the
 * `POLAR_HARNESS_DIR` of a checkout in the home) must still run: checked with the real bwrap.
 */
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { describeWith } from "../../test/support/optional-tools";
import { bwrapArgs } from "./bwrap";

const root = mkdtempSync(join(tmpdir(), "polar-bwrap-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describeWith(["bubblewrap"], "bwrap and the harness folder", () => {
  it("shows the harness folder read-only inside the hidden home, and nothing else of the home", () => {
    const home = join(root, "home");
    const harnesses = join(home, "checkout", ".polar", "harnesses");
    const session = join(root, "work", "sessions", "s");
    mkdirSync(join(harnesses, "bin"), { recursive: true });
    mkdirSync(session, { recursive: true });
    writeFileSync(join(home, "secret.txt"), "token");
    writeFileSync(join(harnesses, "bin", "fake-cli"), "#!/bin/sh\necho fake-cli ran\n");
    chmodSync(join(harnesses, "bin", "fake-cli"), 0o755);
    const plan = {
      bwrapPath: "bwrap",
      sessionDir: session,
      workRoot: join(root, "work"),
      cwd: session,
      allowInternet: true,
      hostHome: home,
      harnessDir: harnesses,
    };
    const argv = bwrapArgs(
      plan,
      `PATH=${harnesses}/bin:/usr/bin:/bin; fake-cli; cat ${home}/secret.txt 2>/dev/null || echo hidden; touch ${harnesses}/x 2>/dev/null || echo read-only`,
    );
    const out = execFileSync(argv[0]!, argv.slice(1)).toString();
    expect(out).toBe("fake-cli ran\nhidden\nread-only\n");
    // Without a harness folder the home is simply hidden.
    expect(bwrapArgs({ ...plan, harnessDir: undefined }, "true")).not.toContain(harnesses);
  });

  it("shows a harness folder under the host's /tmp, which the sandbox replaces with its own", () => {
    const harnesses = join(root, "checkout", ".polar", "harnesses");
    const session = join(root, "work2", "sessions", "s");
    mkdirSync(join(harnesses, "bin"), { recursive: true });
    mkdirSync(session, { recursive: true });
    writeFileSync(join(root, "checkout", "other.txt"), "x");
    writeFileSync(join(harnesses, "bin", "fake-cli"), "#!/bin/sh\necho fake-cli ran\n");
    chmodSync(join(harnesses, "bin", "fake-cli"), 0o755);
    const argv = bwrapArgs(
      {
        bwrapPath: "bwrap",
        sessionDir: session,
        workRoot: join(root, "work2"),
        cwd: session,
        allowInternet: false,
        harnessDir: harnesses,
      },
      `PATH=${harnesses}/bin:/usr/bin:/bin; fake-cli; cat ${root}/checkout/other.txt 2>/dev/null || echo hidden`,
    );
    expect(execFileSync(argv[0]!, argv.slice(1)).toString()).toBe("fake-cli ran\nhidden\n");
  });

  it("runs commands when POLAR_HARNESS_DIR names a folder that does not exist (nothing installed)", () => {
    const session = join(root, "work3", "sessions", "s");
    mkdirSync(session, { recursive: true });
    const argv = bwrapArgs(
      {
        bwrapPath: "bwrap",
        sessionDir: session,
        workRoot: join(root, "work3"),
        cwd: session,
        allowInternet: false,
        harnessDir: join(root, "never-installed", ".polar", "harnesses"),
      },
      "echo ran",
    );
    expect(execFileSync(argv[0]!, argv.slice(1)).toString()).toBe("ran\n");
  });
});
