/**
 * The doc test's reader: which blocks are commands, how annotations read, how a block splits into
 * commands, what an author is told about a block without a method, how a synopsis expands.
 */
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import {
  ANNOTATION_HELP,
  commandsOf,
  commentBlocks,
  documentFiles,
  markdownBlocks,
  missingAnnotationMessage,
  parseAnnotation,
} from "./doc-blocks";
import { checkCovered, synopsisArgvs, words } from "./doc-checks";
import { POLAR_BIN, polarSubcommand, type RunTarget, substitute } from "./doc-run";

const md = [
  "Intro",
  "",
  "<!-- doc-test: run; ci: npm install, npm test -->",
  "```sh",
  "npm install && npm run demo   # the demo",
  "npm test",
  "```",
  "",
  "```text",
  "not a command",
  "```",
  "",
  "```",
  "npx polar dev",
  "```",
  "",
  "   <!-- doc-test: cli -->",
  "   ```sh",
  "   POLAR_X=… npx polar serve_gateway --node-id ID \\",
  "       --engine sglang-openai   # a comment",
  "   npx polar sim-engine --port 30000 &",
  "   ```",
  "<!-- doc-test: frobnicate -->",
  "```bash",
  "echo hi",
  "```",
].join("\n");

describe("markdown blocks", () => {
  const blocks = markdownBlocks("doc.md", md);

  it("keeps shell and untagged fences, drops text; reads the annotation above the fence", () => {
    expect(blocks.map((b) => [b.line, b.lang, b.annotation?.fallback.name ?? null])).toEqual([
      [4, "sh", "run"],
      [13, "", null],
      [18, "sh", "cli"],
      [24, "bash", null],
    ]);
    expect(blocks[3]!.annotationError).toMatch(/unknown doc-test method 'frobnicate'/);
  });

  it("splits commands: && in two, comments dropped, continuations joined, & in the background", () => {
    expect(commandsOf(blocks[0]!).map((c) => [c.line, c.method.name, c.text])).toEqual([
      [5, "ci", "npm install"],
      [5, "run", "npm run demo"],
      [6, "ci", "npm test"],
    ]);
    expect(commandsOf(blocks[2]!).map((c) => [c.line, c.text, c.background])).toEqual([
      [19, "POLAR_X=… npx polar serve_gateway --node-id ID --engine sglang-openai", false],
      [21, "npx polar sim-engine --port 30000", true],
    ]);
  });

  it("tells the author where the block is and exactly what to add", () => {
    const msg = missingAnnotationMessage(blocks[1]!);
    expect(msg).toContain("doc.md:13:");
    expect(msg).toContain("add <!-- doc-test: METHOD --> on the line above its fence");
    expect(msg).toContain("```text");
    expect(msg).toContain("| npx polar dev");
    expect(missingAnnotationMessage(blocks[3]!)).toContain("unknown doc-test method 'frobnicate'");
    for (const m of ["run", "cli", "ci", "apt", "account", "covered FILE", "syntax REASON"])
      expect(ANNOTATION_HELP).toContain(`  ${m} `);
  });

  it("keeps a quoted string that spans lines in one command", () => {
    const [b] = markdownBlocks(
      "q.md",
      "<!-- doc-test: syntax x -->\n```sh\nnode -e 'a # not a comment\n  b' | wc -l   # a comment\necho next\n```\n",
    );
    expect(commandsOf(b!).map((c) => c.text)).toEqual([
      "node -e 'a # not a comment\n  b' | wc -l",
      "echo next",
    ]);
  });

  it("takes only $ lines of console blocks as commands", () => {
    const [b] = markdownBlocks(
      "c.md",
      "<!-- doc-test: cli -->\n```console\n$ npx polar dev\noutput line\n```\n",
    );
    expect(commandsOf(b!).map((c) => c.text)).toEqual(["npx polar dev"]);
  });
});

describe("annotations", () => {
  it("reads per-command clauses and refuses what a method cannot use", () => {
    expect(parseAnnotation("covered test/e2e/x.test.ts; syntax needs a GPU: nvidia-smi")).toEqual({
      fallback: { name: "covered", args: ["test/e2e/x.test.ts"] },
      overrides: [{ method: { name: "syntax", args: ["needs", "a", "GPU"] }, match: ["nvidia-smi"] }],
    });
    expect(() => parseAnnotation("covered")).toThrow(/one argument/);
    expect(() => parseAnnotation("syntax")).toThrow(/needs a reason/);
    expect(() => parseAnnotation("ci: npm test")).toThrow(/first clause/);
    expect(() => parseAnnotation("run; ci")).toThrow(/METHOD: SUBSTRING/);
  });
});

describe("example-file comments", () => {
  const yaml = [
    "# A topology. Run it:",
    "# doc-test: run",
    "#   npx polar sim-engine --port 30000 &",
    "#   POLAR_URL=http://127.0.0.1:8787 \\",
    "#     npx polar serve_gateway -c t.yaml",
    "# Later prose, not indented.",
    "#   npx polar submit t.yaml --wait",
    "gateway: {}",
  ].join("\n");

  it("reads the annotated block and flags a command-like line outside it", () => {
    const blocks = commentBlocks("t.yaml", yaml);
    expect(blocks.map((b) => [b.line, b.annotation?.fallback.name ?? null, b.lines.length])).toEqual([
      [2, "run", 3],
      [7, null, 1],
    ]);
    expect(commandsOf(blocks[0]!).map((c) => c.text)).toEqual([
      "npx polar sim-engine --port 30000",
      "POLAR_URL=http://127.0.0.1:8787 npx polar serve_gateway -c t.yaml",
    ]);
    expect(missingAnnotationMessage(blocks[1]!)).toContain(
      "t.yaml:7: this command in an example file's comments",
    );
  });
});

describe("synopsis expansion", () => {
  it("includes [optional] parts, gives one argv per alternative, reads N as 1", () => {
    expect(synopsisArgvs(words("token create --role trainer|gateway [--node-id ID] --max-run N"))).toEqual([
      ["token", "create", "--role", "trainer", "--node-id", "ID", "--max-run", "1"],
      ["token", "create", "--role", "gateway", "--node-id", "ID", "--max-run", "1"],
    ]);
    expect(synopsisArgvs(words('conformance --command "my-agent {{INSTRUCTION}}"'))).toEqual([
      ["conformance", "--command", "my-agent {{INSTRUCTION}}"],
    ]);
  });
});

describe("sources", () => {
  it("covers README.md, docs/, and the READMEs of examples/ and of the client packages", () => {
    const files = documentFiles(REPO_ROOT);
    expect(files[0]).toBe("README.md");
    expect(files).toContain("docs/training.md");
    expect(files).toContain("examples/trainer/README.md");
    expect(files).toContain("clients/python/README.md");
    expect(files.filter((f) => !f.endsWith(".md"))).toEqual([]);
  });
});

describe("run placeholders", () => {
  const target: RunTarget = {
    cpPort: 1,
    enginePort: 2,
    engine2Port: 3,
    proxyPort: 4,
    opsPort: 5,
    tokens: { trainer: "t", gateway: "g", admin: "a" },
    tmp: "SCRATCH",
  };

  it("pip install goes to the block's scratch folder with pip's configured indexes", () => {
    const ran = substitute("pip install ./clients/python", target);
    expect(ran).toMatch(
      /python3 -m pip install --disable-pip-version-check --target SCRATCH\/site \.\/clients\/python$/,
    );
    expect(ran).toContain("pip config get global.extra-index-url");
    expect(substitute("npx polar dev --port 8787", target)).not.toContain("pip");
  });

  it("npx polar becomes node and the repository's bin; the other rules still see the polar forms", () => {
    expect(substitute("npx polar dev --port 8787", target)).toBe(
      `${POLAR_BIN} dev --persist-to SCRATCH/state --port 1`,
    );
    expect(substitute("npx polar stack", target)).toBe(`${POLAR_BIN} stack --port 1`);
    expect(substitute("export T=$(npx polar token create --role trainer)", target)).toBe(
      `export T=$(${POLAR_BIN} token create --role trainer)`,
    );
    // Only the command word: a flag value or a path that merely contains the words stays.
    expect(substitute("echo npx-polar notnpx polar", target)).toBe("echo npx-polar notnpx polar");
    expect(polarSubcommand(substitute("POLAR_TRAINER_TOKEN=… npx polar submit t.yaml --wait", target))).toBe(
      "submit",
    );
  });
});

describe("covered", () => {
  const covered = (text: string, file: string) => {
    const [block] = markdownBlocks("x.md", `<!-- doc-test: covered ${file} -->\n\`\`\`sh\n${text}\n\`\`\`\n`);
    const [command] = commandsOf(block!);
    return checkCovered(command!);
  };

  it("npm run NAME is covered by a test that uses the script package.json runs for NAME", () => {
    expect(covered("npm run demo", "test/e2e/demo.test.ts")).toBe(
      "not run here: test/e2e/demo.test.ts (CI) runs scripts/demo",
    );
  });

  it("a benchmark's npm script is covered by a test that runs its file under bench/", () => {
    expect(
      covered("npm run bench:tokens -- --model-family deepseek_v3", "test/e2e/bench-report.test.ts"),
    ).toBe("not run here: test/e2e/bench-report.test.ts (CI) runs bench/tokens");
    expect(() => covered("npm run bench:tokens", "test/e2e/demo.test.ts")).toThrow(
      /does not use bench\/tokens\.ts/,
    );
  });

  it("refuses a test that does not use that script, and a script package.json does not have", () => {
    expect(() => covered("npm run demo", "test/e2e/calculator.test.ts")).toThrow(
      /does not use scripts\/demo\.ts/,
    );
    expect(() => covered("npm run no-such-script", "test/e2e/demo.test.ts")).toThrow(
      /no script 'no-such-script'/,
    );
  });
});
