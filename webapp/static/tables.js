// Tables built from analysis records: columns chosen by name, values formatted by the unit in the name.
// Metric columns are labelled by the page's metrics_catalog ({key, label, unit, better, ...}), the others here.
import { SS } from "./common.js";

export function fmtCell(key, v) {
  if (v === null || v === undefined) return "—";
  if (typeof v !== "number") return String(v);
  if (key.endsWith("_ns")) return SS.ns(v);
  if (key.endsWith("_frac")) return SS.pct(v);
  if (key.endsWith("bytes")) return SS.bytes(v);
  if (key.endsWith("_gbps")) return v.toFixed(2) + " GB/s";
  return Number.isInteger(v) ? v.toLocaleString() : v.toPrecision(3);
}
// labels of the non-metric columns (kernel, sync and op tables); metric columns take the catalogue's
const COL_LABELS = {
  rank: "Rank", step: "Step", kind: "Kind", name: "Name", count: "Count", total_ns: "Total", mean_ns: "Mean",
  max_ns: "Max", bytes: "Bytes", gpu_frac: "GPU share", status: "Change", a_count: "A count", b_count: "B count",
  a_total_ns: "A total", b_total_ns: "B total", delta_ns: "B − A", a_step_ns: "A per step", b_step_ns: "B per step",
  delta_step_ns: "B − A per step", cause: "Cause", source: "Source", a_last: "A last", b_last: "B last",
  seq: "#", group: "Process group", ranks: "Ranks", comm_latency_ns: "Transfer (min over ranks)", dur_ns: "Duration",
  start_skew_ns: "Start skew", end_skew_ns: "End skew", max_wait_ns: "Longest wait", last_rank: "Last rank",
  saving_ns: "Saved per step if read every few steps (replayed)", steps: "Steps", frame: "Frame",
  self_ns: "Self", total_frac: "Share of host time", per_step_ns: "Per step",
};
// the compare page's per-rank columns: a_<col>, b_<col>, delta_<col> -> "A step", "B step", "B − A step"
for (const [col, label] of [["step_time_ns", "step"], ["wait_ns", "wait"], ["comm_ns", "comm"],
  ["compute_ns", "compute"], ["data_ns", "data"]]) {
  COL_LABELS["a_" + col] = "A " + label; COL_LABELS["b_" + col] = "B " + label; COL_LABELS["delta_" + col] = "B − A " + label;
}
// the page's metrics_catalog (window.STREAMSCOPE.metrics_catalog); [] when the page has none
export function metricsCatalog() {
  const cat = (window.STREAMSCOPE || {}).metrics_catalog;
  return Array.isArray(cat) ? cat.filter((m) => m && m.key) : [];
}
// key -> label from the catalogue, read once
let catalogLabels = null;
function labelFor(key) {
  if (catalogLabels === null) {
    catalogLabels = {};
    for (const m of metricsCatalog()) if (m.label) catalogLabels[m.key] = m.label;
  }
  return catalogLabels[key] || COL_LABELS[key] || key;
}

export function fillTable(table, records, cols, onRow) {
  table.textContent = "";
  if (!records || !records.length) { const r = table.insertRow(); r.insertCell().textContent = "nothing to show"; return; }
  const have = cols.filter((c) => c in records[0]);
  const head = table.createTHead().insertRow();
  for (const c of have) {
    const th = SS.el("th", { "data-sort": typeof records[0][c] === "number" ? "num" : "text", "data-key": c }, labelFor(c));
    if (typeof records[0][c] === "number") th.className = "num";
    head.appendChild(th);
  }
  const body = table.createTBody();
  for (const rec of records) {
    const tr = body.insertRow();
    for (const c of have) {
      const td = tr.insertCell();
      td.textContent = fmtCell(c, rec[c]);
      if (typeof rec[c] === "number") { td.className = "num"; td.dataset.v = rec[c]; }
      else if (c === "name" || c === "source" || c === "frame") { td.className = "wrap"; td.title = rec[c] || ""; }
    }
    if (onRow) { tr.style.cursor = "pointer"; tr.addEventListener("click", () => onRow(rec)); }
  }
  SS.sortable(table);
}

// Keep the table's leading columns among `keys` (in that order, e.g. rank, step, step time) in view while the
// table scrolls sideways in its .table-scroll: each is sticky at the summed width of those before it,
// measured again whenever the table's layout changes.
export function stickyColumns(table, keys) {
  const heads = table.tHead ? [...table.tHead.rows[0].cells] : [];
  let n = 0;
  while (n < heads.length && n < keys.length && heads[n].dataset.key === keys[n]) n++;
  if (!n) return 0;
  const cellsOf = (i) => [heads[i], ...[...table.tBodies[0].rows].map((r) => r.cells[i])];
  for (let i = 0; i < n; i++) {
    for (const cell of cellsOf(i)) cell.classList.add("sticky-col", ...(i === n - 1 ? ["sticky-last"] : []));
  }
  const place = () => {
    let left = 0;
    for (let i = 0; i < n; i++) {
      for (const cell of cellsOf(i)) cell.style.left = left + "px";
      left += heads[i].getBoundingClientRect().width;
    }
  };
  place();
  new ResizeObserver(place).observe(table);
  return n;
}
