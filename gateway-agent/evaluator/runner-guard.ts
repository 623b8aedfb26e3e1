/**
 * The runner guard of the patch evaluators, for pytest test commands: the gateway hands pytest a
 * plugin (`polar_pytest_guard.py`, beside this file) that records every test's outcome from the
 * test call itself and signs each record with a key only its audit hook holds; after the run the
 * gateway verifies the records and refuses a report that passes a test the guard did not see
 * pass (verdict `runner_tampered`). This closes what a report channel cannot: code under test
 * that runs inside pytest's own process (tests that `import` it) and patches pytest's reporting.
 *
 * The key and the guard's files live in the report's nonce folder (`guard/`), made after the
 * patch is applied; the guard reads the key and unlinks it before any conftest, test module or
 * code under test is imported. What the guard closes and what it cannot: docs/evaluators.md.
 *
 * Config (`evaluator.config.runner_guard`): `auto` (default: on when the test command runs
 * pytest), `pytest` (on), `off`.
 *
 * @module
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { chmod, copyFile, mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { quote } from "shell-quote";
import { SessionFailure } from "../errors";
import { type JunitCase, junitKeyOf } from "./junit";
import type { ReportChannel } from "./report-channel";

/** The guard plugin's source (a runtime asset: the gateway package copies it beside its code). */
export const GUARD_SOURCE = fileURLToPath(new URL("./polar_pytest_guard.py", import.meta.url));

/** The module name pytest loads (`-p polar_pytest_guard`). */
export const GUARD_MODULE = "polar_pytest_guard";

/** Whether a test run gets the guard. */
export type GuardMode = "pytest" | "off";

/** A command that runs pytest: `pytest`, `py.test` or `python -m pytest` as a word of it. */
export const RUNS_PYTEST = /(^|[^\w.-])(pytest|py\.test)($|[^\w.-])/;

/**
 * The `runner_guard` key, with `auto` (the default) deciding by the test command.
 *
 * @example
 * ```ts
 * guardMode({}, "python3 -m pytest --junitxml={{REPORT}} tests"); // "pytest"
 * guardMode({}, "node --test"); // "off"
 * ```
 */
export function guardMode(config: Record<string, unknown>, testCommand: string): GuardMode {
  const v = config.runner_guard ?? "auto";
  if (v === "pytest" || v === "off") return v;
  if (v !== "auto")
    throw new SessionFailure("configuration", "evaluator.config.runner_guard: must be auto, pytest or off");
  return RUNS_PYTEST.test(testCommand) ? "pytest" : "off";
}

/** One verified record of the guard. */
interface GuardLine {
  seq: number;
  pid: number;
  kind: string;
  fields: string[];
}

/** What the guard's records say about one run. */
export interface GuardRecords {
  /** False when the guard wrote nothing (it never started). */
  present: boolean;
  /** Why the records cannot be trusted (unsigned lines, gaps, no end), or null. */
  problem: string | null;
  start: {
    python: string;
    pytest: string;
    audit_hooks: boolean;
    dumpable: boolean;
    landlock: number;
    ctypes: string;
    /** pytest or pluggy is the code under test: the guard stands on nothing and does nothing. */
    runner_under_test: boolean;
    /** pytest was started through its main(): the anchor of the guard's stack checks. */
    main: boolean;
  } | null;
  /** Node id → what collection made of it (`function`, `async`, `report`) and its xfail mark. */
  collected: Map<string, { kind: string; xfail: boolean }>;
  /** Node id → the outcome of the test call the guard made (the last one). */
  calls: Map<string, string>;
  /** Node id → the call-phase report of an item the guard cannot call (unittest, doctest). */
  reports: Map<string, { outcome: string; wasxfail: boolean }>;
  /** Async tests the guard left to their plugin. */
  unguarded: string[];
  violations: Array<{ kind: string; detail: string }>;
  notes: string[];
  end: { exitstatus: number; calls: number } | null;
}

const unhex = (s: string) => Buffer.from(s, "hex").toString("utf8");

/** The signed lines of the records, or why they are refused (a line the guard did not sign). */
function signedLines(text: string, key: Buffer): GuardLine[] | string {
  const lines: GuardLine[] = [];
  for (const raw of text.split("\n").slice(0, -1)) {
    const cut = raw.lastIndexOf("\t");
    const body = raw.slice(0, cut);
    const mac = Buffer.from(raw.slice(cut + 1), "hex");
    const want = createHmac("sha256", key).update(body, "latin1").digest();
    if (cut < 0 || mac.length !== want.length || !timingSafeEqual(mac, want))
      return "a line in the guard's records that the guard did not sign";
    const [seq, pid, kind, ...fields] = body.split("\t");
    lines.push({ seq: Number(seq), pid: Number(pid), kind: kind ?? "", fields });
  }
  return lines;
}

/**
 * Adds a record of the run's own process to `out`: null, or why the records are refused (a second
 * start, an unknown kind).
 */
function readRecord(out: GuardRecords, line: GuardLine): string | null {
  const f = line.fields;
  switch (line.kind) {
    case "start":
      if (line.seq !== 0) return "a second start record";
      out.start = {
        python: unhex(f[1] ?? ""),
        pytest: unhex(f[2] ?? ""),
        audit_hooks: f[3] === "1",
        dumpable: f[4] === "1",
        landlock: Number(f[5] ?? 0),
        ctypes: unhex(f[6] ?? ""),
        runner_under_test: f[7] === "1",
        main: f[8] === "1",
      };
      return null;
    case "collected":
      out.collected.set(unhex(f[0] ?? ""), { kind: f[1] ?? "", xfail: f[2] === "1" });
      return null;
    case "call":
      out.calls.set(unhex(f[0] ?? ""), f[1] ?? "");
      return null;
    case "report":
      if (f[1] === "call" || (f[1] === "setup" && f[2] !== "passed"))
        out.reports.set(unhex(f[0] ?? ""), { outcome: f[2] ?? "", wasxfail: f[3] === "1" });
      return null;
    case "unguarded":
      out.unguarded.push(unhex(f[0] ?? ""));
      return null;
    case "end":
      out.end = { exitstatus: Number(f[0]), calls: Number(f[1]) };
      return null;
    default:
      return readShared(out, line) ? null : `an unknown record kind '${line.kind}'`;
  }
}

/**
 * Adds a violation or note, the records any process of the run may write (a process forked from
 * it keeps the guard's hook, with a copy of its counter); false for any other record.
 */
function readShared(out: GuardRecords, line: GuardLine): boolean {
  const f = line.fields;
  if (line.kind === "violation") out.violations.push({ kind: f[0] ?? "", detail: unhex(f[1] ?? "") });
  else if (line.kind === "note") out.notes.push(`${f[0]}: ${unhex(f[1] ?? "")}`);
  else return false;
  return true;
}

/**
 * Verifies and reads the guard's records: every line must carry a valid HMAC under `key`; the
 * lines of the run's own process (the start record's pid) must count up from 0 with none missing
 * and end with an `end` record. Lines of other processes (children forked from the run) may only
 * be violations or notes.
 *
 * @example
 * ```ts
 * const records = verifyGuardRecords(await channel.readFile("guard/records"), key);
 * ```
 */
export function verifyGuardRecords(text: string | null, key: Buffer): GuardRecords {
  const out: GuardRecords = {
    present: text !== null && text !== "",
    problem: null,
    start: null,
    collected: new Map(),
    calls: new Map(),
    reports: new Map(),
    unguarded: [],
    violations: [],
    notes: [],
    end: null,
  };
  if (!text) return out;
  const refuse = (why: string) => {
    out.problem ??= why;
    return out;
  };
  if (!text.endsWith("\n"))
    refuse("the guard's records end mid-line (the run was cut short or the file written to)");
  const lines = signedLines(text, key);
  if (typeof lines === "string") return refuse(lines);
  const first = lines[0];
  if (first?.kind !== "start" || first.seq !== 0)
    return refuse("the guard's records do not begin with its start");
  let expected = 0;
  for (const line of lines) {
    if (line.pid !== first.pid) {
      if (!readShared(out, line)) return refuse(`a ${line.kind} record from another process`);
      continue;
    }
    if (line.seq !== expected++)
      return refuse("the guard's records have a gap (a record was removed or reordered)");
    if (out.end) return refuse("a record after the guard's end");
    const problem = readRecord(out, line);
    if (problem) return refuse(problem);
  }
  return out;
}

/** A report testcase that gives credit: a pass, or (for SWE-bench) an expected failure. */
export type Credit = (c: JunitCase) => "pass" | "xfail" | null;

/** What the cross-check found: null when the report stands, else why it is refused. */
export interface GuardJudgement {
  problem: string | null;
  /** For the evaluation report (`runner_guard`). */
  summary: Record<string, unknown>;
}

/**
 * Holds the report's credited testcases against the guard's records: a pass needs a test call
 * the guard saw return; an expected failure needs a call that raised (or `pytest.xfail()`) on a
 * test collected with an xfail mark. Items the guard cannot call itself (unittest methods,
 * doctests, plugin items) are held against the call-phase report it recorded (`via_report`), async
 * tests are left to their plugin (`unguarded`): both are listed.
 *
 * @example
 * ```ts
 * const j = judgeGuard(records, junit.cases, (c) => (c.status === "PASSED" ? "pass" : null));
 * if (j.problem) return zero("runner_tampered", j.problem);
 * ```
 */
export function judgeGuard(
  records: GuardRecords,
  cases: readonly JunitCase[],
  credit: Credit,
): GuardJudgement {
  const s = records.start;
  const summary: Record<string, unknown> = {
    mode: "pytest",
    ...(s
      ? {
          python: s.python,
          pytest: s.pytest,
          audit_hooks: s.audit_hooks,
          process_dumpable: s.dumpable,
          landlock_abi: s.landlock,
          ctypes: s.ctypes,
        }
      : {}),
    collected: records.collected.size,
    calls: records.calls.size,
    violations: records.violations,
    notes: records.notes,
  };
  const refuse = (problem: string): GuardJudgement => ({ problem, summary });
  if (!records.present)
    return refuse("the runner guard wrote no records: pytest ran without it, or they were removed");
  if (records.problem) return refuse(records.problem);
  if (!s) return refuse("the guard's records have no start");
  if (s.runner_under_test || !s.main) {
    // Nothing to stand on (pytest itself is the code under test, or no main()): the report stands alone.
    summary.applicable = false;
    summary.reason = s.runner_under_test
      ? "pytest or pluggy is the code under test"
      : "pytest was not started through its main()";
    return { problem: null, summary };
  }
  summary.applicable = true;
  if (records.violations.length > 0) {
    const shown = records.violations.slice(0, 5).map((v) => `${v.kind} (${v.detail})`);
    return refuse(`the runner guard saw: ${shown.join("; ")}${records.violations.length > 5 ? "; …" : ""}`);
  }
  if (!records.end)
    return refuse("the guarded run ended before the guard's end record (killed or exited early)");
  const byKey = new Map<string, string>();
  for (const nodeid of records.collected.keys()) byKey.set(junitKeyOf(nodeid), nodeid);
  const viaReport: string[] = [];
  const unguarded: string[] = [];
  for (const c of cases) {
    const wants = credit(c);
    if (!wants) continue;
    const nodeid = byKey.get(`${c.classname}::${c.name}`);
    const label = nodeid ?? `${c.classname}::${c.name}`;
    const item = nodeid ? records.collected.get(nodeid) : undefined;
    if (!nodeid || !item) return refuse(`the report credits ${label}, which the guard never collected`);
    if (item.kind === "async") {
      unguarded.push(nodeid);
      continue;
    }
    if (item.kind === "report") {
      const rep = records.reports.get(nodeid);
      const ok =
        wants === "pass" ? rep?.outcome === "passed" : rep?.outcome === "skipped" && rep.wasxfail === true;
      if (!ok)
        return refuse(
          `the report credits ${nodeid}, but pytest's own report of its call said ${rep?.outcome ?? "nothing"}`,
        );
      viaReport.push(nodeid);
      continue;
    }
    const call = records.calls.get(nodeid);
    const ok = wants === "pass" ? call === "passed" : call === "xfailed" || (call === "failed" && item.xfail);
    if (!ok)
      return refuse(
        `the report ${wants === "pass" ? "passes" : "counts as an expected failure"} ${nodeid}, but the guard saw its call ${call ? `end ${call}` : "never happen"}`,
      );
  }
  summary.via_report = viaReport;
  summary.unguarded = unguarded;
  return { problem: null, summary };
}

/** The guard set up for one test run. */
export interface RunnerGuard {
  /** `testCommand` with the guard's environment exported in front of it. */
  command(testCommand: string): string;
  /** Reads and verifies what the guard wrote (after the run). */
  records(): Promise<GuardRecords>;
}

/**
 * Puts the guard's files into the report channel's folder: the plugin, a fresh key (which the
 * guard unlinks when it loads), and its config (the repository's path as the sandbox sees it,
 * then the protected files, relative to it, whose content it holds the run to).
 *
 * @example
 * ```ts
 * const guard = await openRunnerGuard(channel, "/testbed", ["tests/test_calc.py", "conftest.py"]);
 * await grading.exec(guard.command(channel.command(testCommand)), opts);
 * const records = await guard.records();
 * ```
 */
export async function openRunnerGuard(
  channel: ReportChannel,
  repoDir: string,
  protectedFiles: readonly string[],
): Promise<RunnerGuard> {
  const hostDir = path.join(channel.folder.host, "guard");
  const sandboxDir = path.posix.join(channel.folder.sandbox, "guard");
  const key = randomBytes(32);
  await mkdir(hostDir);
  // The sandbox's user may not be the gateway's (containers): it reads these and writes records.
  await chmod(hostDir, 0o777);
  await copyFile(GUARD_SOURCE, path.join(hostDir, `${GUARD_MODULE}.py`));
  await writeFile(path.join(hostDir, "key"), key.toString("hex"), { mode: 0o444 });
  const files = protectedFiles.filter((f) => f.endsWith(".py") && !/[\n\r]/.test(f));
  await writeFile(path.join(hostDir, "config"), [repoDir, ...files].join("\n"), { mode: 0o444 });
  const dir = quote([sandboxDir]);
  return {
    command: (testCommand) =>
      [
        `export POLAR_PYTEST_GUARD=${dir}`,
        `export PYTHONPATH=${dir}\${PYTHONPATH:+:$PYTHONPATH}`,
        `export PYTEST_ADDOPTS="-p ${GUARD_MODULE}\${PYTEST_ADDOPTS:+ $PYTEST_ADDOPTS}"`,
        testCommand,
      ].join("; "),
    records: async () => verifyGuardRecords(await channel.readFile("guard/records"), key),
  };
}
