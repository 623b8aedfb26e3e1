import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { UsageError } from "../usage-error";
import { createToken, runTokenCreate } from "./token";

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

  it("makes a path credential pt_<name>.<secret> for an upstream base URL, scoped to a queue", () => {
    const t = createToken("trainer", undefined, { name: "slime-run-1", queue: "gpu-a" });
    expect(t.token).toMatch(/^pt_slime-run-1\.[A-Za-z0-9_-]{43}$/);
    expect(t.sha256).toBe(createHash("sha256").update(t.token).digest("hex"));
    expect(t.path).toEqual({ name: "slime-run-1", queue: "gpu-a" });
    const steps = t.steps.join("\n");
    expect(steps).toContain(`"sha256":"${t.sha256}","queue":"gpu-a"`);
    expect(steps).toContain(`/u/${t.token}`);
    expect(steps).toContain("DELETE");
    expect(createToken("trainer", undefined, { name: "n" }).path?.queue).toBe("default");
  });

  it("a path credential needs --role trainer and --name; --name and --queue need --path", async () => {
    expect(() => createToken("admin", undefined, { name: "n" })).toThrow(/^--path: only with --role trainer/);
    expect(() => createToken("trainer", undefined, {})).toThrow(/^--name: required with --path/);
    expect(() => createToken("trainer", undefined, { name: "bad name" })).toThrow(/^--name/);
    expect(() => createToken("trainer", undefined, { name: "n", queue: "bad queue" })).toThrow(/^--queue/);
    await expect(runTokenCreate({ role: "trainer", name: "n" })).rejects.toThrow(/^--name: only with --path/);
    await expect(runTokenCreate({ role: "trainer", queue: "q" })).rejects.toThrow(
      /^--queue: only with --path/,
    );
  });
});
