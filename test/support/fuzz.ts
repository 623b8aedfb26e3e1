/**
 * Settings shared by the property-based fuzz tests (`control-plane/fuzz/`, `proxy/fuzz.test.ts`,
 * `cli/task-file.fuzz.test.ts`): how many cases, which seed, and values that are hostile to any
 * parser. Runtime-neutral (no Node API), so the workers pool imports it too.
 *
 * - `npm test` runs each property {@link CI_RUNS} times from the fixed seed {@link DEFAULT_SEED}:
 *   the same cases on every run, so CI stays fast and a failure reproduces.
 * - `npm run test:fuzz` sets `POLAR_FUZZ_RUNS=10000` and, unless `POLAR_FUZZ_SEED` is given, a
 *   fresh seed, which the run prints; `POLAR_FUZZ_SEED=<seed> npm run test:fuzz` replays it.
 *   fast-check's failure message always names the seed, the path and the shrunk counterexample.
 *
 * @module
 */
import fc from "fast-check";

/** Cases per property inside `npm test`. */
export const CI_RUNS = 300;

/** Seed of the cases `npm test` runs (the issue the fuzzing came from). */
export const DEFAULT_SEED = 27;

/** How one fuzz file runs: cases per property, seed, and whether this is the long run. */
export interface FuzzSettings {
  numRuns: number;
  seed: number;
  /** True under `npm run test:fuzz` (POLAR_FUZZ_RUNS set). */
  long: boolean;
}

/**
 * The settings from `POLAR_FUZZ_RUNS` and `POLAR_FUZZ_SEED` in `vars` (process.env on Node, the
 * workers pool's bindings in workerd). `ciRuns` replaces {@link CI_RUNS} for a slow property.
 *
 * @example
 * ```ts
 * const settings = fuzzSettings(process.env); // { numRuns: 300, seed: 27, long: false } in npm test
 * ```
 */
export function fuzzSettings(vars: Record<string, unknown>, ciRuns = CI_RUNS): FuzzSettings {
  const runs = Number(vars.POLAR_FUZZ_RUNS || Number.NaN);
  const long = Number.isSafeInteger(runs) && runs > 0;
  const given = vars.POLAR_FUZZ_SEED;
  const seed =
    given !== undefined && given !== "" && Number.isSafeInteger(Number(given))
      ? Number(given)
      : long
        ? (Date.now() ^ (Math.random() * 0x7fffffff)) | 0
        : DEFAULT_SEED;
  return { numRuns: long ? runs : ciRuns, seed, long };
}

/**
 * The `fc.assert` parameters of a property, announcing the seed of a long run up front (a run
 * that crashes the process never reaches fast-check's own report).
 *
 * @example
 * ```ts
 * await fc.assert(property, fuzzParameters(settings, "control-plane routes"));
 * ```
 */
export function fuzzParameters<T>(settings: FuzzSettings, surface: string): fc.Parameters<T> {
  if (settings.long)
    console.log(`fuzz ${surface}: ${settings.numRuns} cases, POLAR_FUZZ_SEED=${settings.seed}`);
  return { numRuns: settings.numRuns, seed: settings.seed, verbose: 1 };
}

/**
 * A test timeout for `numRuns` cases of about `msPerCase` each, plus a minute for setup and the
 * check that the state is intact afterwards.
 *
 * @example
 * ```ts
 * it("…", async () => {…}, fuzzTimeout(settings, 20));
 * ```
 */
export function fuzzTimeout(settings: FuzzSettings, msPerCase: number): number {
  return 60_000 + settings.numRuns * msPerCase;
}

/**
 * Nested arrays `depth` deep around `leaf`, built without recursion: `[[[…leaf…]]]`.
 *
 * @example
 * ```ts
 * deepArray(3, 0); // [[[0]]]
 * ```
 */
export function deepArray(depth: number, leaf: unknown = 0): unknown {
  let value: unknown = leaf;
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

/**
 * Nested objects `depth` deep: `{"a":{"a":…}}`.
 *
 * @example
 * ```ts
 * deepObject(2); // { a: { a: {} } }
 * ```
 */
export function deepObject(depth: number): unknown {
  let value: unknown = {};
  for (let i = 0; i < depth; i++) value = { a: value };
  return value;
}

/**
 * Single values that break careless code: wrong types, boundaries of numbers, odd strings
 * (separators, traversal, encoded slashes, NUL, lone surrogates, very long), deep nesting.
 */
export const hostileScalar: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(
    null,
    true,
    false,
    0,
    -0,
    -1,
    1,
    1.5,
    -2147483648,
    2147483648,
    Number.MAX_SAFE_INTEGER,
    Number.MAX_SAFE_INTEGER + 2,
    -Number.MAX_SAFE_INTEGER - 2,
    1e308,
    -1e308,
    5e-324,
    "",
    " ",
    "0",
    "-1",
    "NaN",
    "null",
    "true",
    "..",
    "../..",
    "a/b",
    "a%2Fb",
    "%2e%2e",
    "a\u0000b",
    "\ud800",
    "é",
    "😀",
    "__proto__",
    "constructor",
    "b_1.0.0",
    "l_00000000-0000-0000-0000-000000000000",
    "x".repeat(129),
    "x".repeat(70_000),
  ),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: "binary", maxLength: 20 }),
  fc.integer(),
  fc.double(),
  fc.constant([]),
  fc.constant({}),
  // Objects that String() and template literals cannot turn into text, and an own __proto__.
  fc.constantFrom<unknown>(
    JSON.parse('{"toString":1}'),
    JSON.parse('{"toString":null,"valueOf":null}'),
    JSON.parse('{"__proto__":{"polluted":1}}'),
  ),
  fc.integer({ min: 1, max: 3 }).map((k) => deepArray(10 ** k)),
  fc.integer({ min: 1, max: 3 }).map((k) => deepObject(10 ** k)),
);

/** Arbitrary JSON values, now and then with a hostile scalar inside. */
export const anyJson: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: fc.jsonValue({ maxDepth: 4 }) },
  { weight: 1, arbitrary: hostileScalar },
  {
    weight: 1,
    arbitrary: fc.dictionary(fc.string({ maxLength: 12 }), hostileScalar, { maxKeys: 4 }),
  },
);

/**
 * `base` with `count` random edits at known paths: a value replaced by a hostile one, a key
 * deleted, or an unknown key added. Used to make near-valid requests whose every field gets hit.
 *
 * @example
 * ```ts
 * mutated(validTask, ["num_samples", "agent.harness"]); // an arbitrary of near-valid tasks
 * ```
 */
export function mutated(base: unknown, paths: readonly string[], maxEdits = 3): fc.Arbitrary<unknown> {
  return edits(paths, maxEdits).map((list) => applyEdits(base, list));
}

/** One edit of a value at a dotted path (`tasks.0.num_samples`). */
export interface Edit {
  path: string;
  kind: "set" | "delete" | "extra";
  value: unknown;
}

/**
 * Up to `maxEdits` edits at `paths`: for values only known when the case runs (apply them with
 * {@link applyEdits}).
 *
 * @example
 * ```ts
 * fc.record({ edits: edits(["reward", "metadata"]) });
 * ```
 */
export function edits(paths: readonly string[], maxEdits = 3): fc.Arbitrary<Edit[]> {
  const edit = fc.record({
    path: fc.constantFrom(...paths),
    kind: fc.constantFrom<Edit["kind"]>("set", "set", "set", "delete", "extra"),
    value: anyJson,
  });
  return fc.array(edit, { minLength: 0, maxLength: maxEdits });
}

/**
 * A copy of `base` with `list` applied (an edit whose path does not exist is skipped).
 *
 * @example
 * ```ts
 * applyEdits({ a: 1 }, [{ path: "a", kind: "set", value: "x" }]); // { a: "x" }
 * ```
 */
export function applyEdits(base: unknown, list: readonly Edit[]): unknown {
  const copy = structuredClone(base) as Record<string, unknown>;
  for (const e of list) applyEdit(copy, e.path.split("."), e.kind, e.value);
  return copy;
}

function applyEdit(root: Record<string, unknown>, path: string[], kind: string, value: unknown): void {
  let node: unknown = root;
  for (const key of path.slice(0, -1)) {
    if (node === null || typeof node !== "object") return;
    node = (node as Record<string, unknown>)[key];
  }
  if (node === null || typeof node !== "object") return;
  const target = node as Record<string, unknown>;
  const last = path[path.length - 1]!;
  if (kind === "delete") delete target[last];
  else if (kind === "extra") target[`${last}_unknown`] = structuredClone(value);
  // A copy: constants of the arbitraries are shared between cases and must not be edited.
  else target[last] = structuredClone(value);
}

/**
 * Wraps a property's predicate so that the first failing case, and any case slower than
 * `slowMs`, is printed when it happens (shortened), before fast-check starts shrinking it:
 * shrinking a slow stateful property can take long, and its report comes only at the end.
 *
 * @example
 * ```ts
 * fc.asyncProperty(request, reported("routes", check));
 * ```
 */
export function reported<T>(
  surface: string,
  predicate: (value: T) => Promise<void> | void,
  slowMs = 5000,
): (value: T) => Promise<void> {
  let failures = 0;
  let cases = 0;
  const began = Date.now();
  return async (value: T) => {
    const started = Date.now();
    if (++cases % 1000 === 0)
      console.log(`fuzz ${surface}: ${cases} cases in ${((started - began) / 1000).toFixed(0)} s`);
    try {
      await predicate(value);
    } catch (error) {
      if (failures++ === 0)
        console.error(
          `fuzz ${surface}: first failure (before shrinking): ${String(error).slice(0, 1500)}\n  input: ${show(value)}`,
        );
      throw error;
    } finally {
      const ms = Date.now() - started;
      if (ms > slowMs) console.warn(`fuzz ${surface}: a case took ${ms} ms: ${show(value)}`);
    }
  };
}

function show(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = "(not serialisable)";
  }
  return text.length > 1500 ? `${text.slice(0, 1500)}… (${text.length} chars)` : text;
}
