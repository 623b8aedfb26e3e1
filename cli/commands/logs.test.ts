import { describe, expect, it } from "vitest";
import type { SessionLogs } from "../../protocol";
import { program } from "../main";
import { UsageError } from "../usage-error";
import { formatLogs, readerToken, streamHeader } from "./logs";

const LOGS: SessionLogs = {
  session_id: "b.0.1",
  limit_bytes: 262144,
  streams: [
    { name: "prepare", bytes_total: 12, bytes_kept: 12, truncated: false, text: "cloned repo\n" },
    {
      name: "harness.stderr",
      bytes_total: 900_000,
      bytes_kept: 262144,
      truncated: true,
      text: "fatal: no model",
    },
  ],
};

describe("polar logs", () => {
  it("prints each stream under a header with its size and whether it was truncated", () => {
    expect(formatLogs(LOGS)).toBe(
      "=== prepare (12 bytes) ===\ncloned repo\n\n" +
        "=== harness.stderr (900000 bytes, truncated: last 262144 bytes kept) ===\nfatal: no model\n",
    );
    expect(streamHeader(LOGS.streams[0]!)).toBe("=== prepare (12 bytes) ===");
  });

  it("--stream prints one stream, and names the flag and the streams there are for an unknown one", () => {
    expect(formatLogs(LOGS, "prepare")).toBe("=== prepare (12 bytes) ===\ncloned repo\n");
    expect(() => formatLogs(LOGS, "evaluator")).toThrow(UsageError);
    expect(() => formatLogs(LOGS, "evaluator")).toThrow(
      "--stream: session 'b.0.1' has no stream 'evaluator' (it has: prepare, harness.stderr)",
    );
  });

  it("says so when a session logged nothing", () => {
    expect(formatLogs({ ...LOGS, streams: [] })).toBe("session b.0.1: no log output\n");
  });

  it("reads with the trainer's token, else the viewer's, and names both when neither is set", () => {
    expect(readerToken({ POLAR_TRAINER_TOKEN: "t", POLAR_VIEWER_TOKEN: "v" })).toBe("t");
    expect(readerToken({ POLAR_VIEWER_TOKEN: "v" })).toBe("v");
    expect(() => readerToken({})).toThrow(UsageError);
    expect(() => readerToken({})).toThrow(/POLAR_TRAINER_TOKEN or POLAR_VIEWER_TOKEN/);
  });

  it("--help lists the session argument and its flags", () => {
    const help = program.commands.find((c) => c.name() === "logs")!.helpInformation();
    for (const flag of ["<session_id>", "--stream <name>", "--json", "--control-plane <url>"])
      expect(help).toContain(flag);
  });
});
