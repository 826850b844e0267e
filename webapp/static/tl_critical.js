// The critical path on the timeline: GET <api>/critical for the view; each stretch of the path (a run of
// GPU ops on a stream, host work between waits, a launch, a wake-up) is drawn as a band along the bottom of
// its lane, coloured by what the step waited on.
import { SS } from "./common.js";

// Saturated and dark hues that no interval kind uses (tl_theme.js TL_COLORS), so a band reads apart from the
// box above it; a white line parts the two.
export const PATH_COLORS = {
  host: "#ff0090", launch: "#aeea00", compute: "#0d1b5e", copy: "#d500f9", comm: "#004d40", sync: "#4e0a2a",
  other: "#2962ff",
};

export function attachCriticalPath(tl, toggle, legend) {
  const state = { on: false, stretches: [], seq: 0 };
  const refresh = async () => {
    if (!state.on) { state.stretches = []; tl.draw(); return; }
    const seq = ++state.seq;
    const a = Math.max(0, Math.floor(tl.view[0] + tl.offset)), b = Math.max(a + 1, Math.ceil(tl.view[1] + tl.offset));
    const rank = tl.opts.rank !== undefined ? "&rank=" + tl.opts.rank : "";
    try {
      const r = await tl.fetchJson(tl.opts.api + "/critical?start_ns=" + a + "&end_ns=" + b + rank);
      if (seq !== state.seq) return;
      state.stretches = r.stretches;
      tl.draw();
    } catch (e) { /* the timeline shows load errors itself */ }
  };
  const show = () => { legend.style.display = state.on ? "" : "none"; };  // the legend's CSS display beats [hidden]
  show();
  toggle.addEventListener("change", () => { state.on = toggle.checked; show(); refresh(); });
  tl.root.addEventListener("tl-view", () => { clearTimeout(state.timer); state.timer = setTimeout(refresh, 150); });
  for (const [part, color] of Object.entries(PATH_COLORS)) {
    const item = SS.el("span"), sw = SS.el("i", { class: "band" });
    sw.style.background = color;
    item.append(sw, document.createTextNode("critical path: " + part));
    legend.append(item);
  }
  tl.layers.push((t) => {
    const ctx = t.ctx;
    for (const m of state.stretches) {
      const row = t.rowByLane[m.lane];
      if (!row) continue;
      const a = t.x(t.rel(m.s)), b = t.x(t.rel(m.s + m.d));
      ctx.fillStyle = "#fff";
      ctx.fillRect(a, row.y + row.h - 5, Math.max(1, b - a), 1);
      ctx.fillStyle = PATH_COLORS[m.part] || PATH_COLORS.other;
      ctx.fillRect(a, row.y + row.h - 4, Math.max(1, b - a), 4);
    }
  });
  tl.criticalPath = state;
}
