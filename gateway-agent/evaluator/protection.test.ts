import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, readFile, rename, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RuntimeSpec } from "../../protocol";
import { LocalRuntime } from "../runtime/local";
import { DEFAULT_RUNTIME_SETTINGS, type Runtime } from "../runtime/types";
import { parseDiff, sectionPaths, unquoteGitPath } from "./diff-sections";
import { checkWorktree, type GuardTarget, listBaseFiles, restoreWorktree } from "./guard";
import { junitKeyOf, parseJunit } from "./junit";
import { checkGraderFiles, filterPatch, writeGraderFile } from "./patch";
import {
  commandPaths,
  isProtected,
  onlyRunnerConfig,
  protectedReason,
  protectedRules,
  RUNNER_HOOK_REASON,
  splitProtected,
  symlinkDestination,
} from "./protected";
import { openReportChannel, ReportRefused } from "./report-channel";

const RULES = protectedRules({}, ["test_calculator.js", "tests/**"]);

const section = (a: string, b: string, body: string) => `diff --git a/${a} b/${b}\n${body}`;
const HUNK = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n";

describe("diff sections: every path a hostile diff can touch", () => {
  it("reads quoted names, names with spaces, renames and copies without hunks, deletes, modes", () => {
    const diff = [
      'diff --git "a/t\\303\\251st \\"q\\".js" "b/t\\303\\251st \\"q\\".js"\n--- "a/t\\303\\251st \\"q\\".js"\n+++ "b/t\\303\\251st \\"q\\".js"\n@@ -1 +1 @@\n-a\n+b\n',
      "diff --git a/tests/test calc.py b/tests/test calc.py\nindex 1..2 100644\n--- a/tests/test calc.py\n+++ b/tests/test calc.py\n@@ -1 +1 @@\n-a\n+b\n",
      "diff --git a/util.py b/conftest.py\nsimilarity index 100%\nrename from util.py\nrename to conftest.py\n",
      "diff --git a/a.js b/b.js\nsimilarity index 90%\ncopy from a.js\ncopy to b.js\n",
      "diff --git a/gone.js b/gone.js\ndeleted file mode 100644\n--- a/gone.js\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n",
      "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n",
      "diff --git a/img.png b/img.png\nindex 1..2 100644\nGIT binary patch\nliteral 3\nKcmZ?wbhH\n\nliteral 0\nKcmV+b0RR6000031\n\n",
    ].join("");
    const s = parseDiff(diff);
    expect(s.map((x) => [x.kind, x.oldPath, x.newPath])).toEqual([
      ["modify", 'tést "q".js', 'tést "q".js'],
      ["modify", "tests/test calc.py", "tests/test calc.py"],
      ["rename", "util.py", "conftest.py"],
      ["copy", "a.js", "b.js"],
      ["delete", "gone.js", null],
      ["mode", "run.sh", "run.sh"],
      ["modify", "img.png", "img.png"],
    ]);
    expect(s[5]!.modeChange).toBe(true);
    expect(s[6]!.binary).toBe(true);
    expect(unquoteGitPath('"a\\tb"')).toBe("a\tb");
  });

  it("reads symlinks and their targets; a removed '-- ' line is not a second header", () => {
    const [link] = parseDiff(
      "diff --git a/lib b/lib\nnew file mode 120000\nindex 0..1\n--- /dev/null\n+++ b/lib\n@@ -0,0 +1 @@\n+../../outside\n\\ No newline at end of file\n",
    );
    expect(link).toMatchObject({
      kind: "add",
      symlink: true,
      symlinkTarget: "../../outside",
      newPath: "lib",
    });
    const [sql] = parseDiff(
      "diff --git a/q.sql b/q.sql\n--- a/q.sql\n+++ b/q.sql\n@@ -1,2 +1 @@\n--- a comment\n select 1\n",
    );
    expect(sql!.unparsed).toBeUndefined();
  });

  it("flags changes git apply would take from outside any git section or after a section's hunks", () => {
    const preamble = parseDiff(
      `${HUNK.replaceAll("x", "test_calculator.js")}${section("a.js", "a.js", HUNK)}`,
    );
    expect(preamble[0]).toMatchObject({ kind: "unknown", unparsed: expect.stringContaining("outside") });
    const [smuggled] = parseDiff(
      section(
        "a.js",
        "a.js",
        `${HUNK}--- a/test_calculator.js\n+++ b/test_calculator.js\n@@ -1 +1 @@\n-x\n+y\n`,
      ),
    );
    expect(smuggled!.unparsed).toMatch(/second file/);
    expect(sectionPaths(smuggled!)).toContain("test_calculator.js");
    // Commentary before the first header (git format-patch mails) is not a change.
    expect(parseDiff(`From: someone\nSubject: fix\n\n${section("a.js", "a.js", HUNK)}`)).toHaveLength(1);
  });
});

describe("protected paths", () => {
  it("defaults cover hooks at any depth, git's folder, the command's files; paths out of the repo", () => {
    for (const p of [
      "conftest.py",
      "tests/conftest.py",
      "src/sitecustomize.py",
      "x/usercustomize.py",
      "evil.pth",
    ])
      expect(isProtected(p, RULES), p).toBe(true);
    for (const p of [
      "node_modules/assert/index.js",
      "pytest.ini",
      ".git/config",
      "sub/.git/hooks/pre-commit",
    ])
      expect(isProtected(p, RULES), p).toBe(true);
    expect(isProtected("tests/test_x.py", RULES)).toBe(true);
    expect(isProtected("../outside.js", RULES)).toBe(true);
    expect(isProtected("/etc/passwd", RULES)).toBe(true);
    expect(isProtected("calculator.js", RULES)).toBe(false);
    const bare = protectedRules({ default_protected_paths: false, protected_paths: ["fixtures/**"] }, [
      "t.js",
    ]);
    expect(isProtected("conftest.py", bare)).toBe(false);
    expect(isProtected("t.js", bare)).toBe(false);
    expect(isProtected("fixtures/a.json", bare)).toBe(true);
    expect(isProtected(".git/config", bare)).toBe(true);
    expect(() => protectedRules({ on_protected_change: "ignore" }, [])).toThrow(/on_protected_change/);
    expect(() => protectedRules({ protected_paths: "x" }, [])).toThrow(/protected_paths/);
  });

  it("names a change refused only for a default runner hook or config file, and tells those apart", () => {
    const rules = protectedRules({ protected_paths: ["fixtures/**"] }, ["tests/**"]);
    expect(protectedReason("setup.cfg", rules)).toBe(RUNNER_HOOK_REASON);
    expect(protectedReason("src/pkg/conftest.py", rules)).toBe(RUNNER_HOOK_REASON);
    expect(protectedReason("pyproject.toml", rules)).toBe(RUNNER_HOOK_REASON);
    // In the tests' folder, listed by the task, git's own, or outside: not just runner config.
    expect(protectedReason("tests/conftest.py", rules)).toBe("protected path");
    expect(protectedReason("fixtures/setup.cfg", rules)).toBe("protected path");
    expect(protectedReason(".git/config", rules)).toBe("protected path");
    expect(protectedReason("../setup.cfg", rules)).toBe("protected path");
    const change = (path: string, reason: string) => ({ path, change: "modify", reason });
    expect(onlyRunnerConfig([change("setup.cfg", RUNNER_HOOK_REASON)])).toBe(true);
    expect(onlyRunnerConfig([change("package.json", "package.json scripts changed")])).toBe(true);
    expect(
      onlyRunnerConfig([change("setup.cfg", RUNNER_HOOK_REASON), change("tests/t.py", "protected path")]),
    ).toBe(false);
    expect(onlyRunnerConfig([])).toBe(false);
  });

  it("finds the files a test command runs among the base tree's files", () => {
    const files = [
      "calculator.js",
      "test_calculator.js",
      "tests/test_a.py",
      "tests/data/x.json",
      "README.md",
    ];
    expect(commandPaths("node --test --test-reporter=junit test_calculator.js", files)).toEqual([
      "test_calculator.js",
    ]);
    expect(
      commandPaths("python3 -m pytest --junitxml={{REPORT}} tests/ ./tests/test_a.py::test_y", files),
    ).toEqual(["tests/**", "tests/test_a.py"]);
    expect(commandPaths("cd .. && make", files)).toEqual([]);
    // Data a command reads is not what it runs; a script given to an interpreter is.
    expect(commandPaths('grep -q "a + b" calculator.js', files)).toEqual([]);
    expect(commandPaths("bash grade.sh && node calculator.js", [...files, "grade.sh"])).toEqual([
      "grade.sh",
      "calculator.js",
    ]);
  });

  it("symlink destinations: inside the repository or null", () => {
    expect(symlinkDestination("a/b", "../c")).toBe("c");
    expect(symlinkDestination("a/b", "../../c")).toBeNull();
    expect(symlinkDestination("a", "/etc/passwd")).toBeNull();
  });

  it("splits a diff: protected sections, renames either way, escaping symlinks and smuggled hunks are refused", () => {
    const ok = section("calculator.js", "calculator.js", HUNK);
    const diff = [
      ok,
      section("test_calculator.js", "test_calculator.js", HUNK),
      "diff --git a/util.py b/conftest.py\nsimilarity index 100%\nrename from util.py\nrename to conftest.py\n",
      "diff --git a/test_calculator.js b/old.js\nsimilarity index 100%\nrename from test_calculator.js\nrename to old.js\n",
      "diff --git a/lib b/lib\nnew file mode 120000\n--- /dev/null\n+++ b/lib\n@@ -0,0 +1 @@\n+/etc\n",
      "diff --git a/t b/t\nnew file mode 120000\n--- /dev/null\n+++ b/t\n@@ -0,0 +1 @@\n+test_calculator.js\n",
      section(
        "a.js",
        "a.js",
        `${HUNK.replaceAll("/x", "/a.js")}--- a/tests/x.py\n+++ b/tests/x.py\n@@ -1 +1 @@\n-x\n+y\n`,
      ),
      "diff --git a/test_calculator.js b/test_calculator.js\nindex 1..2 100644\nGIT binary patch\nliteral 3\nKcmZ?wbhH\n\n",
      "diff --git a/test_calculator.js b/test_calculator.js\nold mode 100644\nnew mode 100755\n",
    ].join("");
    const { patch, refused } = splitProtected(diff, RULES);
    expect(patch).toBe(ok);
    expect(refused.map((r) => [r.path, r.reason])).toEqual([
      ["test_calculator.js", "protected path"],
      ["conftest.py", RUNNER_HOOK_REASON],
      ["test_calculator.js", "protected path"],
      ["lib", "symlink out of the repository"],
      ["t", "symlink to protected path test_calculator.js"],
      ["a.js", "unparsed: a second file's changes inside one section"],
      ["test_calculator.js", "protected path"],
      ["test_calculator.js", "protected path"],
    ]);
    expect(refused.slice(-2).map((r) => r.change)).toEqual(["modify", "mode"]);
    // The exclude filter reads the same sections (a space in a name no longer hides one).
    const spaced =
      "diff --git a/my notes.log b/my notes.log\n--- a/my notes.log\n+++ b/my notes.log\n@@ -1 +1 @@\n-a\n+b\n";
    expect(filterPatch(spaced, ["*.log"]).excluded).toEqual(["my notes.log"]);
  });
});

describe("JUnit reports, read strictly", () => {
  it("reads node --test and pytest reports: passed, failed, error, skipped; counts failures", () => {
    const node =
      '<?xml version="1.0" encoding="utf-8"?>\n<testsuites>\n\t<testcase name="test_add" time="0.1" classname="test"/>\n\t<testcase name="test_subtract" classname="test" failure="x"><failure type="testCodeFailure" message="x">boom &lt;a></failure></testcase>\n</testsuites>\n';
    expect(parseJunit(node)).toMatchObject({
      ok: true,
      tests: { test_add: "PASSED", test_subtract: "FAILED" },
      failures: 1,
    });
    const pytest =
      '<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" errors="1" failures="0" skipped="1" tests="3"><testcase classname="tests.test_calc" name="test_add" time="0.001" /><testcase classname="tests.test_calc" name="test_div"><error message="e">E</error></testcase><testcase classname="tests.test_calc" name="test_slow"><skipped type="pytest.skip" message="later">s</skipped></testcase></testsuite></testsuites>';
    expect(parseJunit(pytest)).toMatchObject({
      ok: true,
      tests: { test_add: "PASSED", test_div: "ERROR", test_slow: "SKIPPED" },
      failures: 1,
    });
  });

  it("keeps each testcase's classname and pytest's expected failures; keys by classname::name on request", () => {
    const xml =
      '<testsuites><testsuite><testcase classname="tests.test_a" name="test_x"/><testcase classname="tests.test_b.TestB" name="test_x"><skipped type="pytest.xfail" message="known"/></testcase><testcase classname="tests.test_b" name="test_y"><skipped type="pytest.skip"/></testcase></testsuite></testsuites>';
    expect(parseJunit(xml)).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/test_x.*more than once/),
    });
    const r = parseJunit(xml, "classname");
    expect(r).toMatchObject({
      ok: true,
      tests: {
        "tests.test_a::test_x": "PASSED",
        "tests.test_b.TestB::test_x": "SKIPPED",
        "tests.test_b::test_y": "SKIPPED",
      },
      failures: 0,
    });
    expect(r.ok && r.cases.map((c) => [c.classname, c.name, c.xfail])).toEqual([
      ["tests.test_a", "test_x", false],
      ["tests.test_b.TestB", "test_x", true],
      ["tests.test_b", "test_y", false],
    ]);
    // pytest's own mangling of node ids into those names (junitxml.mangle_test_address).
    expect(junitKeyOf("tests/test_b.py::TestB::test_x")).toBe("tests.test_b.TestB::test_x");
    expect(junitKeyOf("tests/test_a.py::test_x[a/b.py-1]")).toBe("tests.test_a::test_x[a/b.py-1]");
    expect(junitKeyOf("test_top.py::test_z")).toBe("test_top::test_z");
  });

  it("refuses two documents, a DOCTYPE, duplicate tests, a foreign root, junk and nothing", () => {
    const one = '<testsuites><testcase name="a"/></testsuites>';
    const refused = (xml: string) => {
      const r = parseJunit(xml);
      return r.ok ? "accepted" : r.reason;
    };
    expect(refused(one + one)).toMatch(/only one root/);
    expect(refused(`<!DOCTYPE t [<!ENTITY x "y">]>${one}`)).toMatch(/DOCTYPE/);
    expect(
      refused('<testsuites><testcase name="a"/><testcase name="a"><failure/></testcase></testsuites>'),
    ).toMatch(/more than once/);
    expect(refused('<html><testcase name="a"/></html>')).toMatch(/root element/);
    expect(refused(`${one}PASSED a`)).toMatch(/outside of root/);
    expect(refused("")).toMatch(/root/);
    expect(refused("<testsuites><testcase/></testsuites>")).toMatch(/without a name/);
  });
});

describe("the worktree and the grader's own files, on a real repository", { timeout: 60_000 }, () => {
  let root: string;
  let rt: Runtime;
  let target: GuardTarget;
  const git = (...args: string[]) =>
    // The session folder may belong to the session's own uid (a root gateway): git on the host must
    // not refuse it as another user's repository.
    execFileSync(
      "git",
      ["-c", "safe.directory=*", "-c", "user.email=p@example.com", "-c", "user.name=polar", ...args],
      {
        cwd: rt.workdir,
      },
    );
  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), "polar-guard-"));
    rt = await LocalRuntime.create(RuntimeSpec.parse({}), {
      workRoot: root,
      name: "g",
      session_id: "g",
      node_id: "n",
      proxyUrl: "http://127.0.0.1:9",
      settings: { ...DEFAULT_RUNTIME_SETTINGS, local: { sandbox: "never", bwrapPath: "bwrap" } },
      warn() {},
    });
    const w = rt.workdir;
    await mkdir(path.join(w, "tests"), { recursive: true });
    await writeFile(path.join(w, "calc.py"), "x = 1\n");
    await writeFile(path.join(w, "tests", "test_calc.py"), "def test_x(): pass\n");
    await writeFile(
      path.join(w, "package.json"),
      '{"name":"c","version":"1.0.0","scripts":{"test":"node --test"}}\n',
    );
    await writeFile(path.join(w, ".gitignore"), "node_modules\n");
    git("init", "-q", ".");
    git("add", "-A");
    git("commit", "-qm", "base");
    target = {
      runtime: rt,
      repoDir: w,
      base: "HEAD",
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
      signal: new AbortController().signal,
      timeoutMs: 30_000,
    };
  });
  afterAll(async () => {
    await rt.teardown({ keep: false });
    await rm(root, { recursive: true, force: true });
  });

  it("flags protected edits, ignored hooks, escaping symlinks and scripts changes; restores the base", async () => {
    const w = rt.workdir;
    const rules = protectedRules({}, ["tests/**"]);
    const base = await listBaseFiles(target);
    expect(base.sort()).toEqual([".gitignore", "calc.py", "package.json", "tests/test_calc.py"]);
    await writeFile(path.join(w, "calc.py"), "x = 2\n");
    await writeFile(path.join(w, "tests", "test_calc.py"), "def test_x(): assert True\n");
    await mkdir(path.join(w, "node_modules", "left-pad"), { recursive: true });
    await writeFile(path.join(w, "node_modules", "left-pad", "index.js"), "module.exports = 1\n");
    await writeFile(path.join(w, "conftest.py"), "import pytest\n");
    await symlink("/etc", path.join(w, "etc"));
    await writeFile(
      path.join(w, "package.json"),
      '{"name":"c","version":"2.0.0","scripts":{"test":"true"}}\n',
    );
    const found = await checkWorktree(target, rules, base);
    expect(found.map((v) => [v.path, v.reason]).sort()).toEqual(
      [
        ["conftest.py", RUNNER_HOOK_REASON],
        ["etc", "symlink out of the repository"],
        ["node_modules/left-pad/index.js", RUNNER_HOOK_REASON],
        ["package.json", "package.json scripts changed"],
        ["tests/test_calc.py", "protected path"],
      ].sort(),
    );
    await restoreWorktree(target, found, base);
    expect(await checkWorktree(target, rules, base)).toEqual([]);
    expect(await readFile(path.join(w, "tests", "test_calc.py"), "utf8")).toBe("def test_x(): pass\n");
    expect(await readFile(path.join(w, "calc.py"), "utf8")).toBe("x = 2\n");
    // A version bump alone is the agent's to make.
    await writeFile(
      path.join(w, "package.json"),
      '{"name":"c","version":"3.0.0","scripts":{"test":"node --test"}}\n',
    );
    expect(await checkWorktree(target, rules, base)).toEqual([]);
  });

  it("refuses to write through a planted symlink and names the grader files that were replaced", async () => {
    const victim = path.join(root, "victim.txt");
    await writeFile(victim, "keep me\n");
    await symlink(victim, path.join(rt.hostDir, "artifacts", "patch.diff"));
    await expect(writeGraderFile(path.join(rt.hostDir, "artifacts", "patch.diff"), "x")).rejects.toThrow(
      /not a regular file/,
    );
    await rm(path.join(rt.hostDir, "logs"), { recursive: true });
    await symlink(root, path.join(rt.hostDir, "logs"));
    expect((await checkGraderFiles(rt)).sort()).toEqual(["artifacts/patch.diff (symlink)", "logs (symlink)"]);
    expect(await checkGraderFiles(rt)).toEqual([]);
    await writeGraderFile(path.join(rt.hostDir, "artifacts", "patch.diff"), "x");
    expect(await readFile(victim, "utf8")).toBe("keep me\n");
  });

  it("the report channel: a fresh folder per run; no report, a symlinked report, a swapped folder", async () => {
    const a = await openReportChannel(rt);
    const b = await openReportChannel(rt);
    expect(a.sandboxPath).not.toBe(b.sandboxPath);
    expect(a.sandboxPath).toMatch(/\/\.polar-report-[0-9a-f]{32}\/report\.xml$/);
    expect(a.command("pytest --junitxml={{REPORT}} -q")).toBe(`pytest --junitxml=${a.sandboxPath} -q`);
    expect(await a.read()).toBeNull();
    await writeFile(a.hostPath, "<testsuites/>");
    expect(await a.read()).toBe("<testsuites/>");
    await rm(a.hostPath);
    await symlink(path.join(root, "victim.txt"), a.hostPath);
    await expect(a.read()).rejects.toThrow(ReportRefused);
    const dir = path.dirname(b.hostPath);
    await rename(dir, `${dir}-moved`);
    await mkdir(dir);
    await writeFile(b.hostPath, "<testsuites/>");
    await expect(b.read()).rejects.toThrow(/replaced/);
    await a.dispose();
    await b.dispose();
  });
});
