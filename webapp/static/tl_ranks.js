// Many ranks on the timeline: each rank collapses to one summary lane (per pixel, the share of time in
// collectives and busy outside them; the rest idle) and expands back on a click on its name. Ranks start
// collapsed when there are more than `threshold`. Data: GET <api>/ranks (webapp.analysis.rankview).
// Also `tl.goRankStep(rank, s, e)`: show that rank's lanes (expanding it) and zoom to [s, e] (run-relative ns).
import { stepWindow } from "./common.js";
import { RANK_COLORS } from "./tl_theme.js";

export function attachRanks(tl, threshold) {
  const ranks = [...new Set(tl.opts.lanes.map((l) => l.rank))].sort((a, b) => a - b);
  tl.collapsed = new Set(ranks.length > threshold ? ranks : []);
  tl.rankSummary = null;
  tl.lanes = tl.layoutLanes(tl.opts.lanes);  // laid out before this; the first fetch comes after
  tl.cssW = 0;
  tl.resize();

  const relayout = () => {
    tl.lanes = tl.layoutLanes(tl.opts.lanes);
    tl.cssW = 0;
    tl.resize();
    tl.refetch(0);
    tl.root.dispatchEvent(new CustomEvent("tl-ranks", { detail: { collapsed: [...tl.collapsed] } }));
  };
  tl.toggleRank = (r, open) => {
    const isOpen = !tl.collapsed.has(r);
    if (open === undefined ? !isOpen : open) tl.collapsed.delete(r); else tl.collapsed.add(r);
    if (isOpen !== !tl.collapsed.has(r)) relayout();
  };
  tl.setCollapsed = (rs) => { tl.collapsed = new Set(rs); relayout(); };
  tl.goRankStep = (r, s, e) => {
    if (tl.opts.rank !== undefined && tl.opts.rank !== r) return false;  // the picker shows another rank
    tl.toggleRank(r, true);
    const [lo, hi] = stepWindow(s - tl.offset, e - tl.offset);
    tl.highlight = { s: s - tl.offset, e: e - tl.offset, ids: [], rows: [], label: "rank " + r };
    tl.setView(lo, hi);
    const row = tl.lanes.find((x) => x.header && x.rank === r);
    if (row) window.scrollTo({ top: Math.max(0, tl.canvas.getBoundingClientRect().top + window.scrollY + row.y - 120) });
    return true;
  };

  const shown = () => tl.lanes.filter((r) => r.extra === "ranksum").map((r) => r.rank);
  tl.followView("/ranks", () => {
    const want = shown();
    if (!want.length) { tl.rankSummary = null; return null; }
    return "&ranks=" + want.join(",");
  }, (got) => {
    got.byRank = {};
    for (const r of got.ranks) got.byRank[r.rank] = r;
    tl.rankSummary = got;
    for (const row of tl.lanes) {
      const r = row.extra === "ranksum" && got.byRank[row.rank];
      if (r) row.label = "busy " + pct(r.busy_frac) + " · comm " + pct(r.comm_frac);
    }
    tl.draw();
    tl.root.dispatchEvent(new CustomEvent("tl-rank-summary"));
  });

  tl.rowPainters.ranksum = (t, row) => {
    const sum = t.rankSummary, r = sum && sum.byRank[row.rank];
    if (!r) return;
    const ctx = t.ctx, n = r.busy.length, px = (sum.end_ns - sum.start_ns) / n;
    const top = row.y + 2, h = row.h - 4;
    for (let i = 0; i < n; i++) {
      const x0 = t.x(t.rel(sum.start_ns + i * px)), x1 = t.x(t.rel(sum.start_ns + (i + 1) * px));
      const w = Math.max(1, x1 - x0), hc = h * r.comm[i] / 100, hb = h * r.busy[i] / 100;
      if (hc > 0) { ctx.fillStyle = RANK_COLORS.comm; ctx.fillRect(x0, top + h - hc, w, hc); }
      if (hb > 0) { ctx.fillStyle = RANK_COLORS.busy; ctx.fillRect(x0, top + h - hc - hb, w, hb); }
    }
  };

  // a click on a rank's name (left of the lanes) collapses or expands it
  tl.canvas.addEventListener("click", (e) => {
    const box = tl.canvas.getBoundingClientRect();
    const x = e.clientX - box.left, y = e.clientY - box.top;
    if (x > tl.opts.gutter) return;
    const row = tl.lanes.find((r) => (r.header || r.extra === "ranksum") && y >= r.y && y < r.y + (r.h || 18));
    if (row) tl.toggleRank(row.rank);
  });
}

function pct(f) { return Math.round(100 * f) + "%"; }
