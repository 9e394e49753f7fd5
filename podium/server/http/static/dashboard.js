// Podium's dashboard: polls the daemon's JSON API with the session's cookie and the
// page key this origin keeps in localStorage (another port's page can read neither
// that key nor send it), and builds the page with textContent only (never innerHTML):
// every job name, user and reason is someone's input.
"use strict";

const KEY = "podium-key";

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value; else node.setAttribute(key, value);
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child ?? "")));
  }
  return node;
}

async function getJSON(path) {
  const headers = { "X-Podium-Key": localStorage.getItem(KEY) || "" };
  const answer = await fetch(path, { credentials: "same-origin", headers });
  if (answer.status === 401) { window.location.href = "/login"; throw new Error("login"); }
  const body = await answer.json();
  if (!answer.ok) throw new Error(body.error || answer.status);
  return body;
}

// Every time on the page in the browser's own locale and zone, from epoch seconds.
function when(epoch) {
  return epoch == null ? "N/A" : new Date(epoch * 1000).toLocaleString();
}

// a pending job's expected start: planned by the forecast's passes, an estimate beyond
// them ("about"), or why there is none
function startOf(kind, epoch, why) {
  if (epoch == null) return why ? `N/A (${why})` : "N/A";
  return kind === "estimate" ? `about ${when(epoch)} (estimate)` : when(epoch);
}

function duration(seconds) {
  if (seconds == null) return "";
  const s = Math.round(seconds), h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
  return h ? `${h} h ${String(m).padStart(2, "0")} min` : m ? `${m} min ${s % 60} s` : `${s} s`;
}

function percent(value) {
  return value == null ? "-" : `${Math.round(value)} %`;
}

function gpuCell(node, gpu, users, telemetry) {
  const health = gpu.health || {};
  const fenced = health.fenced || (health.label && health.label !== "schedulable");
  const jobs = gpu.share ? gpu.share.jobs : (gpu.job_id == null ? [] : [gpu.job_id]);
  const cls = "gpu" + (fenced ? " fenced" : jobs.length ? " busy" : "");
  const cell = el("div", { class: cls, "data-gpu": `${node.node}/${gpu.index}` },
    el("div", { class: "name" }, `${node.node} GPU ${gpu.index}`),
    el("div", { class: "what" }, gpu.type || ""));
  for (const job of jobs) {
    cell.append(el("div", { class: "what job" }, "job ",
      el("a", { href: `/jobs/${job}` }, String(job)), ` ${users[job] || ""}`));
  }
  if (!jobs.length) cell.append(el("div", { class: "what" }, "idle"));
  // NVML's values for a whole GPU (a MIG slice or share shows its GPU's); none on declared GPUs
  const values = telemetry[String(gpu.parent == null ? gpu.index : gpu.parent)] || {};
  const used = values.DCGM_FI_DEV_FB_USED, free = values.DCGM_FI_DEV_FB_FREE;
  cell.append(el("div", { class: "what util" }, `util ${percent(values.DCGM_FI_DEV_GPU_UTIL)}` +
    (used == null ? "" : `, mem ${(used / 1024).toFixed(1)}/${((used + free) / 1024).toFixed(0)} GiB`)));
  cell.append(el("div", { class: "what health" }, health.label || ""));
  if (fenced && health.reason) cell.append(el("div", { class: "what reason" }, health.reason));
  return cell;
}

function blockerList(blockers) {
  return el("ul", { class: "blockers" }, ...(blockers || []).map((b) => el("li", { "data-kind": b.kind }, b.text)));
}

function lostWords(lost) {
  const parts = Object.entries(lost || {}).filter(([, v]) => v > 0).map(([cause, v]) => `${cause} ${Math.round(v)}`);
  return parts.length ? parts.join(", ") : "none";
}

const RECENT_S = 3600;  // finished jobs shown on the main page: those of the last hour

async function refreshIndex() {
  const since = Math.floor(Date.now() / 1000) - RECENT_S;
  const [nodes, jobs, forecast, telemetry, health, ended] = await Promise.all([
    getJSON("/v1/nodes"), getJSON("/v1/jobs"), getJSON("/v1/forecast"),
    getJSON("/v1/gpus/telemetry"), getJSON("/v1/health/events?limit=20"),
    getJSON(`/v1/acct?since=${since}`)]);
  const users = {};
  for (const job of jobs.jobs) users[job.job_id] = job.user;
  const grid = el("div", { class: "grid" });
  for (const node of nodes.nodes) for (const gpu of node.gpus) grid.append(gpuCell(node, gpu, users, telemetry.gpus));
  document.getElementById("gpus").replaceChildren(grid);
  for (const id of ["gpus", "queue", "health"]) document.getElementById(id).className = "";
  const expected = {};
  for (const f of forecast.jobs) expected[f.job_id] = f;
  const rows = jobs.jobs.map((job) => {
    const f = expected[job.job_id] || {};
    const why = job.state === "RUNNING" ? job.node : el("div", {}, job.reason, blockerList(f.blockers));
    return el("tr", { "data-job": job.job_id },
      el("td", {}, el("a", { href: `/jobs/${job.job_id}` }, job.display_id)),
      el("td", {}, job.name), el("td", {}, job.user), el("td", {}, job.state),
      el("td", {}, job.gpus), el("td", { class: "why" }, why),
      el("td", {}, job.state === "PENDING"
        ? startOf(f.start_kind, f.expected_start_epoch, f.no_start_reason) : ""));
  });
  const table = el("table", {}, el("tr", {}, ...["JOB", "NAME", "USER", "STATE", "GPUS",
    "NODE / WHY IT WAITS", "EXPECTED START"].map((h) => el("th", {}, h))), ...rows);
  document.getElementById("queue").replaceChildren(jobs.jobs.length ? table : el("p", { class: "muted" }, "no jobs"));
  // The last hour's finished jobs, newest first: a job that ends does not just vanish.
  const done = ended.jobs.filter((j) => j.end_epoch != null && !["PENDING", "RUNNING"].includes(j.state))
    .sort((a, b) => b.end_epoch - a.end_epoch).slice(0, 20);
  const finished = el("table", {}, el("tr", {}, ...["JOB", "NAME", "USER", "STATE", "EXIT", "ELAPSED", "ENDED"]
    .map((h) => el("th", {}, h))), ...done.map((j) => el("tr", { "data-ended": j.job_id },
      el("td", {}, el("a", { href: `/jobs/${j.job_id}` }, j.display_id)), el("td", {}, j.name),
      el("td", {}, j.user), el("td", {}, j.state), el("td", {}, j.exit_code ?? ""),
      el("td", {}, duration(j.elapsed_s)), el("td", {}, when(j.end_epoch)))));
  const recent = document.getElementById("finished");
  recent.className = "";
  recent.replaceChildren(done.length ? finished : el("p", { class: "muted" }, "no job ended in the last hour"));
  const events = el("table", {}, el("tr", {}, el("th", {}, "TIME"), el("th", {}, "NODE"), el("th", {}, "EVENT")),
    ...health.events.map((e) => el("tr", { class: "event" }, el("td", {}, when(e.time)), el("td", {}, e.node || ""),
      el("td", {}, e.detail || e.kind))));
  document.getElementById("health").replaceChildren(health.events.length ? events : el("p", { class: "muted" }, "no health events"));
  document.getElementById("updated").textContent = new Date().toLocaleTimeString();
}

async function refreshJob(id) {
  let job;
  try { job = await getJSON(`/v1/jobs/${id}`); } catch (error) {
    document.getElementById("job").replaceChildren(el("p", { class: "error" }, error.message));
    return;
  }
  const facts = [["state", job.state], ["user", job.user], ["account", job.account],
    ["QoS", job.qos], ["GPUs", (job.gpu_ids || []).join(", ") || job.gpus],
    ["node", job.node || ""], ["reason", job.reason === "None" ? "-" : job.reason], ["restarts", job.restart_count],
    ["GPU-seconds (every run)", job.gpu_seconds_all_runs],
    ["lost GPU-seconds", lostWords(job.lost_gpu_seconds)],
    ["submitted", when(job.submit_epoch)], ["started", when(job.start_epoch)], ["ended", when(job.end_epoch)]];
  const spent = job.gpu_seconds_all_runs || 0;
  const lost = Object.values(job.lost_gpu_seconds || {}).reduce((a, b) => a + b, 0);
  facts.push(["goodput", spent > 0 ? `${(100 * (spent - lost) / spent).toFixed(1)} %` : "-"]);
  if (job.state === "PENDING") {
    facts.push(["expected start",
      startOf(job.start_kind, job.expected_start_epoch, job.no_start_reason)]);
  }
  if (job.progress) {
    const p = job.progress;
    const end = p.expected_end === null ? "its end is estimated from its next report" : `expected to end ${when(p.expected_end)}`;
    facts.push(["progress", `${Math.round(100 * p.fraction)} % (${p.done} of ${p.total}), ${end}`]);
  }
  if (job.straggler) facts.push(["straggler", job.straggler]);
  const table = el("table", {}, ...facts.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v))));
  const events = el("table", {}, el("tr", {}, el("th", {}, "TIME"), el("th", {}, "EVENT"), el("th", {}, "DETAIL")),
    ...job.events.map((e) => el("tr", {}, el("td", {}, when(e.time)), el("td", {}, e.kind), el("td", {}, e.detail || ""))));
  const parts = [el("h2", {}, `job ${job.display_id}: ${job.name}`), table];
  if (job.blockers && job.blockers.length) parts.push(el("h2", {}, "why it waits"), blockerList(job.blockers));
  parts.push(...rankParts(job));
  parts.push(el("h2", {}, "timeline"), events);
  if (job.state !== "PENDING") {
    let tail;
    try { tail = await getJSON(`/v1/jobs/${id}/log`); } catch (error) { tail = { error: error.message, text: "" }; }
    parts.push(el("h2", {}, "output (last lines)"),
      tail.error ? el("p", { class: "muted log-error" }, tail.error) : el("pre", { class: "log" }, tail.text));
  }
  const section = document.getElementById("job");
  section.className = "";
  section.replaceChildren(...parts);
  document.getElementById("updated").textContent = new Date().toLocaleTimeString();
}

// Each rank's step seconds (outside collectives; the straggler's row marked) and the
// replicas replaced from spares, when the job has either.
function rankParts(job) {
  const parts = [];
  const seconds = Object.entries(job.rank_step_seconds || {});
  const slow = job.straggler ? job.straggler.match(/^rank (\d+):/) : null;
  if (seconds.length) {
    parts.push(el("h2", {}, "ranks"), el("table", { class: "ranks" },
      el("tr", {}, el("th", {}, "RANK"), el("th", {}, "STEP SECONDS (OUTSIDE COLLECTIVES)")),
      ...seconds.map(([rank, s]) => el("tr", { "data-rank": rank, class: slow && slow[1] === rank ? "straggler" : "" },
        el("td", {}, rank), el("td", {}, s)))));
  }
  const replaced = job.replacements || [];
  if (replaced.length) {
    parts.push(el("h2", {}, "replacements"), el("table", { class: "replacements" },
      el("tr", {}, ...["TIME", "GENERATION", "RANK", "FROM", "TO", "WHY"].map((h) => el("th", {}, h))),
      ...replaced.map((r) => el("tr", {}, el("td", {}, when(r.time)), el("td", {}, r.generation),
        el("td", {}, (r.replaced || []).join(", ")),
        el("td", {}, r.node_from || `GPU ${(r.gpus_from || []).join(", ")}`),
        el("td", {}, (r.node_to || `GPU ${(r.gpus_to || []).join(", ")}`) + (r.warm ? " (warm standby)" : "")),
        el("td", {}, r.reason || "")))));
  }
  return parts;
}

// One refresh at a time: the next is asked for 2 s after the last answer came, so a
// slow daemon is never sent a second request while it works on the first.
function start() {
  const page = document.body.dataset.page;
  if (page === "stored") {  // just logged in: keep the page key, then the cluster
    localStorage.setItem(KEY, document.body.dataset.key);
    window.location.replace("/");
    return;
  }
  if (page === "logout") {
    localStorage.removeItem(KEY);
    window.location.replace("/login");
    return;
  }
  const tick = page === "job" ? () => refreshJob(document.body.dataset.job) : refreshIndex;
  const again = () => tick().catch(() => {}).finally(() => setTimeout(again, 2000));
  again();
}

document.addEventListener("DOMContentLoaded", start);
