import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { BUNDLED_TOKENIZER_FOLDER } from "../tokenizer/chat-tokenizer";
import { dependencyProblems, packageOf, tokenizerAsset } from "./build-gateway-package";

describe("packageOf", () => {
  it("names the package of a bare specifier, null for built-ins and paths", () => {
    expect(packageOf("ws")).toBe("ws");
    expect(packageOf("yaml/util")).toBe("yaml");
    expect(packageOf("@lenml/tokenizers/dist/x.js")).toBe("@lenml/tokenizers");
    expect(packageOf("node:fs")).toBeNull();
    expect(packageOf("fs")).toBeNull();
    expect(packageOf("./local")).toBeNull();
  });
});

describe("dependencyProblems", () => {
  it("is empty when imports, dependencies and the lock file agree", () => {
    expect(dependencyProblems(["ws"], { ws: "8.23.0" }, { ws: "8.23.0" })).toEqual([]);
  });

  it("names an imported package missing from dependencies, with the locked version to add", () => {
    expect(dependencyProblems(["ws", "zod"], { ws: "8.23.0" }, { ws: "8.23.0", zod: "4.6.7" })).toEqual([
      'zod is imported by the gateway\'s code but missing from dependencies (add "zod": "4.6.7")',
    ]);
  });

  it("refuses the control plane's toolchain and unused or drifted dependencies", () => {
    expect(
      dependencyProblems(
        ["wrangler", "ws"],
        { ws: "8.22.0", hono: "4.13.19" },
        { ws: "8.23.0", hono: "4.13.19" },
      ),
    ).toEqual([
      "wrangler is imported by the gateway's code, but it is toolchain a GPU host does not run",
      "hono is in dependencies but the gateway's code never imports it",
      "ws: dependencies pin 8.22.0, package-lock.json installs 8.23.0",
    ]);
  });
});

describe("tokenizerAsset", () => {
  it("copies the Qwen3 files and their MIT licence to the folder the tokenizer looks in first", () => {
    const a = tokenizerAsset();
    expect(a.to).toBe(BUNDLED_TOKENIZER_FOLDER);
    expect(existsSync(join(a.models, "tokenizer.json"))).toBe(true);
    expect(existsSync(join(a.models, "tokenizer_config.json"))).toBe(true);
    expect(readFileSync(a.license, "utf8")).toMatch(/^MIT License/);
  });
});
