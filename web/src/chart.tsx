/**
 * Chart.js behind a Preact component: the chart is created once per canvas and updated in place
 * when its data changes (no flicker on live updates). Only the parts the dashboard draws are
 * registered, which keeps the bundle small.
 *
 * @module
 */
import {
  BarController,
  BarElement,
  CategoryScale,
  Chart,
  type ChartConfiguration,
  Legend,
  LinearScale,
  Tooltip,
} from "chart.js";
import { useEffect, useRef } from "preact/hooks";

Chart.register(BarController, BarElement, CategoryScale, LinearScale, Tooltip, Legend);
Chart.defaults.animation = false;

/** Props of {@link BarChart}. */
export interface BarChartProps {
  labels: string[];
  datasets: Array<{ label: string; data: number[]; color: string }>;
  /** Horizontal bars, stacked (stage timelines, sessions per stage). */
  horizontal?: boolean;
  stacked?: boolean;
  height?: number;
  /** Title of the value axis. */
  unit?: string;
  /** For tests and screen readers. */
  label: string;
}

/**
 * A bar chart (histograms, sessions per stage, stage timelines).
 *
 * @example
 * ```tsx
 * <BarChart label="rewards" labels={["0", "1"]} datasets={[{ label: "sessions", data: [2, 2], color: "#4a7" }]} />
 * ```
 */
export function BarChart(props: BarChartProps) {
  const canvas = useRef<HTMLCanvasElement>(null);
  const chart = useRef<Chart<"bar"> | null>(null);
  const config: ChartConfiguration<"bar"> = {
    type: "bar",
    data: {
      labels: props.labels,
      datasets: props.datasets.map((d) => ({ label: d.label, data: d.data, backgroundColor: d.color })),
    },
    options: {
      indexAxis: props.horizontal ? "y" : "x",
      maintainAspectRatio: false,
      responsive: true,
      plugins: { legend: { display: props.datasets.length > 1, position: "bottom" } },
      scales: {
        x: {
          stacked: props.stacked ?? false,
          ...(props.horizontal && props.unit ? { title: { display: true, text: props.unit } } : {}),
        },
        y: {
          stacked: props.stacked ?? false,
          beginAtZero: true,
          ...(!props.horizontal && props.unit ? { title: { display: true, text: props.unit } } : {}),
        },
      },
    },
  };
  useEffect(() => {
    if (!canvas.current) return;
    chart.current = new Chart(canvas.current, config);
    return () => {
      chart.current?.destroy();
      chart.current = null;
    };
    // The chart is made once; later renders update it below.
  }, []);
  useEffect(() => {
    const c = chart.current;
    if (!c) return;
    c.data = config.data;
    if (config.options) c.options = config.options;
    c.update();
  });
  return (
    <div class="chart" style={{ height: `${props.height ?? 160}px` }}>
      <canvas ref={canvas} role="img" aria-label={props.label} />
    </div>
  );
}
