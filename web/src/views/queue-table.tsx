/**
 * The fleet's queues: each shard's pending sessions and leases, its queue's fence (open, or paused
 * and how) and policy version, and the button that fences or resumes the queue.
 *
 * @module
 */
import type { Api } from "../api";
import type { QueueRow as QueueShard } from "../api-types";
import type { Fleet, QueueFence } from "../fleet-data";
import type { ConfirmedAction } from "../hooks";
import { pauseQueue, resumeQueue } from "../requests";
import { ErrorNote, TableHead } from "../ui";

/** The fence's state, or why it could not be read. */
function FenceState({ fence }: { fence: QueueFence | undefined }) {
  const f = fence?.fence?.fence;
  if (f)
    return f.paused ? (
      <span class="status status-paused">paused ({f.mode})</span>
    ) : (
      <span class="status status-completed">open</span>
    );
  return fence?.error ? <ErrorNote error={fence.error} what="fence" /> : null;
}

/** Fence (pause, drain mode) an open queue, or resume a paused one. */
function FenceButton({
  api,
  queue,
  paused,
  act,
}: {
  api: Api;
  queue: string;
  paused: boolean;
  act: ConfirmedAction["act"];
}) {
  const done = () => "done";
  const onClick = paused
    ? () => act(`Resume ${queue}`, () => resumeQueue(api, queue).then(done))
    : () => act(`Fence ${queue} (pause, drain)`, () => pauseQueue(api, queue).then(done));
  return (
    <button type="button" onClick={onClick}>
      {paused ? "Resume" : "Fence"}
    </button>
  );
}

function QueueShardRow({
  api,
  shard,
  fence,
  act,
}: {
  api: Api;
  shard: QueueShard;
  fence: QueueFence | undefined;
  act: ConfirmedAction["act"];
}) {
  const f = fence?.fence?.fence;
  return (
    <tr data-queue={shard.queue}>
      <td>{shard.queue}</td>
      <td>{shard.shard}</td>
      <td>{shard.pending}</td>
      <td>{shard.leases}</td>
      <td>
        <FenceState fence={fence} />
      </td>
      <td>{f?.policy_version ?? "–"}</td>
      <td>{f ? <FenceButton api={api} queue={shard.queue} paused={f.paused} act={act} /> : null}</td>
    </tr>
  );
}

/**
 * The queues table of the fleet.
 *
 * @example
 * ```tsx
 * <QueueTable api={api} fleet={fleet.data} act={act} />
 * ```
 */
export function QueueTable({ api, fleet, act }: { api: Api; fleet: Fleet; act: ConfirmedAction["act"] }) {
  return (
    <table>
      <TableHead columns={["queue", "shard", "pending", "leases", "fence", "policy version", ""]} />
      <tbody>
        {fleet.queues.map((q) => (
          <QueueShardRow
            key={q.shard}
            api={api}
            shard={q}
            fence={fleet.fences.find((x) => x.queue === q.queue)}
            act={act}
          />
        ))}
      </tbody>
    </table>
  );
}
