/**
 * An unmodified upstream Polar trainer against the real local stack (issue 15): the pytest suite in
 * `test/upstream/` replays upstream's slime-bridge and `polar` CLI calls (`bridge_calls.py`) and
 * validates every answer with models that mirror upstream's field for field, `extra="forbid"`
 * included (`upstream_models.py`, the release's and the newer ones).
 *
 * The control plane runs as deployed (no `polar dev` dev mode) with the operator setting
 * `POLAR_ALLOW_PRIVATE_CALLBACKS=1`, so the bridge's loopback callback listener is reachable. The
 * bridge's base URL carries a path credential minted the documented way,
 * `polar token create --role trainer --path --register`. For the weight-update fence (point 6) a
 * queue of its own has two more gateway processes on a simulated engine that holds every model
 * call a few seconds (an in-flight turn to drain), with a credential scoped to it, and a second
 * credential names a queue no gateway serves. pytest runs once; each numbered point of the issue is
 * one test here, which passes when its pytest tests did.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type LocalStack, startLocalStack } from "../../cli/local-stack";
import { freePort } from "../../cli/ports";
import { type PolarProcess, spawnPolar, waitForProcessHttp } from "../../cli/processes";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import { describeWith, pythonModule } from "../support/optional-tools";

const NEEDS = ["python3", "pytest", pythonModule("pydantic"), pythonModule("httpx")] as const;
const SUITE = join(REPO_ROOT, "test/upstream");

/** The fence's queue, its gateways, and a queue no gateway serves. */
const FENCE_QUEUE = "bridge-fence";
const FENCE_NODES = ["fence-a", "fence-b"];
const EMPTY_QUEUE = "bridge-empty";
/** How long the fence queue's engine holds each model call (the turn the pause drains). */
const FENCE_TURN_MS = 4000;

/** pytest tests per numbered point of the issue. */
const POINTS: Record<string, string[]> = {
  "1. X-Polar-Control-Token authenticates `polar submit`": ["test_point1_control_token_header"],
  "2. polls and cancels without credentials work through a base URL with a path credential": [
    "test_point2_unauthenticated_polls_need_the_path_credential",
    "test_point2_eval_path_through_the_base_url",
    "test_point2_polar_status_through_the_base_url",
    "test_point2_revoked_credential",
  ],
  "3. timing validates against upstream's extra=forbid SessionTiming": [
    "test_point3_timing_validates_and_polar_timing_is_kept",
  ],
  "4. error is a string": ["test_point4_error_is_a_string"],
  "5. a finished task id runs afresh; a running one replays or refuses": [
    "test_point5_restarted_trainer_reruns_a_finished_task_id",
    "test_point5_running_task_id_replays_same_body_refuses_another",
  ],
  "6. the bridge fences through /nodes: pause, update, resume around an in-flight turn; partial pause undone; fails closed":
    [
      "test_point6_nodes_are_upstreams_gateway_rows",
      "test_point6_pause_update_resume_around_an_inflight_turn",
      "test_point6_a_partial_pause_is_undone",
      "test_point6_fails_closed_on_a_gateway_that_does_not_answer",
      "test_point6_fails_closed_on_bad_discovery",
      "test_point6_a_queue_without_gateways_is_fenced_through_its_queue_row",
    ],
  "7. private callbacks where the operator allows them; a refused one never fails the submit": [
    "test_point7_private_callback_is_delivered_and_refused_ones_never_fail_the_submit",
  ],
  "8. an agent timeout is a trainable zero-reward negative": [
    "test_point8_agent_timeout_is_a_trainable_zero_reward_negative",
  ],
  "9. eval_sampling_seed_base gives per-sample seeds": ["test_point9_eval_sampling_seed_base"],
  "10. the task's policy_version survives the bridge's metadata merge": [
    "test_point10_task_policy_version_survives_the_metadata_merge",
  ],
  "11. session order, callback id, cancel, DELETE, early stop, /health nodes": [
    "test_point11_results_in_session_order_and_callback_id",
    "test_point11_cancel_renders_upstream_statuses_and_sends_no_callback",
    "test_point11_delete_unknown_is_404_and_finished_is_left_alone",
    "test_point11_early_stop_stragglers_say_so",
    "test_point2_polar_status_through_the_base_url",
  ],
};

interface Case {
  passed: boolean;
  detail: string;
}

/** pytest's JUnit XML, by test name: passed, or the failure text. */
function readJunit(path: string): Map<string, Case> {
  const xml = readFileSync(path, "utf8");
  const cases = new Map<string, Case>();
  for (const m of xml.matchAll(/<testcase\b[^>]*\bname="([^"]+)"[^>]*?(?:\/>|>([\s\S]*?)<\/testcase>)/g)) {
    const body = m[2] ?? "";
    const failed = /<(failure|error|skipped)\b/.test(body);
    cases.set(m[1]!, { passed: !failed, detail: body.slice(0, 4000) });
  }
  return cases;
}

/** Mints a path credential with the CLI, as docs/upstream-compat.md says; returns the base URL. */
async function mintBaseUrl(stack: LocalStack, name: string, queue?: string): Promise<string> {
  const run = await execa(
    "node",
    [
      join(REPO_ROOT, "bin/polar.mjs"),
      "token",
      "create",
      "--role",
      "trainer",
      "--path",
      "--name",
      name,
      ...(queue ? ["--queue", queue] : []),
      "--register",
      "--url",
      stack.controlPlane.url,
    ],
    { env: { POLAR_ADMIN_TOKEN: stack.tokens.admin }, timeout: 60_000 },
  );
  const url = run.stdout.split("\n").find((l) => l.startsWith(`${stack.controlPlane.url}/u/pt_${name}.`));
  if (!url) throw new Error(`no base URL in the output of polar token create:\n${run.stdout}`);
  return url;
}

/** Waits until a gateway's health says it is connected to the control plane (in `beforeAll`). */
async function connectedWithin(gw: PolarProcess, health: string, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    const body = (await (await fetch(health)).json()) as { connected: boolean };
    if (body.connected) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${gw.name} did not connect within ${timeoutMs} ms:\n${gw.output()}`);
}

/**
 * The fence's part of the stack: a simulated engine holding each call {@link FENCE_TURN_MS}, and
 * one gateway process per node of {@link FENCE_NODES} on {@link FENCE_QUEUE}, each with its HTTP
 * health port (the gateway's own view of its gate). Returns what pytest needs to know of them.
 */
async function startFenceQueue(stack: LocalStack, root: string) {
  const enginePort = await freePort();
  const engine = spawnPolar("fence sim-engine", [
    "sim-engine",
    "--port",
    String(enginePort),
    "--model",
    stack.model,
    "--stall-rate",
    "1",
    "--stall-ms",
    String(FENCE_TURN_MS),
  ]);
  extra.push(engine);
  const engineUrl = `http://127.0.0.1:${enginePort}`;
  await waitForProcessHttp(engine, `${engineUrl}/health`);
  const gateways = await Promise.all(
    FENCE_NODES.map(async (nodeId) => {
      const httpPort = await freePort();
      const gw = spawnPolar(
        `gateway ${nodeId}`,
        [
          "serve_gateway",
          "--control-plane",
          stack.controlPlane.url,
          "--node-id",
          nodeId,
          "--queue",
          FENCE_QUEUE,
          "--engine",
          "sglang-openai",
          "--engine-url",
          engineUrl,
          "--model",
          stack.model,
          "--work-root",
          join(root, "work", nodeId),
          "--http-port",
          String(httpPort),
        ],
        { POLAR_GATEWAY_TOKEN: stack.tokens.gateway },
      );
      extra.push(gw);
      const health = `http://127.0.0.1:${httpPort}/health`;
      await waitForProcessHttp(gw, health);
      await connectedWithin(gw, health, 60_000);
      return { node_id: nodeId, health, pid: gw.pid };
    }),
  );
  return { engineUrl, gateways };
}

let stack: LocalStack;
const extra: PolarProcess[] = [];
let dir: string;
let cases: Map<string, Case>;
let output = "";

describeWith([...NEEDS], "an unmodified upstream slime bridge and polar CLI against Polar-TS", () => {
  beforeAll(async () => {
    stack = await startLocalStack({
      gateways: 1,
      devMode: false,
      controlPlaneVars: { POLAR_ALLOW_PRIVATE_CALLBACKS: "1" },
      gatewayArgs: ["--max-run", "4", "--max-init", "4"],
    });
    dir = mkdtempSync(join(tmpdir(), "polar-upstream-"));
    const base = await mintBaseUrl(stack, "slime-run");
    const revocable = await mintBaseUrl(stack, "slime-revocable");
    const fenceBase = await mintBaseUrl(stack, "slime-fence", FENCE_QUEUE);
    const emptyBase = await mintBaseUrl(stack, "slime-empty", EMPTY_QUEUE);
    const fence = await startFenceQueue(stack, dir);
    const junit = join(dir, "junit.xml");
    const run = await execa(
      "python3",
      [
        "-m",
        "pytest",
        SUITE,
        "-q",
        "-p",
        "no:cacheprovider",
        `--junitxml=${junit}`,
        "-o",
        "junit_family=xunit2",
      ],
      {
        cwd: SUITE,
        reject: false,
        timeout: 600_000,
        env: {
          POLAR_URL: stack.controlPlane.url,
          POLAR_BASE_URL: base,
          POLAR_REVOCABLE_BASE_URL: revocable,
          POLAR_REVOCABLE_NAME: "slime-revocable",
          POLAR_TRAINER_TOKEN: stack.tokens.trainer,
          POLAR_ADMIN_TOKEN: stack.tokens.admin,
          POLAR_FENCE_QUEUE: FENCE_QUEUE,
          POLAR_FENCE_BASE_URL: fenceBase,
          POLAR_FENCE_ENGINE_URL: fence.engineUrl,
          POLAR_FENCE_GATEWAYS: JSON.stringify(fence.gateways),
          POLAR_EMPTY_QUEUE: EMPTY_QUEUE,
          POLAR_EMPTY_BASE_URL: emptyBase,
          PYTHONDONTWRITEBYTECODE: "1",
        },
      },
    );
    output = `${run.stdout}\n${run.stderr}`;
    if (!existsSync(junit)) throw new Error(`pytest wrote no report (exit ${run.exitCode}):\n${output}`);
    cases = readJunit(junit);
  }, 660_000);

  afterAll(async () => {
    await Promise.allSettled(extra.reverse().map((p) => p.stop()));
    await stack?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("pytest collected every test this file maps, and no other", () => {
    const mapped = new Set(Object.values(POINTS).flat());
    expect([...cases.keys()].sort(), output).toEqual([...mapped].sort());
  });

  for (const [point, tests] of Object.entries(POINTS)) {
    it(point, () => {
      for (const name of tests) {
        const c = cases.get(name);
        expect(c, `${name} did not run:\n${output}`).toBeDefined();
        expect(c!.passed, `${name} failed:\n${c!.detail}`).toBe(true);
      }
    });
  }
});
