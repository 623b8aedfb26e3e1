import { describe, expect, it } from "vitest";
import { defaultBuilderFor } from "../proxy";
import { chooseBuilder } from "./builder-choice";

describe("builder choice", () => {
  it("defaults to conversation in token mode and per_request with chat engines", () => {
    expect(defaultBuilderFor("sglang")).toBe("conversation");
    expect(defaultBuilderFor("sglang-openai")).toBe("per_request");
    expect(defaultBuilderFor("vllm")).toBe("per_request");
  });

  it("keeps the task's builder, config included, and says where the choice came from", () => {
    const task = { strategy: "prefix_merging", config: { end_of_turn_token_id: 7 } };
    expect(chooseBuilder(task, "sglang")).toEqual({
      spec: task,
      choice: { strategy: "prefix_merging", source: "task", engine: "sglang" },
    });
    expect(chooseBuilder(null, "sglang")).toEqual({
      spec: { strategy: "conversation", config: {} },
      choice: { strategy: "conversation", source: "engine_default", engine: "sglang" },
    });
    expect(chooseBuilder({ strategy: "per_request", config: {} }, "sglang").choice.source).toBe("task");
  });
});
