import { describe, expect, it } from "vitest";
import { readBoundedBody } from "./bounded-body";

/** A body in chunks that records how far it was read and whether the reader let go of it. */
function body(chunks: Array<string | Uint8Array>) {
  const state = { pulled: 0, closed: false };
  async function* gen() {
    try {
      for (const c of chunks) {
        state.pulled++;
        yield c;
      }
    } finally {
      state.closed = true;
    }
  }
  return { stream: gen(), state };
}

describe("readBoundedBody", () => {
  it("joins a body within the bound as UTF-8 text, a character split across chunks intact", async () => {
    const bytes = new TextEncoder().encode("héllo wörld");
    const { stream } = body([bytes.slice(0, 2), bytes.slice(2)]); // "é" is split between the two
    expect(await readBoundedBody(stream, 64, () => new Error("too large"))).toBe("héllo wörld");
  });

  it("throws the caller's error at the first chunk over the bound and reads no further", async () => {
    const { stream, state } = body(["12345678", "90123456", "7", "never read"]);
    await expect(readBoundedBody(stream, 16, (n) => new Error(`over ${n}`))).rejects.toThrow("over 16");
    expect(state.pulled).toBe(3);
    expect(state.closed).toBe(true);
  });
});
