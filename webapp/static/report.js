// An offline report (`streamscope report`): the run page or the compare page drawn from data embedded in
// the file. window.STREAMSCOPE.mode is "run" or "compare"; Plotly is unpacked from #ss-plotly.
import { SS, stepWindow } from "./common.js";
import { EmbeddedRun, EmbeddedTimeline, loadPlotly } from "./report_data.js";
import { bindFindings, bindTabs } from "./run_parts.js";
import { fillTable } from "./tables.js";
import { tlLegend } from "./timeline.js";

const P = window.STREAMSCOPE;

function stepChart(fig) {
  if (!fig) return;
  const packed = document.getElementById("ss-plotly");
  loadPlotly(packed ? packed.textContent.trim() : "")
    .then((Plotly) => Plotly.newPlot("step-chart", fig.data, fig.layout, { displaylogo: false, responsive: true }))
    .catch((e) => { document.getElementById("step-chart").textContent = "step chart unavailable: " + e.message; });
}

// "where this view comes from" under a timeline: the embedded view it draws, how fine, or that it holds every
// interval (the view of the whole run, or a tile that merges nothing)
function showSource(tl, embedded, el, focus) {
  tl.root.addEventListener("tl-drawn", () => {
    const v = embedded.lastPicked || embedded.views[0];
    el.textContent = v.focus === -4 ? "drawn from every interval of the run, embedded one by one (full detail)"
      : "drawn from the " + viewName(v, focus) + " at " + SS.ns((v.end_ns - v.start_ns) / v.width_px) + " per pixel" +
        (v.merged === false ? ": every interval in it, one by one"
          : v.focus === -1 && tl.view[1] - tl.view[0] < (v.end_ns - v.start_ns) / 20 ? ": this part of the run is embedded coarse only" : "");
  });
}

function viewName(v, focus) {
  if (v.focus === -1) return "whole-run overview";
  if (v.focus === -2) return "finding's window";
  if (v.focus === -3) return "view of " + v.label;
  return focus[v.focus].label + " (step " + focus[v.focus].step + ")";
}

function bindZoom(tl) {
  document.getElementById("tl-in").onclick = () => tl.zoom(0.5);
  document.getElementById("tl-out").onclick = () => tl.zoom(2);
}

function runPage() {
  const run = P.run, analysis = P.analysis || {};
  const span = Math.max(1, run.end_ns - run.start_ns);
  const root = document.getElementById("timeline");
  const rel = (s) => ({ rank: s.rank, step: s.step, s: s.start_ns - run.start_ns, e: s.end_ns - run.start_ns });
  const stepMarks = (analysis.steps || []).map(rel);
  const phases = (analysis.phases || []).map((p) => ({ rank: p.rank, phase: p.phase, s: p.start_ns - run.start_ns, e: p.end_ns - run.start_ns }));
  const embedded = new EmbeddedRun(P.timeline);
  const tl = new EmbeddedTimeline(root, { api: "embedded", embedded: embedded, lanes: P.lanes, span: span,
    steps: stepMarks.length ? stepMarks : null, phases: phases, pageKeys: true, gpu: P.gpu_work !== false });
  window.ssTimeline = tl;  // test hook
  tlLegend(document.getElementById("tl-legend"), () => [tl]);
  const focus = P.timeline.focus || [];
  showSource(tl, embedded, document.getElementById("tl-source"), focus);
  const goWindow = (a, b) => { tl.clearHighlight(); tl.setView(...stepWindow(a - run.start_ns, b - run.start_ns)); };
  document.querySelectorAll("[data-focus]").forEach((btn) => btn.addEventListener("click", () => {
    const i = Number(btn.dataset.focus);
    if (i < 0) { tl.clearHighlight(); tl.reset(); } else goWindow(focus[i].start_ns, focus[i].end_ns);
  }));
  bindZoom(tl);
  if (focus.length) goWindow(focus[0].start_ns, focus[0].end_ns);
  else tl.load().catch((e) => tl.showError(e.message));

  bindFindings(document.getElementById("findings"), analysis.findings || [], tl, run.start_ns);
  // a step's row in the per-step table: that rank's step (a row without a rank: the step of the first listed)
  const goRowStep = (rec) => {
    const s = (analysis.steps || []).find((x) => x.step === rec.step && x.rank === (rec.rank ?? x.rank));
    if (s) goWindow(s.start_ns, s.end_ns);
  };
  const tables = P.tables || {};
  const buildTab = bindTabs(() => tables, goRowStep, P.gpu_work !== false);
  buildTab(true);
  stepChart(P.step_figure);
}

function comparePage() {
  const sides = { a: P.a, b: P.b };
  for (const side of Object.values(sides)) side.embedded = new EmbeddedRun(side.timeline);
  const sel = document.getElementById("cmp-focus");
  const pairs = P.pairs || [];
  pairs.forEach((p, i) => sel.appendChild(SS.el("option", { value: i }, p.label)));
  let tlA = null, tlB = null;
  const runSpan = (r) => Math.max(1, r.run.end_ns - r.run.start_ns);
  function build() {
    const pair = pairs[Number(sel.value)] || { a: null, b: null };
    const fa = pair.a, fb = pair.b;
    const offA = fa ? fa.start_ns - P.a.run.start_ns : 0, offB = fb ? fb.start_ns - P.b.run.start_ns : 0;
    const span = fa && fb ? Math.max(fa.end_ns - fa.start_ns, fb.end_ns - fb.start_ns) : Math.max(runSpan(P.a), runSpan(P.b));
    document.getElementById("lbl-a").textContent = fa ? "step " + fa.step + ": " + SS.ns(fa.end_ns - fa.start_ns) : "";
    document.getElementById("lbl-b").textContent = fb ? "step " + fb.step + ": " + SS.ns(fb.end_ns - fb.start_ns) : "";
    if (tlA) tlA.destroy();
    if (tlB) tlB.destroy();
    tlA = tlB = null;
    const marks = (side) => side.steps.map((st) => ({ rank: 0, step: st.step, s: st.start_ns - side.run.start_ns, e: st.end_ns - side.run.start_ns }));
    const opts = (side, off) => ({ api: "embedded", embedded: side.embedded, lanes: side.lanes, span: span, offset: off,
      overview: false, steps: side.steps.length ? marks(side) : null, pageKeys: side === P.a, gpu: side.gpu_work !== false,
      onView: (x, y) => { const other = side === P.a ? tlB : tlA; if (other) other.setView(x, y, true); } });
    tlA = new EmbeddedTimeline(document.getElementById("timeline-a"), opts(P.a, offA));
    tlB = new EmbeddedTimeline(document.getElementById("timeline-b"), opts(P.b, offB));
    window.ssCompare = { a: tlA, b: tlB };  // test hook
    tlA.refetch(0); tlB.refetch(0);
  }
  sel.addEventListener("change", build);
  build();
  tlLegend(document.getElementById("tl-legend"), () => [tlA, tlB]);
  document.getElementById("tl-reset").onclick = () => tlA.reset();
  bindZoom({ zoom: (f) => tlA.zoom(f) });
  fillTable(document.getElementById("ops-table"), P.ops, ["name", "kind", "status", "a_count", "b_count", "a_step_ns", "b_step_ns", "delta_step_ns"]);
  document.querySelectorAll("#ops-table td").forEach((td) => {
    if (["added", "removed", "faster", "slower"].includes(td.textContent)) td.className = "status-" + td.textContent;
  });
  stepChart(P.step_figure);
}

try {
  if (P.mode === "compare") comparePage(); else runPage();
} catch (e) {
  const box = document.getElementById("report-error");
  box.hidden = false; box.textContent = "This report could not draw: " + e.message;
  throw e;
}
