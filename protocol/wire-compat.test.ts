import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { describeVersionRefusal, POLAR_VERSION, versionRefusal, wireVersionList } from "./wire-compat";

/** What the control plane of the last v1 release said when it refused a hello (its code, verbatim). */
const V1_CONTROL_PLANE_SAID =
  "unsupported_version: protocol version 2 is not supported; this control plane speaks v1";

describe("POLAR_VERSION", () => {
  it("is the repository's version, which is also the gateway package's (what `polar --version` prints there)", () => {
    const root = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
    const gateway = JSON.parse(
      readFileSync(new URL("../packages/polar-gateway/package.json", import.meta.url), "utf8"),
    );
    expect(POLAR_VERSION).toBe(root.version);
    expect(POLAR_VERSION).toBe(gateway.version);
  });
});

describe("wireVersionList", () => {
  it("joins versions as a sentence", () => {
    expect(wireVersionList([2])).toBe("v2");
    expect(wireVersionList([1, 2])).toBe("v1 and v2");
    expect(wireVersionList([1, 2, 3])).toBe("v1, v2 and v3");
  });
});

describe("versionRefusal (the control plane refusing a hello)", () => {
  const cp = { polar: "0.3.0", wire: [2, 3] };

  it("names the gateway's node, wire and Polar versions, its own, and: upgrade the gateway", () => {
    expect(versionRefusal({ v: 1, node_id: "gpu-7", agent_version: "0.1.0" }, cp)).toBe(
      "gateway 'gpu-7' speaks wire v1 (polar 0.1.0); this control plane (polar 0.3.0) speaks v2 and v3: upgrade the gateway to polar 0.3.0",
    );
  });

  it("a gateway newer than the control plane: upgrade the control plane first", () => {
    const text = versionRefusal({ v: 99, node_id: "gpu-7", agent_version: "9.0.0" }, cp);
    expect(text).toContain("gateway 'gpu-7' speaks wire v99 (polar 9.0.0)");
    expect(text).toContain("this control plane (polar 0.3.0) speaks v2 and v3");
    expect(text).toContain("upgrade the control plane to a release that speaks v99");
    expect(text).toContain("control plane first, then its gateways");
  });

  it("shows a malformed hello's fields safely", () => {
    const text = versionRefusal({ v: "two", node_id: 5, agent_version: "x".repeat(100) });
    expect(text).toMatch(/^gateway \(no node_id\) speaks wire version "two" \(polar x{64}…\); /);
    expect(text).toContain(`this control plane (polar ${POLAR_VERSION}) speaks v1, v2 and v3`);
    expect(versionRefusal({})).toContain("speaks wire version (none) (polar ?)");
  });
});

describe("describeVersionRefusal (the gateway explaining a close 4400)", () => {
  it("an older control plane (the v1 release's words): upgrade the control plane first", () => {
    const r = describeVersionRefusal(V1_CONTROL_PLANE_SAID, { polar: "0.2.0", wire: [2] });
    expect(r.reason).toBe(
      `this gateway (polar 0.2.0) speaks wire v2; the control plane said: ${V1_CONTROL_PLANE_SAID}`,
    );
    expect(r.fix).toMatch(/^upgrade the control plane first, to polar 0\.2\.0 or later \(it speaks v2\)/);
  });

  it("a newer control plane (today's words): upgrade this gateway to its release", () => {
    const said = `unsupported_version: ${versionRefusal({ v: 1, node_id: "g", agent_version: "0.1.0" }, { polar: "0.3.0", wire: [2, 3] })}`;
    const r = describeVersionRefusal(said, { polar: "0.1.0", wire: [1] });
    expect(r.reason).toContain("this gateway (polar 0.1.0) speaks wire v1");
    expect(r.reason).toContain("this control plane (polar 0.3.0) speaks v2 and v3");
    expect(r.fix).toBe("upgrade this gateway to polar 0.3.0 (it speaks v2 and v3)");
  });

  it("no words from the control plane: its own versions and the upgrade order", () => {
    const r = describeVersionRefusal(null, { polar: "0.2.0", wire: [2] });
    expect(r.reason).toContain("this gateway (polar 0.2.0) speaks wire v2");
    expect(r.fix).toContain("upgrade the control plane first, then the gateways");
  });
});
