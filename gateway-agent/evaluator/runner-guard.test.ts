import { execFileSync } from "node:child_process";
import { createHmac } from "node:crypto";
import { cp, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import { RuntimeSpec } from "../../protocol";
import { describeWith } from "../../test/support/optional-tools";
import { LocalRuntime } from "../runtime/local";
import { DEFAULT_RUNTIME_SETTINGS } from "../runtime/types";
import { type JunitCase, parseJunit } from "./junit";
import { openReportChannel } from "./report-channel";
import {
  GUARD_SOURCE,
  type GuardRecords,
  guardMode,
  judgeGuard,
  openRunnerGuard,
  verifyGuardRecords,
} from "./runner-guard";

const KEY = Buffer.alloc(32, 7);
const hex = (s: string) => Buffer.from(s).toString("hex");
/** Lines as the guard writes them: `seq pid kind fields… mac`. */
function signed(lines: Array<[number, number, string, ...string[]]>, key = KEY): string {
  return lines
    .map(([seq, pid, kind, ...fields]) => {
      const body = [String(seq), String(pid), kind, ...fields].join("\t");
      return `${body}\t${createHmac("sha256", key).update(body).digest("hex")}\n`;
    })
    .join("");
}
const START: [number, number, string, ...string[]] = [
  0,
  100,
  "start",
  "1",
  hex("3.11.2"),
  hex("7.2.1"),
  "1",
  "0",
  "7",
  hex("refused"),
  "0",
  "1",
  hex("/repo"),
];
const ADD = "tests/test_basic.py::test_add";
const MUL = "tests/test_more.py::test_multiply";
const junitCase = (nodeid: string, status: JunitCase["status"], xfail = false): JunitCase => {
  const [file, name] = nodeid.split("::") as [string, string];
  return { classname: file.replace(/\//g, ".").replace(/\.py$/, ""), name, status, xfail };
};
const pass = (c: JunitCase) =>
  c.status === "PASSED" ? "pass" : c.status === "SKIPPED" && c.xfail ? "xfail" : null;

describe("the runner guard's records", () => {
  it("turns on for pytest commands only, unless told", () => {
    expect(guardMode({}, "python3 -m pytest --junitxml={{REPORT}} tests")).toBe("pytest");
    expect(guardMode({}, "cd src && /usr/bin/py.test -q")).toBe("pytest");
    expect(guardMode({}, "node --test --test-reporter=junit")).toBe("off");
    expect(guardMode({}, "pip install pytest-xdist-like && node x.js")).toBe("off");
    expect(guardMode({ runner_guard: "off" }, "pytest")).toBe("off");
    expect(guardMode({ runner_guard: "pytest" }, "make test")).toBe("pytest");
    expect(() => guardMode({ runner_guard: true }, "pytest")).toThrow(/runner_guard/);
  });

  it("reads signed records; refuses unsigned lines, gaps, another key, records after the end", () => {
    const good = signed([
      START,
      [1, 100, "collected", hex(ADD), "function", "0"],
      [2, 100, "call", hex(ADD), "passed"],
      [3, 100, "end", "0", "1", "0"],
    ]);
    const r = verifyGuardRecords(good, KEY);
    expect(r).toMatchObject({ present: true, problem: null, end: { exitstatus: 0, calls: 1 } });
    expect(r.start).toMatchObject({ python: "3.11.2", pytest: "7.2.1", audit_hooks: true, landlock: 7 });
    expect(r.calls.get(ADD)).toBe("passed");
    const problem = (text: string | null, key = KEY) => verifyGuardRecords(text, key).problem;
    expect(problem(`${good}1\t100\tcall\t${hex(MUL)}\tpassed\t${"0".repeat(64)}\n`)).toMatch(/did not sign/);
    expect(problem(good, Buffer.alloc(32, 8))).toMatch(/did not sign/);
    expect(problem(signed([START, [2, 100, "call", hex(ADD), "passed"]]))).toMatch(/gap/);
    expect(
      problem(signed([START, [1, 100, "end", "0", "0", "0"], [2, 100, "call", hex(ADD), "passed"]])),
    ).toMatch(/after the guard's end/);
    expect(problem(good.slice(0, -1))).toMatch(/mid-line/);
    // A forked child's hook: its violations count, its other records are refused.
    const child = verifyGuardRecords(
      signed([
        START,
        [1, 100, "end", "0", "0", "0"],
        [1, 101, "violation", "refused", hex("gc.get_objects")],
      ]),
      KEY,
    );
    expect(child).toMatchObject({
      problem: null,
      violations: [{ kind: "refused", detail: "gc.get_objects" }],
    });
    expect(problem(signed([START, [1, 101, "call", hex(ADD), "passed"]]))).toMatch(/another process/);
    expect(verifyGuardRecords(null, KEY)).toMatchObject({ present: false, problem: null });
  });

  it("holds a report's passes to the guard's calls", () => {
    const records = (extra: Array<[number, number, string, ...string[]]>, end = true): GuardRecords =>
      verifyGuardRecords(
        signed([
          START,
          [1, 100, "collected", hex(ADD), "function", "0"],
          [2, 100, "collected", hex(MUL), "function", "1"],
          ...extra,
          ...(end
            ? [[3 + extra.length, 100, "end", "1", "2", "0"] as [number, number, string, ...string[]]]
            : []),
        ]),
        KEY,
      );
    const calls = records([
      [3, 100, "call", hex(ADD), "passed"],
      [4, 100, "call", hex(MUL), "failed"],
    ]);
    expect(judgeGuard(calls, [junitCase(ADD, "PASSED"), junitCase(MUL, "FAILED")], pass).problem).toBeNull();
    // The report passes what the guard saw fail.
    expect(judgeGuard(calls, [junitCase(ADD, "PASSED"), junitCase(MUL, "PASSED")], pass).problem).toMatch(
      /passes tests\/test_more.py::test_multiply, but the guard saw its call end failed/,
    );
    // An expected failure needs an xfail mark on a call that raised (test_multiply has one).
    expect(judgeGuard(calls, [junitCase(MUL, "SKIPPED", true)], pass).problem).toBeNull();
    expect(judgeGuard(calls, [junitCase(ADD, "SKIPPED", true)], pass).problem).toMatch(/expected failure/);
    expect(judgeGuard(calls, [junitCase("tests/test_x.py::test_new", "PASSED")], pass).problem).toMatch(
      /never collected/,
    );
    const noEnd = records([[3, 100, "call", hex(ADD), "passed"]], false);
    expect(judgeGuard(noEnd, [junitCase(ADD, "PASSED")], pass).problem).toMatch(/end record/);
    const seen = records([[3, 100, "violation", "refused", hex("sys.settrace")]]);
    expect(judgeGuard(seen, [], pass).problem).toMatch(/refused \(sys.settrace\)/);
    expect(judgeGuard(verifyGuardRecords(null, KEY), [], pass).problem).toMatch(/no records/);
  });

  it("the audit hook, its handlers and the test shim look up no global name (each one could be patched)", () => {
    const script = `
import dis, sys
source = open(sys.argv[1]).read()
top = compile(source, sys.argv[1], "exec")
found = {}
def walk(code):
    for c in code.co_consts:
        if hasattr(c, "co_code"):
            found.setdefault(c.co_name, []).append(c)
            walk(c)
walk(top)
names = ["hook", "emit", "sign", "violation", "hx", "where", "trusted_code", "stack_ok", "caller_is", "is_sub",
         "class_trusted", "snapshot_class", "unwrap_facts", "integrity_changes", "value_trusted", "importer_of",
         "read_all", "digest_of_c", "add_code", "polar_guarded_test"]
names += [n for n in found if n.startswith("on_")]
bad = []
for name in names:
    assert name in found, name
    for code in found[name]:
        for ins in dis.get_instructions(code):
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL"):
                bad.append(name + ": " + str(ins.argval))
print("\\n".join(bad) if bad else "none")
`;
    const out = execFileSync("python3", ["-c", script, GUARD_SOURCE], { encoding: "utf8" }).trim();
    expect(out).toBe("none");
  });
});

// A real pytest run with the guard, outside any sandbox: the repository's python3 (a pytest other
// than the sandbox's Debian one, so both are exercised between this file and the battery).
describeWith(["pytest"], "a guarded pytest run on the in-process example", { timeout: 60_000 }, () => {
  let root: string;
  let rt: LocalRuntime;
  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), "polar-guard-"));
    rt = await LocalRuntime.create(RuntimeSpec.parse({}), {
      workRoot: root,
      name: "guard",
      session_id: "guard",
      node_id: "n",
      proxyUrl: "http://127.0.0.1:9",
      settings: { ...DEFAULT_RUNTIME_SETTINGS, local: { sandbox: "never", bwrapPath: "bwrap" } },
      warn() {},
    });
  });
  afterAll(async () => {
    await rt?.teardown({ keep: false });
    await rm(root, { recursive: true, force: true });
  });

  async function run(change: (repo: string) => Promise<void>) {
    const repo = path.join(rt.workdir, `repo-${Math.random().toString(36).slice(2)}`);
    await cp(path.join(REPO_ROOT, "examples", "pycalc_inprocess", "repo"), repo, { recursive: true });
    await change(repo);
    const channel = await openReportChannel(rt);
    const guard = await openRunnerGuard(channel, repo, ["tests/test_basic.py", "tests/test_more.py"]);
    const r = await rt.exec(
      guard.command(channel.command("python3 -m pytest -q -p no:cacheprovider --junitxml={{REPORT}} tests")),
      {
        env: { ...rt.baseEnv(), PYTHONDONTWRITEBYTECODE: "1" },
        cwd: repo,
        logName: "guarded",
        capture: true,
      },
    );
    const xml = await channel.read();
    const junit = xml === null ? null : parseJunit(xml);
    const records = await guard.records();
    const left = await readdir(path.join(channel.folder.host, "guard"));
    await channel.dispose();
    return { r, junit, records, left };
  }

  it("an honest fix passes the check; the key is gone from the guard's folder", async () => {
    const { r, junit, records, left } = await run(async (repo) => {
      const file = path.join(repo, "pycalc.py");
      const text = await readFile(file, "utf8");
      await writeFile(file, text.replace(/(def multiply\(a, b\):\n\s+return a) \+ b/, "$1 * b"));
    });
    expect(r.exitCode, r.stdout).toBe(0);
    expect(junit?.ok && junit.cases.every((c) => c.status === "PASSED")).toBe(true);
    expect(records).toMatchObject({ present: true, problem: null, violations: [] });
    expect(records.calls.size).toBe(4);
    expect(left.sort()).toEqual(["config", "polar_pytest_guard.py", "records"]);
    expect(judgeGuard(records, junit?.ok ? junit.cases : [], pass).problem).toBeNull();
  });

  it("the issue's patch of pytest's reporting: the report passes test_multiply, the guard saw it fail", async () => {
    const { r, junit, records } = await run(async (repo) => {
      await writeFile(
        path.join(repo, "pycalc.py"),
        `${await readFile(path.join(repo, "pycalc.py"), "utf8")}
import _pytest.reports as _reports

_made = _reports.TestReport.from_item_and_call.__func__


def _passed(cls, item, call):
    report = _made(cls, item, call)
    report.outcome, report.longrepr = "passed", None
    return report


_reports.TestReport.from_item_and_call = classmethod(_passed)
`,
      );
    });
    expect(r.exitCode, r.stdout).toBe(0);
    expect(junit?.ok && junit.tests.test_multiply).toBe("PASSED");
    expect(records.calls.get("tests/test_more.py::test_multiply")).toBe("failed");
    expect(records.violations).toContainEqual({
      kind: "runner_modified",
      detail: "_pytest.reports.TestReport.from_item_and_call",
    });
    expect(judgeGuard(records, junit?.ok ? junit.cases : [], pass).problem).toMatch(/runner_modified/);
  });
});
