// What the run page and the offline run report share: findings that zoom the timeline when clicked, the
// tabs and the tables under the timeline (the same columns on both).
import { SS } from "./common.js";
import { fillTable, metricsCatalog, stickyColumns } from "./tables.js";

export const KERNEL_COLUMNS = ["name", "kind", "count", "total_ns", "mean_ns", "max_ns", "bytes", "gpu_frac"];
export const SYNC_COLUMNS = ["cause", "source", "count", "steps", "total_ns", "mean_ns", "saving_ns"];
// (a run of one rank has its collectives' durations, "dur_ns", and none of the columns across ranks)
export const COLLECTIVE_COLUMNS = ["seq", "name", "group", "bytes", "ranks", "comm_latency_ns", "dur_ns",
  "start_skew_ns", "end_skew_ns", "max_wait_ns", "last_rank"];
export const HOST_COLUMNS = ["frame", "total_ns", "total_frac", "self_ns", "per_step_ns"];
// What the host-time table is read from (webapp.analysis.hoststacks.BASES), as the note names it.
const HOST_BASES = {
  sampled: "Python frame (the recorder's sampled stacks)",
  traced: "Python frame (torch.profiler's Python calls, exact)",
  cpu_ops: "CPU op (own time: the trace has no Python stacks)",
};

// the per-step table's columns: rank, step and the step columns of the page's catalogue (made for this run)
export function stepColumns() {
  return ["rank", "step", ...metricsCatalog().filter((m) => m.step_column).map((m) => m.key)];
}

// The findings the server rendered into `list` (li[data-finding] = index into `findings`): a click zooms
// `tl` to the finding's next piece of evidence and outlines it. `runStart`: the run's first ns.
export function bindFindings(list, findings, tl, runStart) {
  list.querySelectorAll("li[data-finding]").forEach((li) => {
    const f = findings[Number(li.dataset.finding)] || {};
    const evidence = f.evidence || [];
    let turn = 0;
    li.addEventListener("click", () => {
      list.querySelectorAll("li").forEach((x) => x.classList.remove("active"));
      li.classList.add("active");
      const ev = evidence[turn % Math.max(1, evidence.length)];
      turn += 1;
      if (ev) tl.focus(ev.start_ns - runStart, ev.end_ns - runStart, ev.interval_ids, f.title);
      tl.root.scrollIntoView({ block: "nearest", behavior: "smooth" });
    });
  });
}

// The run's tables, each built once when its tab first opens: `data()` gives {per_step, kernels,
// sync_sources, host_frames, ranks}, or null while it is not there yet; `onStep(row)` runs on a click on a step's row;
// `gpu` false leaves out the columns that only mean something with GPU work. Returns build(all).
export function bindTabs(data, onStep, gpu) {
  const table = (id, rows, cols, onRow) => fillTable(document.getElementById(id), rows, cols, onRow);
  const tables = {
    "tab-steps": (d) => {
      table("steps-table", d.per_step, stepColumns(), onStep);
      stickyColumns(document.getElementById("steps-table"), ["rank", "step", "step_time_ns"]);
    },
    "tab-kernels": (d) => table("kernels-table", d.kernels, KERNEL_COLUMNS.filter((c) => gpu || c !== "gpu_frac")),
    "tab-syncs": (d) => table("syncs-table", d.sync_sources, SYNC_COLUMNS),
    "tab-host": (d) => {
      const rows = d.host_frames || [];
      const basis = HOST_BASES[d.host_frames_basis] || "";
      document.getElementById("host-note").textContent = rows.length
        ? `Host time over the steps by ${basis}: total = with the frame anywhere on the stack, self = innermost.`
        : d.host_frames_missing || "This run has no host stacks.";
      table("host-table", rows, HOST_COLUMNS);
      // a run of several ranks: each rank's frames too (a straggler's extra host work shows on its own)
      const byRank = (d.ranks || {}).host_frames;
      if (!rows.length || !byRank) return;
      const pick = document.getElementById("host-rank");
      pick.replaceChildren(SS.el("option", { value: "" }, "all ranks"),
        ...Object.keys(byRank).map((r) => SS.el("option", { value: r }, "rank " + r)));
      document.getElementById("host-rank-pick").hidden = false;
      pick.addEventListener("change", () => table("host-table", pick.value === "" ? rows : byRank[pick.value], HOST_COLUMNS));
    },
    "tab-colls": (d) => table("colls-table", (d.ranks || {}).collectives || [], COLLECTIVE_COLUMNS),
  };
  const built = new Set();
  let active = "tab-steps";
  const buildOne = (id, d) => {
    if (!built.has(id) && tables[id] && document.getElementById(id)) { built.add(id); tables[id](d); }
  };
  const build = (all) => {
    const d = data();
    if (d) for (const id of all ? Object.keys(tables) : [active]) buildOne(id, d);
  };
  document.querySelectorAll(".tabs button").forEach((b) => b.addEventListener("click", () => {
    active = b.dataset.tab;
    build(false);
    document.querySelectorAll(".tabs button").forEach((x) => x.classList.toggle("active", x === b));
    document.querySelectorAll(".tab").forEach((t) => { t.hidden = t.id !== b.dataset.tab; });
  }));
  return build;  // call when the data arrives: builds the open tab's table (every table with `all`)
}
