/**
 * The fault matrix, short: 100 sessions of at most 6 s each over 4 gateway processes, with every
 * fault of the matrix injected once (`npm run test:faults` runs it at 2,000 sessions and reports the figures,
 * docs/reliability.md). Every session must end exactly once, nothing lost or duplicated, infra
 * failures run again and never scored, each finished session with exactly the model calls it made.
 */
import { expect } from "vitest";
import { itWith } from "../support/optional-tools";
import { reportMarkdown } from "./checks";
import { runFaultMatrix } from "./matrix";

itWith(
  ["bubblewrap", "faketime"],
  "100 sessions through every fault once: each ends exactly once, infra failures run again and never scored",
  { timeout: 900_000 },
  async () => {
    const lines: string[] = [];
    const report = await runFaultMatrix({
      sessions: 100,
      gateways: 4,
      maxRun: 6,
      workSeconds: 6,
      seed: 7,
      hangShare: 0.05,
      flakyRuntimeShare: 0.1,
      engineRetrySeconds: 6,
      timeoutMs: 600_000,
      faults: {
        gatewayKillMidRun: 1,
        gatewayKillBeforeAck: 1,
        controlPlaneKill: 1,
        controlPlaneKillDuringLoan: 1,
        engineErrorBursts: 1,
        engineOutages: 1,
        engineStalls: 1,
        flakyLinkCycles: 1,
        fenceCycles: 2,
      },
      log: (line) => lines.push(line),
    });
    const text = `${reportMarkdown(report)}\n${lines.slice(-30).join("\n")}`;
    console.log(`fault matrix (short):\n${reportMarkdown(report)}`);
    expect(report.violations, text).toEqual([]);
    expect(report.lost, text).toBe(0);
    expect(report.duplicated, text).toBe(0);
    expect(report.results, text).toBe(report.sessions);
    // Every fault of the plan was injected, and the kills did happen.
    expect(
      Object.values(report.injected).reduce((a, b) => a + b, 0),
      text,
    ).toBe(10);
    expect(report.controlPlaneStarts, text).toBe(3);
    expect(
      report.gatewayStarts.reduce((a, b) => a + b, 0),
      text,
    ).toBe(6);
  },
);
