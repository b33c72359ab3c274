// Small SVG/HTML charts: no library, nothing fetched.

export function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

const STATUS_COLORS = {
  COMPLETED: "var(--ok)", ERROR: "var(--err)", TIMEOUT: "var(--err)", CANCELLED: "var(--warn)",
  RUNNING: "var(--run)", INITIALIZING: "var(--init)", READY: "var(--init)", POST_RUN: "var(--post)",
  BUILDING: "var(--post)", EVALUATING: "var(--post)", REGISTERED: "#3a4052",
};
const ORDER = ["COMPLETED", "ERROR", "TIMEOUT", "CANCELLED", "POST_RUN", "BUILDING", "EVALUATING", "RUNNING", "READY", "INITIALIZING", "REGISTERED"];

/** A progress bar with one segment per session status. */
export function progress(counts, total) {
  const segs = ORDER.filter((k) => counts[k])
    .map((k) => `<span title="${k} ${counts[k]}" style="width:${(100 * counts[k]) / Math.max(1, total)}%;background:${STATUS_COLORS[k]}"></span>`)
    .join("");
  return `<div class="progress" role="progressbar">${segs}</div>`;
}

/** A 10-bin histogram of rewards in [0, 1] (values outside are clamped). */
export function histogram(values, w = 120, h = 26) {
  const bins = new Array(10).fill(0);
  for (const v of values) bins[Math.min(9, Math.max(0, Math.floor(v * 10)))]++;
  const max = Math.max(1, ...bins);
  const bw = w / bins.length;
  const bars = bins
    .map((n, i) => `<rect x="${i * bw + 1}" y="${h - (h * n) / max}" width="${bw - 2}" height="${(h * n) / max}" fill="var(--ok)"><title>${(i / 10).toFixed(1)}–${((i + 1) / 10).toFixed(1)}: ${n}</title></rect>`)
    .join("");
  return `<svg class="hist" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}"><rect width="${w}" height="${h}" fill="#232838"/>${bars}</svg>`;
}

/** A line of the last points, each in [0, max]. */
export function sparkline(points, max = 1, color = "var(--run)") {
  const w = 300;
  const h = 34;
  if (points.length < 2) return `<svg class="spark" viewBox="0 0 ${w} ${h}"></svg>`;
  const step = w / (points.length - 1);
  const d = points.map((p, i) => `${i ? "L" : "M"}${(i * step).toFixed(1)},${(h - 2 - ((h - 4) * Math.min(p, max)) / max).toFixed(1)}`).join("");
  return `<svg class="spark" viewBox="0 0 ${w} ${h}" preserveAspectRatio="none"><path d="${d}" fill="none" stroke="${color}" stroke-width="1.5"/></svg>`;
}

/** Colour of a logprob: green near 0 (likely), through yellow, to red (unlikely). */
export function logprobColor(lp) {
  if (lp == null || !Number.isFinite(lp)) return "#3a4052";
  const x = Math.max(0, Math.min(1, -lp / 6));
  const hue = 130 * (1 - x);
  return `hsl(${hue.toFixed(0)} 65% 45%)`;
}
