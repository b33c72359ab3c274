// polar dashboard: overview (nodes, tasks), one task's sessions, one session's traces.
// Live through the SSE `/events` stream; node metrics polled from `/rollout/status`.
import { esc, histogram, progress, sparkline } from "./charts.js";
import { renderSession } from "./trace-view.js";

const view = document.getElementById("view");
const HISTORY = 60; // node samples kept (about two minutes at one per 2 s)
const nodeHistory = new Map(); // node_id -> [{t, busyMs, finished}]
let route = parse();
let refreshTimer = null;

async function api(path, init) {
  const r = await fetch(path, init);
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body?.error?.message ?? `${r.status} ${r.statusText}`);
  return body;
}

function parse() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  if (parts[0] === "task" && parts[1]) return { name: "task", task: parts[1] };
  if (parts[0] === "trace" && parts[1] && parts[2]) return { name: "trace", task: parts[1], session: parts[2] };
  return { name: "overview" };
}

window.addEventListener("hashchange", () => {
  route = parse();
  view.innerHTML = '<p class="muted">loading…</p>';
  render();
});

/** Re-render soon (coalesces bursts of events into one fetch). */
function refresh(ms = 250) {
  if (refreshTimer) return;
  refreshTimer = setTimeout(() => {
    refreshTimer = null;
    render();
  }, ms);
}

async function render() {
  try {
    if (route.name === "overview") await renderOverview();
    else if (route.name === "task") await renderTask(route.task);
    else await renderTrace(route.task, route.session);
  } catch (err) {
    view.innerHTML = `<p class="err">${esc(err.message)}</p>`;
  }
}

// ------------------------------------------------------------------ nodes

async function pollStatus() {
  try {
    const st = await api("/rollout/status");
    document.getElementById("summary").textContent = `${st.running_tasks} running tasks · ${st.pending_sessions} queued sessions · ${st.nodes.length} nodes`;
    const now = Date.now();
    for (const n of st.nodes) {
      const h = nodeHistory.get(n.node_id) ?? [];
      h.push({ t: now, busyMs: n.metrics.upstream_busy_ms ?? 0, finished: n.metrics.sessions_finished ?? 0 });
      if (h.length > HISTORY) h.shift();
      nodeHistory.set(n.node_id, h);
    }
    if (route.name === "overview") {
      drawNodes(st.nodes);
      drawEvaluators(st.evaluators ?? [], st.pending_evaluations ?? 0);
      drawUnserved(st.unserved_pools ?? []);
    }
  } catch {
    // the next poll tries again; the live badge shows the connection state
  }
}

function rates(h) {
  const busy = [];
  const perMin = [];
  for (let i = 1; i < h.length; i++) {
    const dt = h[i].t - h[i - 1].t;
    busy.push(dt > 0 ? Math.min(1, Math.max(0, (h[i].busyMs - h[i - 1].busyMs) / dt)) : 0);
    perMin.push(dt > 0 ? (60_000 * Math.max(0, h[i].finished - h[i - 1].finished)) / dt : 0);
  }
  return { busy, perMin };
}

function stageRow(cls, label, value, cap) {
  const pct = cap > 0 ? Math.min(100, (100 * value) / cap) : value > 0 ? 100 : 0;
  return `<div class="stage ${cls}" data-stage="${cls}" data-value="${value}" data-capacity="${cap}"><span>${label}</span><div class="bar"><i style="width:${pct}%"></i></div><span>${value} / ${cap}</span></div>`;
}

function drawNodes(nodes) {
  const el = document.getElementById("nodes");
  if (!el) return;
  if (!nodes.length) {
    el.innerHTML = '<p class="muted">no nodes registered</p>';
    return;
  }
  el.innerHTML = nodes
    .map((n) => {
      const m = n.metrics;
      const h = nodeHistory.get(n.node_id) ?? [];
      const { busy, perMin } = rates(h);
      const age = (Date.now() - Date.parse(n.last_heartbeat)) / 1000;
      const lastBusy = busy.length ? busy[busy.length - 1] : 0;
      const avgRate = perMin.length ? perMin.reduce((a, b) => a + b, 0) / perMin.length : 0;
      return `<div class="node" data-node="${esc(n.node_id)}">
        <div class="title"><b>${esc(n.node_id)}</b><span><span class="badge ${n.healthy ? "s-completed" : "s-failed"}">${n.healthy ? "healthy" : "silent"}</span>${n.draining ? ' <span class="badge s-cancelling">draining</span>' : ""}</span></div>
        ${stageRow("init", "INIT", m.init_inflight + m.init_queue_depth, n.max_init_workers)}
        ${stageRow("ready", "READY", m.ready_depth, n.ready_capacity ?? n.max_run_workers)}
        ${stageRow("run", "RUNNING", m.run_inflight, n.max_run_workers)}
        ${stageRow("postrun", "POSTRUN", m.postrun_inflight + m.postrun_queue_depth, n.max_postrun_workers)}
        <div class="kv"><span>pool <b>${esc(n.pool)}</b></span><span>heartbeat <b>${age.toFixed(0)} s ago</b></span>
        <span>throughput <b data-field="throughput">${avgRate.toFixed(1)}/min</b></span><span>upstream busy <b data-field="busy">${(100 * lastBusy).toFixed(0)}%</b></span>
        <span>calls in flight <b>${m.upstream_inflight ?? 0}</b></span></div>
        ${sparkline(busy, 1)}
      </div>`;
    })
    .join("");
}

function drawEvaluators(evs, pending) {
  const el = document.getElementById("evaluators");
  if (!el) return;
  if (!evs.length) {
    el.innerHTML = '<p class="muted">no evaluator actors registered</p>';
    return;
  }
  el.innerHTML = evs
    .map((e) => {
      const m = e.metrics;
      const age = (Date.now() - Date.parse(e.last_heartbeat)) / 1000;
      return `<div class="node" data-evaluator="${esc(e.node_id)}">
        <div class="title"><b>${esc(e.node_id)}</b><span><span class="badge ${e.healthy ? "s-completed" : "s-failed"}">${e.healthy ? "healthy" : "silent"}</span>${e.draining ? ' <span class="badge s-cancelling">draining</span>' : ""}</span></div>
        ${stageRow("run", "EVALUATING", m.inflight, e.max_concurrency)}
        <div class="kv"><span>pool <b>${esc(e.pool)}</b></span><span>${e.hosted_by ? `in gateway <b>${esc(e.hosted_by)}</b>` : "standalone"}</span>
        <span>heartbeat <b>${age.toFixed(0)} s ago</b></span><span>done <b>${m.completed}</b></span><span>failed <b>${m.failed}</b></span>
        <span>redelivered <b>${m.redelivered}</b></span><span>queued in pool <b>${pending}</b></span></div>
      </div>`;
    })
    .join("");
}

function drawUnserved(pools) {
  const el = document.getElementById("unserved");
  if (!el) return;
  el.innerHTML = pools.length
    ? `<p class="err">sessions waiting in pools no gateway serves: ${pools.map((p) => `${esc(p.pool)} (${p.pending_sessions})`).join(", ")}</p>`
    : "";
}

// ------------------------------------------------------------------ overview

async function renderOverview() {
  const { tasks } = await api("/dashboard/api/tasks?limit=100");
  if (route.name !== "overview") return;
  if (!document.getElementById("tasks")) {
    view.innerHTML = `<h2>nodes</h2><div id="unserved"></div><div id="nodes" class="nodes"></div><h2>evaluators</h2><div id="evaluators" class="nodes"></div><h2>tasks</h2><div id="tasks"></div>`;
    pollStatus();
  }
  const rows = tasks.map((t) => {
    const done = t.completed_sessions;
    const mean = t.rewards.length ? (t.rewards.reduce((a, b) => a + b, 0) / t.rewards.length).toFixed(3) : "–";
    return `<tr class="click" data-task="${esc(t.task_id)}" data-status="${esc(t.status)}">
      <td><a href="#/task/${encodeURIComponent(t.task_id)}">${esc(t.task_id)}</a></td>
      <td><span class="badge s-${esc(t.status)}" data-field="status">${esc(t.status)}</span></td>
      <td>${progress(t.counts, t.total_sessions)}</td>
      <td data-field="done">${done}/${t.total_sessions}</td>
      <td>${histogram(t.rewards)}</td><td>${mean}</td>
      <td class="muted">${esc(Object.entries(t.counts).map(([k, v]) => `${k} ${v}`).join(" · "))}</td>
      <td class="muted">${t.created_at ? new Date(t.created_at).toLocaleTimeString() : ""}</td></tr>`;
  });
  document.getElementById("tasks").innerHTML = tasks.length
    ? `<table><thead><tr><th>task</th><th>status</th><th>progress</th><th>done</th><th>rewards</th><th>mean</th><th>sessions</th><th>created</th></tr></thead><tbody>${rows.join("")}</tbody></table>`
    : '<p class="muted">no tasks yet: submit one (polar submit TASK.json) and it appears here</p>';
  for (const tr of document.querySelectorAll("tr[data-task]")) tr.onclick = () => (location.hash = `#/task/${encodeURIComponent(tr.dataset.task)}`);
}

// ------------------------------------------------------------------ one task

async function renderTask(taskId) {
  const t = await api(`/dashboard/api/task/${encodeURIComponent(taskId)}`);
  if (route.name !== "task" || route.task !== taskId) return;
  const live = t.status === "running" || t.status === "cancelling";
  const rows = t.sessions.map((s) => {
    const tm = s.timing;
    const ms = (k) => (tm ? (tm[k] / 1000).toFixed(2) : "–");
    const done = s.result_seq != null;
    return `<tr class="${done ? "click" : ""}" data-session="${esc(s.session_id)}" data-status="${esc(s.status)}">
      <td>${s.sample_index}</td><td>${esc(s.session_id)}</td>
      <td><span class="badge s-${esc(s.status)}" data-field="status">${esc(s.status)}</span></td>
      <td>${s.attempt}</td><td>${esc(s.node_id ?? "–")}</td>
      <td>${s.reward == null ? "–" : s.reward.toFixed(3)}</td><td>${s.trace_count}</td>
      <td>${s.prompt_tokens}/${s.response_tokens}</td>
      <td>${ms("init_ms")}</td><td>${ms("run_ms")}</td><td>${ms("postrun_ms")}</td><td>${ms("e2e_ms")}</td>
      <td class="err">${esc((s.error ?? "").slice(0, 80))}</td></tr>`;
  });
  view.innerHTML = `<h2>task ${esc(t.task_id)}</h2>
    <div class="kv"><span>status <b class="s-${esc(t.status)}" data-field="task-status">${esc(t.status)}</b></span>
    <span>${t.completed_sessions}/${t.total_sessions} done</span>${progress(t.counts, t.total_sessions)}${histogram(t.rewards)}
    ${live ? '<button id="cancel">cancel task</button>' : ""}</div>
    <h2>sessions</h2>
    <table><thead><tr><th>#</th><th>session</th><th>stage</th><th>attempt</th><th>node</th><th>reward</th><th>traces</th><th>tokens p/r</th><th>init s</th><th>run s</th><th>postrun s</th><th>e2e s</th><th>error</th></tr></thead>
    <tbody>${rows.join("")}</tbody></table>`;
  const cancel = document.getElementById("cancel");
  if (cancel) cancel.onclick = () => api(`/rollout/task/${encodeURIComponent(taskId)}`, { method: "DELETE" }).then(() => refresh(0));
  for (const tr of view.querySelectorAll("tr.click[data-session]")) {
    tr.onclick = () => (location.hash = `#/trace/${encodeURIComponent(taskId)}/${encodeURIComponent(tr.dataset.session)}`);
  }
}

async function renderTrace(taskId, sessionId) {
  const s = await api(`/dashboard/api/trace/${encodeURIComponent(taskId)}/${encodeURIComponent(sessionId)}`);
  if (route.name !== "trace" || route.session !== sessionId) return;
  renderSession(view, s);
}

// ------------------------------------------------------------------ live

function connect() {
  const badge = document.getElementById("live");
  const es = new EventSource("/events");
  es.onopen = () => {
    badge.textContent = "live";
    badge.className = "live on";
  };
  es.onerror = () => {
    badge.textContent = "reconnecting";
    badge.className = "live off";
  };
  const onTask = () => route.name !== "trace" && refresh();
  for (const kind of ["task.created", "task.updated", "task.done", "session.state_changed"]) es.addEventListener(kind, onTask);
  for (const kind of ["node.joined", "node.left"]) es.addEventListener(kind, () => pollStatus());
}

connect();
render();
setInterval(pollStatus, 2000);
pollStatus();
