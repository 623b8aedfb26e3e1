/**
 * A minimal writer of the Prometheus text exposition format (version 0.0.4) for the Worker.
 * prom-client does not load in workerd (it needs `node:process` at import and Node's process
 * collectors), and the control plane's families are built afresh from Durable Object state on each
 * scrape, so a registry is not needed either: this writes `# HELP`, `# TYPE` and the samples of
 * each family, escaping as the format says (help: `\` and newline; label values: `\`, `"` and
 * newline).
 *
 * @module
 */

/** Content type of the 0.0.4 text format. */
export const EXPOSITION_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/** Label names to values of one sample. */
export type Labels = Record<string, string>;

/** One sample of a gauge or counter family. */
export interface Sample {
  labels: Labels;
  value: number;
}

/** One histogram series: cumulative bucket counts by upper bound (the last `+Inf`), sum, count. */
export interface HistogramSeries {
  labels: Labels;
  buckets: { le: number; count: number }[];
  sum: number;
  count: number;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/**
 * Escapes a label value: backslash, double quote and line feed.
 *
 * @example
 * ```ts
 * escapeLabelValue('a"b\\c\nd'); // 'a\\"b\\\\c\\nd'
 * ```
 */
export function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

/** Escapes help text: backslash and line feed. */
function escapeHelp(text: string): string {
  return text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");
}

/**
 * A sample value as the format writes it: `+Inf`, `-Inf`, `NaN`, or the number.
 *
 * @example
 * ```ts
 * formatValue(Number.POSITIVE_INFINITY); // "+Inf"
 * ```
 */
export function formatValue(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Number.POSITIVE_INFINITY) return "+Inf";
  if (v === Number.NEGATIVE_INFINITY) return "-Inf";
  return String(v);
}

function labelText(labels: Labels): string {
  const parts = Object.entries(labels).map(([k, v]) => {
    if (!LABEL.test(k) || k.startsWith("__")) throw new Error(`invalid label name '${k}'`);
    return `${k}="${escapeLabelValue(v)}"`;
  });
  return parts.length ? `{${parts.join(",")}}` : "";
}

/**
 * Builds one exposition, family by family; a family appears once with its HELP and TYPE even
 * when it has no samples (nothing measured yet).
 *
 * @example
 * ```ts
 * const out = new Exposition();
 * out.gauge("polar_queue_pending_sessions", "Sessions waiting for a gateway", [{ labels: { queue: "default" }, value: 3 }]);
 * new Response(out.text(), { headers: { "content-type": EXPOSITION_CONTENT_TYPE } });
 * ```
 */
export class Exposition {
  private readonly lines: string[] = [];
  private readonly names = new Set<string>();

  gauge(name: string, help: string, samples: Sample[]): this {
    return this.simple(name, "gauge", help, samples);
  }

  /** A counter family; its name must end in `_total`, as the format's linters expect. */
  counter(name: string, help: string, samples: Sample[]): this {
    if (!name.endsWith("_total")) throw new Error(`counter '${name}' must end in _total`);
    return this.simple(name, "counter", help, samples);
  }

  histogram(name: string, help: string, series: HistogramSeries[]): this {
    this.head(name, "histogram", help);
    for (const s of series) {
      if ("le" in s.labels) throw new Error(`histogram '${name}': 'le' is reserved`);
      for (const b of s.buckets)
        this.lines.push(
          `${name}_bucket${labelText({ ...s.labels, le: formatValue(b.le) })} ${formatValue(b.count)}`,
        );
      this.lines.push(`${name}_sum${labelText(s.labels)} ${formatValue(s.sum)}`);
      this.lines.push(`${name}_count${labelText(s.labels)} ${formatValue(s.count)}`);
    }
    return this;
  }

  /** The exposition: one line per HELP, TYPE and sample, ending with a line feed. */
  text(): string {
    return this.lines.length ? `${this.lines.join("\n")}\n` : "";
  }

  private simple(name: string, type: "gauge" | "counter", help: string, samples: Sample[]): this {
    this.head(name, type, help);
    for (const s of samples) this.lines.push(`${name}${labelText(s.labels)} ${formatValue(s.value)}`);
    return this;
  }

  private head(name: string, type: string, help: string): void {
    if (!NAME.test(name)) throw new Error(`invalid metric name '${name}'`);
    if (this.names.has(name)) throw new Error(`metric family '${name}' written twice`);
    this.names.add(name);
    this.lines.push(`# HELP ${name} ${escapeHelp(help)}`, `# TYPE ${name} ${type}`);
  }
}
