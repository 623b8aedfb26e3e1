/**
 * Fleet: queues and their shards, each gateway (up, draining, paused, policy version, last ping,
 * credit, sessions per stage), the fence of each queue; drain and fence actions. Refreshed when
 * the state-event stream reports a gateway or fence change.
 *
 * @module
 */
import type { Api } from "../api";
import { gateOf, useFleet } from "../fleet-data";
import { useConfirmedAction } from "../hooks";
import { ErrorNote, LiveBadge, Note, Section } from "../ui";
import { GatewayCard } from "./gateway-card";
import { QueueTable } from "./queue-table";

/**
 * The fleet view.
 *
 * @example
 * ```tsx
 * <Fleet api={api} />
 * ```
 */
export function Fleet({ api }: { api: Api }) {
  const { fleet, live } = useFleet(api);
  const { note, act } = useConfirmedAction(fleet.reload);
  const d = fleet.data;
  return (
    <div class="view" data-view="fleet">
      <h1>
        Fleet <LiveBadge state={live} what="gateway and fence events" />
        {/* Without the event stream nothing would ever refresh the page. */}
        {live.kind === "missing" ? (
          <button type="button" onClick={fleet.reload}>
            Refresh
          </button>
        ) : null}
      </h1>
      <Note text={note} />
      {fleet.error ? <ErrorNote error={fleet.error} what="gateways" /> : null}
      {d ? (
        <>
          <Section title="Queues">
            <QueueTable api={api} fleet={d} act={act} />
          </Section>
          <Section title="Gateways">
            {d.gateways.length === 0 ? <p class="muted">No gateway has connected.</p> : null}
            <div class="gateways">
              {d.gateways.map((g) => (
                <GatewayCard
                  key={`${g.shard}/${g.node_id}`}
                  api={api}
                  gateway={g}
                  gate={gateOf(d.fences, g.node_id)}
                  act={act}
                />
              ))}
            </div>
          </Section>
        </>
      ) : null}
    </div>
  );
}
