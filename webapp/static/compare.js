// Compare page: two timelines aligned on one step, sharing one zoom; the ops table and step chart.
import { SS } from "./common.js";
import { fillTable } from "./tables.js";
import { Timeline, tlLegend } from "./timeline.js";
import { attachRanks } from "./tl_ranks.js";

const COLLAPSE_ABOVE = 8;  // runs of more ranks show each rank as one summary lane (a click on its name opens it)

const P = window.STREAMSCOPE;
const sel = document.getElementById("cmp-step"), rankSel = document.getElementById("cmp-rank");
// runs of several ranks: steps are aligned on the steps of one rank (0 by default) present in both runs
const ranksOf = (side) => [...new Set(side.steps.map((s) => s.rank))];
const bothRanks = ranksOf(P.a).filter((r) => ranksOf(P.b).includes(r)).sort((x, y) => x - y);
if (bothRanks.length > 1 || ranksOf(P.a).length > 1 || ranksOf(P.b).length > 1) {
  for (const r of bothRanks) rankSel.appendChild(SS.el("option", { value: r }, "rank " + r));
  document.getElementById("cmp-rank-pick").hidden = !bothRanks.length;
}
const alignRank = () => (rankSel.value === "" ? (bothRanks.length ? bothRanks[0] : 0) : parseInt(rankSel.value, 10));
let stepsA = [], byB = {};
function fillSteps() {
  const r = alignRank(), keep = sel.value;
  stepsA = P.a.steps.filter((s) => s.rank === r);
  byB = {};
  for (const s of P.b.steps) if (s.rank === r) byB[s.step] = s;
  const common = stepsA.filter((s) => byB[s.step]);
  const choices = common.length ? common : stepsA.slice(0, 1);
  sel.replaceChildren(...choices.map((s) => SS.el("option", { value: s.step }, "step " + s.step)));
  if (choices.some((s) => String(s.step) === keep)) sel.value = keep;
  else if (choices.length > 2) sel.value = choices[Math.floor(choices.length / 2)].step;
}
fillSteps();
const runSpan = (r) => Math.max(1, r.run.end_ns - r.run.start_ns);
let tlA = null, tlB = null;

function build() {
  const n = parseInt(sel.value, 10), rank = alignRank();
  const sa = stepsA.find((s) => s.step === n), sb = byB[n];
  // offsets: each run's step start relative to its first interval; without steps, align the starts
  const offA = sa ? sa.start_ns - P.a.run.start_ns : 0, offB = sb ? sb.start_ns - P.b.run.start_ns : 0;
  const span = sa && sb ? Math.max(sa.end_ns - sa.start_ns, sb.end_ns - sb.start_ns) : Math.max(runSpan(P.a), runSpan(P.b));
  document.getElementById("lbl-a").textContent = sa ? "step " + n + ": " + SS.ns(sa.end_ns - sa.start_ns) : "";
  document.getElementById("lbl-b").textContent = sb ? "step " + n + ": " + SS.ns(sb.end_ns - sb.start_ns) : "";
  // the previous pair stops its observers, listeners, fetches and tooltips before the new pair starts
  if (tlA) tlA.destroy();
  if (tlB) tlB.destroy();
  tlA = tlB = null;
  const marks = (side) => side.steps.filter((st) => st.rank === rank)
    .map((st) => ({ rank: rank, step: st.step, s: st.start_ns - side.run.start_ns, e: st.end_ns - side.run.start_ns }));
  const opts = (side, off) => ({ api: side.api, lanes: side.lanes, span: span, offset: off, overview: false,
    steps: side.steps.length ? marks(side) : null, gpu: side.gpu_work !== false,
    pageKeys: side === P.a,  // the page's keys move A, and B follows
    onView: (a, b) => { const other = side === P.a ? tlB : tlA; if (other) other.setView(a, b, true); } });
  tlA = new Timeline(document.getElementById("timeline-a"), opts(P.a, offA));
  tlB = new Timeline(document.getElementById("timeline-b"), opts(P.b, offB));
  attachRanks(tlA, COLLAPSE_ABOVE); attachRanks(tlB, COLLAPSE_ABOVE);
  window.ssCompare = { a: tlA, b: tlB };  // test and benchmark hook
  tlA.refetch(0); tlB.refetch(0);
}
sel.addEventListener("change", build);
rankSel.addEventListener("change", () => { fillSteps(); build(); });
build();
tlLegend(document.getElementById("tl-legend"), () => [tlA, tlB]);
document.getElementById("tl-reset").onclick = () => tlA.reset();
document.getElementById("tl-in").onclick = () => tlA.zoom(0.5);
document.getElementById("tl-out").onclick = () => tlA.zoom(2);
fillTable(document.getElementById("ops-table"), P.ops, ["name", "kind", "status", "a_count", "b_count", "a_step_ns", "b_step_ns", "delta_step_ns"]);
document.querySelectorAll("#ops-table td").forEach((td) => {
  if (["added", "removed", "faster", "slower"].includes(td.textContent)) td.className = "status-" + td.textContent;
});
if (P.ranks && P.ranks.length) {
  document.getElementById("cmp-ranks-card").hidden = false;
  const cols = ["rank", "a_step_time_ns", "b_step_time_ns", "delta_step_time_ns", "a_wait_ns", "b_wait_ns",
    "delta_wait_ns", "a_data_ns", "b_data_ns", "a_compute_ns", "b_compute_ns", "a_last", "b_last"];
  fillTable(document.getElementById("ranks-table"), P.ranks, cols);
}
if (P.step_figure) SS.stepChart(P.plotly, P.step_figure);
