import { describe, expect, it } from "vitest";
import { Trace } from "./trajectory";
import { ControlMessage, GatewayMessage, WIRE_VERSION } from "./wire";

describe("wire messages", () => {
  const hello = {
    v: WIRE_VERSION,
    type: "hello",
    node_id: "gpu-0",
    agent_version: "0.1.0",
    capacity: { max_init: 2, max_run: 2, max_postrun: 2 },
    capabilities: { runtimes: ["local"], harnesses: ["shell"], engines: ["sglang-openai"] },
    credit: 6,
    leases: [],
  };

  it("parses by type and refuses other versions and unknown keys", () => {
    expect(GatewayMessage.parse(hello).type).toBe("hello");
    expect(GatewayMessage.safeParse({ ...hello, v: 1 }).success).toBe(true);
    expect(GatewayMessage.safeParse({ ...hello, v: 2 }).success).toBe(true);
    expect(GatewayMessage.safeParse({ ...hello, v: 4 }).success).toBe(false);
    expect(GatewayMessage.safeParse({ ...hello, extra: true }).success).toBe(false);
    expect(GatewayMessage.safeParse({ v: 1, type: "welcome" }).success).toBe(false);
  });

  it("keeps gateway and control-plane message sets apart", () => {
    expect(ControlMessage.safeParse(hello).success).toBe(false);
    const ack = { v: 1, type: "ack", lease_id: "l_1", session_id: "b.0.0", status: "duplicate" };
    expect(ControlMessage.parse(ack)).toEqual(ack);
    expect(ControlMessage.safeParse({ ...ack, status: "maybe" }).success).toBe(false);
  });
});

describe("Trace", () => {
  const base = {
    prompt_ids: [1, 2],
    response_ids: [3, 4],
    loss_mask: [1, 1],
    response_logprobs: [-0.1, -0.2],
    prompt_messages: [],
    response_messages: [],
    tools: null,
    finish_reason: "stop",
    reward: null,
    metadata: {},
  };

  it("requires masks and logprobs aligned with response ids", () => {
    expect(Trace.safeParse(base).success).toBe(true);
    expect(Trace.safeParse({ ...base, loss_mask: [1] }).success).toBe(false);
    expect(Trace.safeParse({ ...base, response_logprobs: [-0.1] }).success).toBe(false);
    expect(Trace.safeParse({ ...base, response_logprobs: null }).success).toBe(true);
  });
});
