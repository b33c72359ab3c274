// The token-level trace viewer: tokens coloured by loss mask, logprob on hover
// and as a heat strip, chain and side-call labels, download as JSON.
import { esc, logprobColor } from "./charts.js";

const CHUNK = 1000;
/** Chunks rendered at once; the rest follow in idle slices so the page stays responsive. */
const FIRST_CHUNKS = 3;

export function renderSession(root, s) {
  const rows = [
    `<h2>session ${esc(s.session_id)}</h2>`,
    `<div class="kv"><span>task <a href="#/task/${encodeURIComponent(s.task_id)}">${esc(s.task_id)}</a></span>`,
    `<span>status <b class="s-${esc(s.status)}" data-field="status">${esc(s.status)}</b></span>`,
    `<span>reward <b data-field="reward">${s.reward == null ? "–" : s.reward.toFixed(3)}</b></span>`,
    `<span>attempt <b>${s.attempt}</b></span><span>node <b>${esc(s.node_id ?? "–")}</b></span>`,
    `<span>builder <b>${esc(s.builder ?? "–")}</b></span><span>traces <b>${s.traces.length}</b></span>`,
    `<button id="download">download JSON</button></div>`,
    s.error ? `<p class="err">${esc(s.error)}</p>` : "",
    `<div class="legend"><span class="t p">prompt (mask 0)</span><span class="t m1">sampled, trained (mask 1)</span><span class="t m0">response, not trained (mask 0)</span></div>`,
    s.traces.map((t) => traceCard(t)).join(""),
  ];
  root.innerHTML = rows.join("");
  const rest = [];
  for (const t of s.traces) {
    const card = root.querySelector(`[data-trace="${t.index}"]`);
    const chunks = tokenChunks(t);
    const box = card.querySelector(".tokens");
    box.innerHTML = chunks.slice(0, FIRST_CHUNKS).join("");
    for (const c of chunks.slice(FIRST_CHUNKS)) rest.push([box, c]);
    drawHeat(card.querySelector("canvas"), t);
    hookHover(card, t);
  }
  appendIdle(root, rest);
  root.querySelector("#download").onclick = () => download(s);
}

function traceCard(t) {
  const start = t.chain.start_reason;
  const head = [
    `<b>trace ${t.index}</b>`,
    `<span>chain ${t.chain.index ?? "–"}${t.chain.segment != null ? ` · segment ${t.chain.segment}` : ""}</span>`,
    start ? `<span class="${start === "diverged_from_tip" ? "diverged" : ""}" data-field="chain-start">new chain: ${esc(start)}</span>` : "",
    t.chain.split_reason ? `<span>split: ${esc(t.chain.split_reason)}</span>` : "",
    t.side.role === "side" ? `<span class="badge s-EVALUATING" data-field="side">side call${t.side.kind ? `: ${esc(t.side.kind)}` : ""}</span>` : "",
    `<span>reward <b>${t.reward == null ? "–" : t.reward}</b></span>`,
    t.training_filter ? `<span class="err" data-field="filter">filtered: ${esc(t.training_filter.reason ?? JSON.stringify(t.training_filter))}</span>` : "",
    `<span class="muted">${t.prompt_ids.length} prompt + ${t.response_ids.length} response tokens, ${t.loss_mask.filter((m) => m === 1).length} trained</span>`,
    t.finish_reason ? `<span class="muted">finish ${esc(t.finish_reason)}</span>` : "",
  ].join("");
  return `<section class="trace" data-trace="${t.index}"><div class="head">${head}</div><canvas class="heat" height="14"></canvas><div class="tokens"></div></section>`;
}

/** Appends the remaining chunks a few at a time between frames; stops if the view was replaced. */
function appendIdle(root, queue) {
  const marker = {};
  root.__render = marker;
  const step = (deadline) => {
    if (root.__render !== marker) return;
    // At least one chunk per slice (an idle callback that timed out has no time remaining), then while idle time lasts.
    const t0 = performance.now();
    do {
      const [box, html] = queue.shift();
      box.insertAdjacentHTML("beforeend", html);
    } while (queue.length && (deadline && !deadline.didTimeout ? deadline.timeRemaining() > 2 : performance.now() - t0 < 12));
    if (queue.length) schedule(step);
    else root.dataset.rendered = "all";
  };
  root.dataset.rendered = queue.length ? "partial" : "all";
  if (queue.length) schedule(step);
}

function schedule(f) {
  if (typeof requestIdleCallback === "function") requestIdleCallback(f, { timeout: 50 });
  else setTimeout(f, 0);
}

function tokenChunks(t) {
  const out = [];
  let buf = [];
  const flush = () => {
    if (buf.length) out.push(`<span class="chunk">${buf.join("")}</span>`);
    buf = [];
  };
  const np = t.prompt_ids.length;
  for (let i = 0; i < np; i++) {
    buf.push(`<span class="t p" data-i="${i}">${esc(t.prompt_text[i])}</span>`);
    if (buf.length === CHUNK) flush();
  }
  for (let j = 0; j < t.response_ids.length; j++) {
    buf.push(`<span class="t r m${t.loss_mask[j]}" data-i="${np + j}">${esc(t.response_text[j])}</span>`);
    if (buf.length === CHUNK) flush();
  }
  flush();
  return out;
}

function drawHeat(canvas, t) {
  const n = t.response_ids.length;
  const w = (canvas.width = Math.max(1, Math.min(4000, canvas.clientWidth || 1200)));
  const ctx = canvas.getContext("2d");
  ctx.fillStyle = "#232838";
  ctx.fillRect(0, 0, w, 14);
  if (!n) return;
  // Each pixel column shows the lowest logprob of the tokens it covers (the surprises stand out).
  for (let x = 0; x < w; x++) {
    const a = Math.floor((x * n) / w);
    const b = Math.max(a + 1, Math.floor(((x + 1) * n) / w));
    let min = Infinity;
    for (let j = a; j < b && j < n; j++) if (t.response_logprobs[j] != null) min = Math.min(min, t.response_logprobs[j]);
    ctx.fillStyle = logprobColor(min === Infinity ? null : min);
    ctx.fillRect(x, 0, 1, 14);
  }
  canvas.title = "response logprobs (green: likely, red: unlikely)";
}

function hookHover(card, t) {
  const tip = document.getElementById("tip");
  const np = t.prompt_ids.length;
  const box = card.querySelector(".tokens");
  box.addEventListener("mouseover", (e) => {
    const el = e.target.closest(".t");
    if (!el) return;
    const i = Number(el.dataset.i);
    const lines = i < np
      ? [`prompt token ${i}`, `id ${t.prompt_ids[i]}`, `text ${JSON.stringify(t.prompt_text[i])}`, "mask 0"]
      : [`response token ${i - np}`, `id ${t.response_ids[i - np]}`, `text ${JSON.stringify(t.response_text[i - np])}`,
         `mask ${t.loss_mask[i - np]}`, `logprob ${fmt(t.response_logprobs[i - np])}`];
    tip.textContent = lines.join("\n");
    tip.hidden = false;
  });
  box.addEventListener("mousemove", (e) => {
    tip.style.left = `${e.clientX + 14}px`;
    tip.style.top = `${e.clientY + 14}px`;
  });
  box.addEventListener("mouseleave", () => (tip.hidden = true));
}

function fmt(lp) {
  return lp == null ? "–" : `${lp.toFixed(4)} (p=${Math.exp(lp).toFixed(3)})`;
}

function download(s) {
  const traces = s.traces.map((t) => ({
    index: t.index, prompt_ids: t.prompt_ids, response_ids: t.response_ids, loss_mask: t.loss_mask,
    response_logprobs: t.response_logprobs, reward: t.reward, finish_reason: t.finish_reason,
    training_filter: t.training_filter, chain: t.chain, side: t.side,
  }));
  const blob = new Blob([JSON.stringify({ task_id: s.task_id, session_id: s.session_id, status: s.status, traces }, null, 1)], { type: "application/json" });
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = `trace-${s.session_id}.json`;
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}
