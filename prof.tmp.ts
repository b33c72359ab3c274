import { benchSession } from "./bench/builder.bench.ts";
import { buildPrefixMerging } from "./src/builders/prefix-merging.ts";
const turns = Number(process.argv[2]);
const s = benchSession(turns);
const cfg = { detect_end_of_turn: true, superseded_retries: "drop" as const, end_of_turn_token_id: 151645 };
const a: number[] = [];
for (let i = 0; i < 15; i++) { const t0 = performance.now(); buildPrefixMerging(s, cfg); a.push(performance.now() - t0); }
console.log(turns, a.map((x) => x.toFixed(1)).join(" "));
