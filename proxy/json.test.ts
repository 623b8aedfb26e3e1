/**
 * The reasoning round-trip token: valid in every family's schema (standard base64, as Google's
 * bytes field `thoughtSignature` requires), self-identifying, and read back however the client
 * re-encoded it; the older `polar1.` form is still read.
 */
import { describe, expect, it } from "vitest";
import { decodeReasoning, encodeReasoning } from "./json";

const TEXT = "17 * 20 = 340 and 17 * 3 = 51 → 391. ünïcödé ~~~ ???";

describe("reasoning tokens", () => {
  it("are standard base64 (padded) whose bytes start with the magic prefix", () => {
    const token = encodeReasoning(TEXT);
    expect(token).toMatch(/^[A-Za-z0-9+/]+={0,2}$/);
    expect(token.length % 4).toBe(0);
    const bytes = Buffer.from(token, "base64");
    expect(bytes.toString("base64")).toBe(token);
    expect(bytes.subarray(0, 7).toString("latin1")).toBe("polar2\0");
    expect(bytes.subarray(7).toString("utf8")).toBe(TEXT);
  });

  it("round-trip, also when the client re-encoded the bytes URL-safe or without padding", () => {
    const token = encodeReasoning(TEXT);
    const bytes = Buffer.from(token, "base64");
    // Pydantic (google-genai's models) serialises bytes with the URL-safe alphabet.
    const urlSafe = bytes.toString("base64url");
    expect(urlSafe).not.toBe(token.replace(/=+$/, ""));
    for (const t of [token, urlSafe, token.replace(/=+$/, "")]) expect(decodeReasoning(t)).toBe(TEXT);
    expect(decodeReasoning(encodeReasoning(""))).toBe("");
  });

  it("tell the proxy's own token from a foreign one", () => {
    // A real provider signature (random bytes), other base64, non-base64 and non-strings.
    const foreign = Buffer.from(Array.from({ length: 64 }, (_, i) => (i * 37 + 11) % 256)).toString("base64");
    for (const t of [foreign, Buffer.from("polar2 not ours").toString("base64"), "opaque.sig!", "", 42, null])
      expect(decodeReasoning(t)).toBeNull();
  });

  it("still read tokens minted in the older polar1.<base64url> form", () => {
    const legacy = `polar1.${Buffer.from(TEXT, "utf8").toString("base64url")}`;
    expect(decodeReasoning(legacy)).toBe(TEXT);
  });
});
