import { describe, expect, it } from "vitest";
import { postCallback } from "./batch/callbacks";
import { callbackUrlProblem } from "./callback-url";

describe("callbackUrlProblem: a private host is refused in each spelling listed", () => {
  // Each of these reaches loopback, a private network, or a host that cannot be checked.
  const refused = [
    "http://127.0.0.1/cb",
    "http://2130706433/cb", // decimal 127.0.0.1
    "http://0x7f.1/cb", // hex, short form
    "http://017700000001/cb", // octal
    "http://127.1/cb",
    "http://0/cb", // 0.0.0.0
    "http://10.1.2.3/cb",
    "http://172.16.0.1/cb",
    "http://192.168.1.1/cb",
    "http://100.64.0.1/cb", // carrier-grade NAT
    "http://169.254.169.254/latest/meta-data", // cloud metadata
    "http://198.18.0.1/cb", // benchmarking
    "http://224.0.0.1/cb", // multicast
    "http://255.255.255.255/cb",
    "http://localhost/cb",
    "http://LOCALHOST./cb", // trailing dot
    "http://api.localhost/cb",
    "http://printer.local/cb",
    "http://metadata.google.internal/cb",
    "http://nas.home.arpa./cb",
    "http://[::1]/cb",
    "http://[0:0:0:0:0:0:0:1]/cb",
    "http://[::]/cb",
    "http://[fe80::1]/cb",
    "http://[fc00::1]/cb",
    "http://[fd12:3456::1]/cb",
    "http://[fec0::1]/cb", // deprecated site-local
    "http://[ff02::1]/cb",
    "http://[::ffff:127.0.0.1]/cb", // IPv4-mapped
    "http://[::ffff:10.0.0.1]/cb",
    "http://[::ffff:0:169.254.169.254]/cb", // SIIT
    "http://[64:ff9b::10.0.0.1]/cb", // NAT64
    "http://[64:ff9b:1:a00:1:0:808:808]/cb", // local-use NAT64 (RFC 8215), whatever its tail looks like
    "http://[64:ff9b:1::a00:1]/cb",
    "http://[::127.0.0.1]/cb", // IPv4-compatible
    "http://[2002:7f00:1::]/cb", // 6to4
    "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/cb", // Teredo
  ];
  it.each(refused)("%s", (url) => {
    expect(callbackUrlProblem(url, false)).toMatch(/^host /);
    expect(callbackUrlProblem(url, true)).toBeNull();
  });

  const allowed = [
    "https://trainer.example/cb",
    "http://8.8.8.8/cb",
    "http://[2606:4700:4700::1111]/cb",
    "http://[::ffff:8.8.8.8]/cb", // mapped, reaching a public host
    "http://[64:ff9b::8.8.8.8]/cb",
    "https://local.example.com/cb", // "local" as a label, not the .local suffix
  ];
  it.each(allowed)("allows %s", (url) => {
    expect(callbackUrlProblem(url, false)).toBeNull();
  });

  it("refuses what is not an http(s) URL, private hosts allowed or not", () => {
    expect(callbackUrlProblem("not a url", true)).toBe("is not a URL");
    expect(callbackUrlProblem("file:///etc/passwd", true)).toBe("must be http or https");
  });
});

describe("postCallback never follows a redirect", () => {
  it("stops at each 3xx (301, 302, 303, 307, 308), names it, and never calls its Location", async () => {
    for (const status of [301, 302, 303, 307, 308]) {
      const calls: { url: string; redirect: RequestInit["redirect"] }[] = [];
      // A fetch that does what the Fetch standard says for each mode: "follow" would go on to the
      // Location (here a private address), "manual" hands the 3xx back.
      const fetcher = (async (input: RequestInfo | URL, init?: RequestInit) => {
        const url = String(input);
        calls.push({ url, redirect: init?.redirect });
        if (url.startsWith("https://trainer.example/")) {
          if (init?.redirect === "manual")
            return new Response(null, { status, headers: { location: "http://10.0.0.5/steal" } });
          calls.push({ url: "http://10.0.0.5/steal", redirect: init?.redirect });
          return new Response("ok");
        }
        return new Response("unexpected", { status: 500 });
      }) as typeof fetch;
      const error = await postCallback(fetcher, "https://trainer.example/cb", "{}", "b:t", false);
      expect(error, `HTTP ${status}`).toBe(
        `HTTP ${status}: redirects are not followed (callback_url must be the final address; Location: http://10.0.0.5/steal)`,
      );
      expect(
        calls.map((c) => c.url),
        `HTTP ${status}`,
      ).toEqual(["https://trainer.example/cb"]);
    }
  });
});
