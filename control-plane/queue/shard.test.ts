import { describe, expect, it } from "vitest";
import { rememberedName } from "./shard";

/** A Durable Object's id and key-value storage, as far as rememberedName reads them. */
function state(name: string | undefined, kv: Map<string, unknown>) {
  return {
    id: { name } as DurableObjectId,
    storage: {
      kv: {
        get: (key: string) => kv.get(key),
        put: (key: string, value: unknown) => void kv.set(key, value),
      },
    } as unknown as DurableObjectStorage,
  };
}

describe("a shard's name", () => {
  it("is remembered from a named start and used when the alarm starts the object without one", () => {
    const kv = new Map<string, unknown>();
    expect(rememberedName(state("jobs#1", kv))).toBe("jobs#1");
    // The restart: the alarm wakes the object, whose id then carries no name.
    expect(rememberedName(state(undefined, kv))).toBe("jobs#1");
  });

  it("is 'unknown' only when it was never started by name", () => {
    expect(rememberedName(state(undefined, new Map()))).toBe("unknown");
  });
});
