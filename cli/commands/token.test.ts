import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { UsageError } from "../usage-error";
import { createToken } from "./token";

describe("polar token create", () => {
  it("makes a per-gateway token gw_<node>.<secret> with its SHA-256 and the registration request", () => {
    const t = createToken("gateway", "gpu-01");
    expect(t.token).toMatch(/^gw_gpu-01\.[A-Za-z0-9_-]{43}$/);
    expect(t.sha256).toBe(createHash("sha256").update(t.token).digest("hex"));
    expect(t.steps.join("\n")).toContain(`"sha256":"${t.sha256}"`);
    expect(createToken("gateway", "gpu-01").token).not.toBe(t.token);
  });

  it("makes role tokens with the wrangler secret to set", () => {
    const t = createToken("trainer");
    expect(t.token).toMatch(/^polar_trainer_/);
    expect(t.steps[0]).toContain("wrangler secret put POLAR_TRAINER_TOKEN");
  });

  it("names the flag on bad input", () => {
    expect(() => createToken("root")).toThrow(UsageError);
    expect(() => createToken("root")).toThrow(/^--role/);
    expect(() => createToken("trainer", "n")).toThrow(/^--node-id/);
    expect(() => createToken("gateway", "bad id")).toThrow(/^--node-id/);
  });
});
