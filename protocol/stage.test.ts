import { describe, expect, it } from "vitest";
import { GatewayStage, STAGE_STEPS, stageOfStep } from "./stage";

describe("gateway stages", () => {
  it("every step belongs to exactly one stage, in wire order", () => {
    const steps = GatewayStage.options.flatMap((stage) => STAGE_STEPS[stage].map((step) => [step, stage]));
    expect(steps).toEqual([
      ["init", "INITIALIZING"],
      ["ready", "READY"],
      ["setup", "RUNNING"],
      ["exec", "RUNNING"],
      ["postprocess", "RUNNING"],
      ["postrun", "POST_RUN"],
      ["evaluate", "POST_RUN"],
    ]);
    for (const [step, stage] of steps) expect(stageOfStep(step as never)).toBe(stage);
  });

  it("a queued session is in no stage yet", () => {
    expect(stageOfStep("queued")).toBeNull();
  });
});
