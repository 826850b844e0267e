// Run page: the timeline, findings that zoom it (findings and the what-if box come rendered by the server),
// and the tables fetched after first paint.
import { SS, stepWindow } from "./common.js";
import { loadPlotly, rankGrid } from "./rank_grid.js";
import { bindFindings, bindTabs } from "./run_parts.js";
import { Timeline, tlLegend } from "./timeline.js";
import { attachHandoff } from "./tl_handoff.js";
import { attachDetails, attachHelp, attachRangeStats } from "./tl_panels.js";
import { attachRanks } from "./tl_ranks.js";
import { attachSearch } from "./tl_search.js";
import { attachCriticalPath } from "./tl_critical.js";
import { SVG_MAX_BOXES, attachShare, boxesInView, readViewHash, savePng, saveSvg } from "./tl_share.js";

const P = window.STREAMSCOPE;
const run = P.run, analysis = P.analysis || {};
const span = Math.max(1, run.end_ns - run.start_ns);
const root = document.getElementById("timeline");
const stepMarks = ((analysis.steps) || []).map((s) => ({ rank: s.rank, step: s.step, s: s.start_ns - run.start_ns, e: s.end_ns - run.start_ns }));
const phases = ((analysis.phases) || []).map((p) => ({ rank: p.rank, phase: p.phase, s: p.start_ns - run.start_ns, e: p.end_ns - run.start_ns }));
const linked = readViewHash(location.hash);  // a shared view: its rank picks the lanes
const rank = P.lanes.some((l) => l.rank === linked.rank) ? linked.rank : undefined;
const lanes = rank === undefined ? P.lanes : P.lanes.filter((l) => l.rank === rank);
const laneH = Number(localStorage.getItem("streamscope.laneH")) || 34;
const gpu = P.gpu_work !== false;  // a run without GPU work: no queue tracks, no GPU figures
const STEPS_VIEW_BELOW = 0.5;  // the first view shows the steps when they take less than this share of the run
const tl = new Timeline(root, { api: P.api, lanes: lanes, span: span, steps: stepMarks.length ? stepMarks : null,
  phases: phases, queue: true, gpu: gpu, laneH: laneH, rank: rank, pageKeys: true });
window.ssTimeline = tl;  // test and benchmark hook
// ranks fold to one summary lane each above COLLAPSE_ABOVE ranks; ?ranks=collapsed|expanded overrides
const COLLAPSE_ABOVE = 8;
const foldArg = new URLSearchParams(location.search).get("ranks");
attachRanks(tl, foldArg === "collapsed" ? 0 : foldArg === "expanded" ? Infinity : COLLAPSE_ABOVE);
tlLegend(document.getElementById("tl-legend"), () => [tl]);
attachHandoff(tl);
attachDetails(tl, document.getElementById("tl-details"));
attachRangeStats(tl, document.getElementById("tl-range"), gpu);
attachHelp(tl, document.getElementById("tl-help"), document.getElementById("tl-keys"));
attachSearch(tl, document.getElementById("tl-search"));
attachCriticalPath(tl, document.getElementById("tl-critical"), document.getElementById("tl-critical-legend"));
const shared = attachShare(tl, (state) => { if (state.q) tl.setSearch(state.q, state.rx); });
// a run whose set-up and tail outlast its steps (loading a model, compiling) opens on its steps; Reset shows
// the whole run
if (shared.start === undefined && stepMarks.length) {
  const lo = stepMarks.reduce((m, s) => Math.min(m, s.s), Infinity), hi = stepMarks.reduce((m, s) => Math.max(m, s.e), -Infinity);
  if (hi - lo < STEPS_VIEW_BELOW * span) tl.setView(...stepWindow(lo, hi), true);
}
tl.load().catch((e) => tl.showError(e.message));

// rank picker (runs of several ranks): the lanes of one rank or of all; kept in the URL with the view
const ranks = [...new Set(P.lanes.map((l) => l.rank))].sort((a, b) => a - b);
if (ranks.length > 1) {
  const pick = document.getElementById("tl-rank");
  pick.append(SS.el("option", { value: "" }, "all " + ranks.length + " ranks"));
  for (const r of ranks) pick.append(SS.el("option", { value: String(r) }, "rank " + r));
  pick.value = rank === undefined ? "" : String(rank);
  document.getElementById("tl-rank-pick").hidden = false;
  const fold = document.getElementById("tl-fold");
  const label = () => { fold.textContent = tl.collapsed.size ? "Expand ranks" : "Collapse ranks"; };
  fold.hidden = rank !== undefined;  // one rank's lanes shown: nothing to fold
  label();
  fold.onclick = () => tl.setCollapsed(tl.collapsed.size ? [] : ranks);
  root.addEventListener("tl-ranks", label);
  pick.addEventListener("change", () => {
    const r = pick.value === "" ? undefined : Number(pick.value);
    tl.setLanes(r === undefined ? P.lanes : P.lanes.filter((l) => l.rank === r), r);
    fold.hidden = r !== undefined;
    if (tl.search && tl.search.q) tl.setSearch(tl.search.q, tl.search.regex);  // count the matches of these lanes
    tl.writeViewHash();
  });
}

const laneInput = document.getElementById("tl-lane-h");
laneInput.value = String(laneH);
laneInput.addEventListener("input", () => {
  tl.setLaneHeight(Number(laneInput.value));
  localStorage.setItem("streamscope.laneH", laneInput.value);
});
const fileName = (run.name || "timeline").replace(/[^\w.-]+/g, "_").slice(0, 80) + "-timeline";
document.getElementById("tl-png").onclick = () => savePng(tl, fileName);
const svgButton = document.getElementById("tl-svg");
svgButton.onclick = () => saveSvg(tl, fileName);
root.addEventListener("tl-drawn", () => {
  const n = boxesInView(tl);
  svgButton.disabled = n > SVG_MAX_BOXES;
  svgButton.title = svgButton.disabled ? "SVG needs a view of at most " + SVG_MAX_BOXES + " boxes: zoom in" : "Save the view as SVG";
});

// "Go to step" counts the steps of the rank the picker shows, else of the first rank that has steps; that
// rank's lanes open if it was folded to its summary lane
const allSteps = analysis.steps || [];
const stepRanks = [...new Set(allSteps.map((s) => s.rank))].sort((a, b) => a - b);
const stepRank = () => (tl.opts.rank !== undefined ? tl.opts.rank : stepRanks[0]);
const stepsOf = (r) => allSteps.filter((s) => s.rank === r || s.rank === undefined).sort((a, b) => a.step - b.step);
const goStep = (n) => {
  const r = stepRank(), s = stepsOf(r).find((x) => x.step === n);
  if (!s) return;
  if (tl.collapsed && tl.collapsed.has(r)) tl.toggleRank(r, true);
  tl.clearHighlight();
  tl.setView(...stepWindow(s.start_ns - run.start_ns, s.end_ns - run.start_ns));
};
document.getElementById("tl-reset").onclick = () => { tl.clearHighlight(); tl.reset(); };
document.getElementById("tl-in").onclick = () => tl.zoom(0.5);
document.getElementById("tl-out").onclick = () => tl.zoom(2);
const stepInput = document.getElementById("tl-step");
// the step box's bounds and first value: the steps of the rank "Go to step" counts
const boundStepInput = () => {
  const steps = stepsOf(stepRank());
  if (!steps.length) return;
  stepInput.min = steps[0].step; stepInput.max = steps[steps.length - 1].step;
  const n = parseInt(stepInput.value, 10);
  if (!steps.some((s) => s.step === n)) stepInput.value = steps[0].step;
};
boundStepInput();
document.getElementById("tl-rank").addEventListener("change", boundStepInput);
document.getElementById("tl-go").onclick = () => goStep(parseInt(stepInput.value, 10));
stepInput.addEventListener("keydown", (e) => { if (e.key === "Enter") goStep(parseInt(stepInput.value, 10)); });

// a rank's step (run-relative ns): the lanes of every rank if the picker shows another one, that rank expanded
const showRankStep = (r, s, e) => {
  const pick = document.getElementById("tl-rank");
  if (tl.opts.rank !== undefined && tl.opts.rank !== r) { pick.value = ""; pick.dispatchEvent(new Event("change")); }
  tl.goRankStep(r, s, e);
};
// a step's row in the per-step table: that rank's step, shown as a click on its heatmap cell shows it
const goRowStep = (rec) => {
  const r = rec.rank ?? stepRank(), s = stepsOf(r).find((x) => x.step === rec.step);
  if (s) showRankStep(r, s.start_ns - run.start_ns, s.end_ns - run.start_ns);
};

bindFindings(document.getElementById("findings"), analysis.findings || [], tl, run.start_ns);

// tables and the step chart: fetched after the timeline's first paint; tables built when their tab opens
let full = null;
const buildTab = bindTabs(() => full, goRowStep, gpu);
root.addEventListener("tl-firstpaint", async () => {
  try { full = await SS.json(P.analysis_url); } catch (e) { return; }
  buildTab(false);
  document.getElementById("tab-colls-button").hidden = !((full.ranks || {}).collectives || []).length;
  const figs = full.rank_figures || {}, grid = (full.ranks || {}).grid;
  if (!full.step_figure && !figs.step_time_ns) return;
  const Plotly = await loadPlotly(P.plotly);
  if (full.step_figure) Plotly.newPlot("step-chart", full.step_figure.data, full.step_figure.layout, { displaylogo: false, responsive: true });
  if (figs.step_time_ns && grid) {
    document.getElementById("rank-grid").hidden = false;
    rankGrid(Plotly, document.getElementById("rank-heatmap"), document.getElementById("rank-grid-metric"), figs, grid,
      (r, step, s, e) => showRankStep(r, s - run.start_ns, e - run.start_ns));
  }
}, { once: true });
