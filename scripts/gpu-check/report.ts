/**
 * The result rows of `scripts/gpu-check.sh` and how they are printed: one row per contract check
 * (PASS, FAIL, WARN or SKIP, with what was seen), plus the measured figures, as a table for a person
 * or as JSON for a log collector.
 *
 * @module
 */

/**
 * How one check ended: `PASS` the engine behaved as Polar-TS relies on; `FAIL` it did not (the
 * script exits 1); `WARN` nothing is broken but the operator should know (a capability missing, a
 * model that did not do what the check hoped for); `SKIP` the check does not apply to this engine.
 */
export type CheckStatus = "PASS" | "FAIL" | "WARN" | "SKIP";

/** One row of the report. */
export interface CheckRow {
  /** Which engine the row is about: `sglang`, `vllm`. */
  engine: string;
  /** Short name of the check, e.g. `generate shape`, `abort`. */
  check: string;
  status: CheckStatus;
  /** What was seen, in one line. */
  detail: string;
  /** Wall time of the check (ms). */
  ms: number;
}

/** A measured figure (the proxy's added latency, the bridge's per-turn cost, …). */
export interface Figure {
  engine: string;
  name: string;
  value: number;
  unit: string;
  note?: string;
}

/**
 * A check failed: thrown inside a check body, it becomes a `FAIL` row with this message.
 *
 * @example
 * ```ts
 * if (res.status !== 200) throw new CheckFailure(`/generate answered ${res.status}`);
 * ```
 */
export class CheckFailure extends Error {
  override readonly name = "CheckFailure";
}

/**
 * The check does not fail but ends with another status (`WARN`, `SKIP`) and this message.
 *
 * @example
 * ```ts
 * if (!info.has_image_understanding) throw new CheckOutcome("SKIP", "the model takes no images");
 * ```
 */
export class CheckOutcome extends Error {
  override readonly name = "CheckOutcome";
  constructor(
    readonly status: Exclude<CheckStatus, "FAIL">,
    message: string,
  ) {
    super(message);
  }
}

/** Collects rows and figures while the checks run. */
export class Report {
  readonly rows: CheckRow[] = [];
  readonly figures: Figure[] = [];

  constructor(private readonly onRow: (row: CheckRow) => void = () => {}) {}

  /**
   * Runs one check: its body returns the PASS detail, or throws {@link CheckFailure} (FAIL),
   * {@link CheckOutcome} (WARN/SKIP) or anything else (FAIL, with the error's message).
   *
   * @example
   * ```ts
   * await report.run("sglang", "health", async () => "200 in 12 ms");
   * ```
   */
  async run(engine: string, check: string, body: () => Promise<string>): Promise<CheckRow> {
    const started = performance.now();
    let status: CheckStatus = "PASS";
    let detail: string;
    try {
      detail = await body();
    } catch (err) {
      if (err instanceof CheckOutcome) {
        status = err.status;
        detail = err.message;
      } else {
        status = "FAIL";
        detail = err instanceof Error ? err.message : String(err);
      }
    }
    const row = {
      engine,
      check,
      status,
      detail: oneLine(detail),
      ms: Math.round(performance.now() - started),
    };
    this.rows.push(row);
    this.onRow(row);
    return row;
  }

  /** Records a measured figure. */
  figure(f: Figure): void {
    this.figures.push(f);
  }

  /** True when no row failed. */
  get passed(): boolean {
    return this.rows.every((r) => r.status !== "FAIL");
  }

  /** Counts per status. */
  counts(): Record<CheckStatus, number> {
    const out: Record<CheckStatus, number> = { PASS: 0, FAIL: 0, WARN: 0, SKIP: 0 };
    for (const r of this.rows) out[r.status]++;
    return out;
  }
}

function oneLine(text: string): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > 300 ? `${flat.slice(0, 297)}...` : flat;
}

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
}

/**
 * The report as text: the checks, the figures, and a closing count line
 * (`gpu-check: N passed, N failed, N warned, N skipped`).
 *
 * @example
 * ```ts
 * console.log(formatReport(report));
 * ```
 */
export function formatReport(report: Report): string {
  const parts = [
    table(
      ["engine", "check", "status", "ms", "detail"],
      report.rows.map((r) => [r.engine, r.check, r.status, String(r.ms), r.detail]),
    ),
  ];
  if (report.figures.length > 0) {
    parts.push(
      table(
        ["engine", "figure", "value", "note"],
        report.figures.map((f) => [f.engine, f.name, `${round(f.value)} ${f.unit}`, f.note ?? ""]),
      ),
    );
  }
  const c = report.counts();
  parts.push(`gpu-check: ${c.PASS} passed, ${c.FAIL} failed, ${c.WARN} warned, ${c.SKIP} skipped`);
  return parts.join("\n\n");
}

function round(v: number): string {
  return Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 1 ? v.toFixed(2) : v.toFixed(3);
}
