/** The acceptance table per repository (printed, saved as text and JSON) and its bar chart. */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { renderBarChart } from "./chart.ts";
import type { DatagenState } from "./state.ts";

export interface RepoRow {
  repo: string;
  instances: number;
  sessions: number;
  accepted: number;
  rate: number;
}

export function acceptanceRows(state: DatagenState): RepoRow[] {
  const by = new Map<string, RepoRow>();
  for (const d of Object.values(state.done)) {
    const row = by.get(d.repo) ?? { repo: d.repo, instances: 0, sessions: 0, accepted: 0, rate: 0 };
    row.instances++;
    row.sessions += d.sessions;
    row.accepted += d.accepted;
    by.set(d.repo, row);
  }
  const rows = [...by.values()].sort((a, b) => a.repo.localeCompare(b.repo));
  const total = rows.reduce((t, r) => ({ ...t, instances: t.instances + r.instances, sessions: t.sessions + r.sessions, accepted: t.accepted + r.accepted }), { repo: "TOTAL", instances: 0, sessions: 0, accepted: 0, rate: 0 });
  for (const r of [...rows, total]) r.rate = r.sessions ? r.accepted / r.sessions : 0;
  return [...rows, total];
}

export function formatTable(rows: RepoRow[]): string {
  const head = ["repository", "instances", "sessions", "accepted", "rate"];
  const cells = rows.map((r) => [r.repo, String(r.instances), String(r.sessions), String(r.accepted), `${(r.rate * 100).toFixed(1)}%`]);
  const w = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) => c.map((x, i) => (i === 0 ? x.padEnd(w[i]!) : x.padStart(w[i]!))).join("  ");
  return [line(head), w.map((n) => "-".repeat(n)).join("  "), ...cells.map(line)].join("\n") + "\n";
}

/** Writes acceptance.txt, acceptance.json and acceptance.png into `dir`; returns the table text. */
export async function writeReport(dir: string, state: DatagenState): Promise<string> {
  const rows = acceptanceRows(state);
  const table = formatTable(rows);
  await writeFile(join(dir, "acceptance.txt"), table);
  await writeFile(join(dir, "acceptance.json"), JSON.stringify(rows, null, 2));
  const bars = rows.map((r) => ({ label: r.repo, value: r.rate, caption: `${r.accepted}/${r.sessions}` }));
  await writeFile(join(dir, "acceptance.png"), renderBarChart("accepted sessions per repository", bars));
  return table;
}
