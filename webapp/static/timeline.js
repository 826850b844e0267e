// Gantt timeline on a <canvas>: lanes grouped by rank, boxes coloured by kind, merged "busy" boxes from
// the server's level-of-detail engine, step boundaries, exposed-copy shading, hover, zoom and pan.
// Times are ns relative to the run's first interval; `offset` shifts a run onto a shared axis (compare).
// Extensions (queue track, links, selection, search: the tl_*.js modules) hook in through `layers`
// (drawn over the lanes), `rowPainters` (extra rows), `tipLines` (tooltip lines) and the tl-* events:
// tl-view (a new window is fetched), tl-select (click on an interval), tl-range (a dragged range).
// An ES module: exports Timeline (call destroy() before dropping one), tlLegend and TL_COLORS.
import { SS } from "./common.js";
import { Input } from "./tl_input.js";
import { RANK_COLORS, RANK_LABELS, TL_COLORS, TL_LABELS, TL_ROLE } from "./tl_theme.js";

export { TL_COLORS };

const TL_ROLE_ORDER = ["cpu_thread", "transfer_stream", "compute_stream", "comm_stream", "other_stream"];
const STACK_LANE = ": Python stack";  // "<thread's label>: Python stack (...)": the thread's Python stacks

// Each Python-stack lane moved right under the lane of its thread (same rank, label before STACK_LANE).
function underOwners(sorted) {
  const stacks = sorted.filter((l) => l.label.includes(STACK_LANE));
  const out = sorted.filter((l) => !l.label.includes(STACK_LANE));
  for (const s of stacks) {
    const owner = s.label.slice(0, s.label.indexOf(STACK_LANE));
    const at = out.findIndex((l) => l.rank === s.rank && l.label === owner);
    const lastOfRank = out.map((l) => l.rank).lastIndexOf(s.rank);
    out.splice(at >= 0 ? at + 1 : lastOfRank + 1, 0, s);
  }
  return out;
}

// The text on a box: a sampled Python stack ("outer;...;inner") shows its innermost frame, where the time went.
export function boxLabel(kind, name) {
  return kind === "sample" ? name.slice(name.lastIndexOf(";") + 1) : name;
}

export class Timeline {
  constructor(root, opts) {
    this.root = root;
    // opts.gpu false: a run without GPU work, whose comm lanes are host threads (gloo) and have no queue
    this.opts = Object.assign({ offset: 0, gutter: 200, laneH: 30, onView: null, overview: true, queue: false, gpu: true }, opts);
    this.layers = [];      // fn(tl) drawn over the lanes, inside the plot clip
    this.rowPainters = {};  // row.extra -> fn(tl, row): draws an extra row (e.g. "queue")
    this.tipLines = [];    // fn(tl, hit) -> [lines] added to a single interval's tooltip
    this.hovered = null;   // the single interval under the mouse: {lane, i, id, s, d, kind, name}
    this.selected = null;  // the clicked interval (same shape)
    this.range = null;     // the selected range [s, e], ns relative to the run
    this.offset = this.opts.offset;
    this.span = Math.max(1, this.opts.span);         // length of the shared axis, ns
    this.view = [0, this.span];
    this.data = null;
    this.highlight = null;
    this.seq = 0;
    this.stats = { firstPaintMs: null, fetches: 0, lastFetchMs: null, lastRedrawMs: null };
    this.destroyed = false;
    this.aborter = new AbortController();  // aborts every fetch in flight on destroy()
    this.winListeners = [];  // [type, handler] added to window, removed on destroy()
    this.lanes = this.layoutLanes(this.opts.lanes);
    this.canvas = document.createElement("canvas");
    this.tip = document.createElement("div");
    this.tip.className = "tooltip"; this.tip.hidden = true;
    root.append(this.canvas);
    document.body.append(this.tip);
    root.tabIndex = 0;
    this.bind();
    this.resize();
    this.observer = new ResizeObserver(() => { if (this.resize()) this.refetch(0); });
    this.observer.observe(root);
  }

  // Stop everything this timeline started: observer, window and root listeners, timers, fetches, tooltip.
  destroy() {
    if (this.destroyed) return;
    this.destroyed = true;
    this.seq += 1;  // any answer still arriving is stale
    this.observer.disconnect();
    for (const [type, fn] of this.winListeners) window.removeEventListener(type, fn);
    this.winListeners = [];
    this.keyTarget.removeEventListener("keydown", this.onKey);
    clearTimeout(this.timer); clearTimeout(this.slowTimer);
    this.aborter.abort();
    this.tip.remove();
    this.canvas.remove();
    this.ctx = null;
  }

  fetchJson(url) { return SS.json(url, { signal: this.aborter.signal }); }

  clearHighlight() { this.highlight = null; this.draw(); }

  // Rows from lanes: per rank (a header row, or one summary row when the rank is folded), its lanes in role
  // order, each stream's queue track under it (lanes with queue === false have none). Lanes of one `group`
  // (a backend's pool of side streams) come last in their rank, drawn on one row until the group is opened
  // (`openGroups`, keys "rank:group"): their rows share that row's y, marked `stacked`.
  layoutLanes(lanes) {
    const sorted = underOwners(lanes.slice().sort((a, b) => (a.rank - b.rank) ||
      (a.group || "").localeCompare(b.group || "") ||
      (TL_ROLE_ORDER.indexOf(a.kind) - TL_ROLE_ORDER.indexOf(b.kind)) || (a.ident - b.ident)));
    const multiRank = new Set(sorted.map((l) => l.rank)).size > 1;
    const folded = multiRank ? this.collapsed : null;  // ranks shown as one summary lane (tl_ranks.js)
    this.openGroups = this.openGroups || new Set();
    const size = {};  // lanes per group: a group of one is not folded
    for (const l of sorted) if (l.group) size[l.rank + ":" + l.group] = (size[l.rank + ":" + l.group] || 0) + 1;
    let y = 40;
    const rows = [];
    let lastRank = null, group = null;
    for (const l of sorted) {
      if (multiRank && l.rank !== lastRank) {
        if (folded && folded.has(l.rank)) {
          rows.push({ extra: "ranksum", rank: l.rank, label: "", y: y, h: 24 }); y += 26;
        } else { rows.push({ header: true, rank: l.rank, y: y }); y += 18; }
      }
      lastRank = l.rank;
      if (folded && folded.has(l.rank)) continue;
      const key = l.group && size[l.rank + ":" + l.group] > 1 ? l.rank + ":" + l.group : null;
      if (key && (!group || group.key !== key)) {
        const open = this.openGroups.has(key);
        group = { extra: "group", key: key, rank: l.rank, group: l.group, open: open, count: 0, y: y, h: open ? 18 : this.opts.laneH };
        rows.push(group);
        y += group.h + 2;
      }
      if (!key) group = null;
      if (group) group.count += 1;
      if (group && !group.open) { rows.push(Object.assign({}, l, { y: group.y, h: group.h, stacked: true })); continue; }
      rows.push(Object.assign({}, l, { y: y, h: this.opts.laneH }));
      y += this.opts.laneH + 2;
      if (this.opts.queue && this.opts.gpu && l.kind !== "cpu_thread" && l.queue !== false) {  // right under it
        rows.push({ extra: "queue", index: l.index, rank: l.rank, kind: l.kind, label: "queue · host lead", y: y, h: 26 });
        y += 28;
      }
    }
    this.height = y + 6;
    this.rowByLane = {};
    for (const r of rows) if (!r.header && !r.extra) this.rowByLane[r.index] = r;
    return rows;
  }

  // Open a folded group of lanes (key "rank:group") or fold it again.
  toggleGroup(key) {
    if (this.openGroups.has(key)) this.openGroups.delete(key); else this.openGroups.add(key);
    this.lanes = this.layoutLanes(this.opts.lanes);
    this.cssW = 0;
    this.resize();
    this.refetch(0);
  }

  // Lane height in CSS px (the page's slider): lay the lanes out again and redraw.
  setLaneHeight(h) {
    this.opts.laneH = Math.max(16, Math.min(120, h));
    this.lanes = this.layoutLanes(this.opts.lanes);
    this.cssW = 0;
    this.resize();
  }

  // Show other lanes: one rank's (``rank``) or every rank's (``rank`` undefined); the run page's rank picker.
  setLanes(lanes, rank) {
    this.opts.lanes = lanes; this.opts.rank = rank;
    this.hovered = null; this.highlight = null; this.data = null;
    if (this.range) this.setRange(null);  // its stats were for the other lanes
    if (this.selected && !lanes.some((l) => l.index === this.selected.lane)) this.select(null);
    this.lanes = this.layoutLanes(lanes);
    this.cssW = 0;
    this.resize();
    this.refetch(0);
  }

  resize() {
    const w = Math.max(300, this.root.clientWidth);
    if (w === this.cssW) return false;
    const dpr = window.devicePixelRatio || 1;
    this.cssW = w;
    this.canvas.width = Math.round(w * dpr); this.canvas.height = Math.round(this.height * dpr);
    this.canvas.style.height = this.height + "px";
    this.ctx = this.canvas.getContext("2d");
    this.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    this.draw();
    return true;
  }

  get plotW() { return this.cssW - this.opts.gutter - 8; }
  x(t) { return this.opts.gutter + (t - this.view[0]) / (this.view[1] - this.view[0]) * this.plotW; }
  t(x) { return this.view[0] + (x - this.opts.gutter) / this.plotW * (this.view[1] - this.view[0]); }

  // ---- data ---------------------------------------------------------------------------------------
  async load() {
    const t0 = performance.now();
    const full = this.opts.overview && this.offset === 0 && this.view[0] <= 0 && this.view[1] >= this.span;
    const url = full ? this.opts.api + "/overview" : this.timelineUrl();
    const data = await this.fetchJson(url);
    this.accept(data, ++this.seq, t0);
  }

  timelineUrl() {
    return this.opts.api + "/timeline" + this.windowQuery() +
      (this.opts.rank !== undefined ? "&rank=" + this.opts.rank : "") + this.ranksParam();
  }

  // "?start_ns=&end_ns=&width_px=" of the view (run-absolute ns): the window every view-following API takes
  windowQuery() {
    const a = Math.max(0, Math.floor(this.view[0] + this.offset));
    const b = Math.max(a + 1, Math.ceil(this.view[1] + this.offset));
    return "?start_ns=" + a + "&end_ns=" + b + "&width_px=" + Math.max(1, Math.round(this.plotW));
  }

  // Fetch <api><path><window><extra()> each time the view settles (after the view's own debounce) and on
  // first paint; extra() gives more query text, or null for no fetch now; got(json) receives the answer to
  // the latest request only. A failed fetch leaves the lanes drawing (what it feeds stays empty).
  followView(path, extra, got) {
    let timer = null, seq = 0;
    const run = (delay) => {
      clearTimeout(timer);
      const more = extra(), my = ++seq;
      if (more === null) return;
      const url = this.opts.api + path + this.windowQuery() + more;
      timer = setTimeout(async () => {
        try {
          const json = await this.fetchJson(url);
          if (my === seq && !this.destroyed) got(json);
        } catch (e) { /* see above */ }
      }, delay);
    };
    this.root.addEventListener("tl-view", (e) => run(e.detail.delay));
    this.root.addEventListener("tl-firstpaint", () => run(0), { once: true });
  }

  // "&ranks=..." naming the expanded ranks when some are collapsed to a summary lane, else ""
  ranksParam() {
    if (!this.collapsed || !this.collapsed.size || this.opts.rank !== undefined) return "";
    const open = [...new Set(this.opts.lanes.map((l) => l.rank))].filter((r) => !this.collapsed.has(r));
    return "&ranks=" + (open.length ? open.join(",") : "none");
  }

  accept(data, seq, t0) {
    if (seq !== this.seq || this.destroyed) return;
    clearTimeout(this.slowTimer);
    this.pending = false;
    this.data = data;
    this.draw();
    const ms = performance.now() - t0;
    this.stats.fetches += 1; this.stats.lastFetchMs = ms;
    if (this.stats.firstPaintMs === null) {
      this.stats.firstPaintMs = performance.now();
      this.root.dispatchEvent(new CustomEvent("tl-firstpaint"));
    }
    this.stats.lastRedrawMs = ms;
    this.root.dataset.seq = String(this.stats.fetches);
    this.root.dispatchEvent(new CustomEvent("tl-drawn"));
  }

  refetch(delay) {
    if (this.destroyed) return;
    clearTimeout(this.timer);
    const seq = ++this.seq;
    const t0 = performance.now();
    clearTimeout(this.slowTimer);
    // a run that is not in the server's memory yet takes seconds to load: say so
    this.slowTimer = setTimeout(() => { if (seq === this.seq) { this.pending = true; this.draw(); } }, delay + 400);
    this.root.dispatchEvent(new CustomEvent("tl-view", { detail: { delay: delay } }));
    this.timer = setTimeout(async () => {
      try { this.accept(await this.fetchJson(this.timelineUrl()), seq, t0); }
      catch (e) { if (seq === this.seq) { clearTimeout(this.slowTimer); this.pending = false; this.draw(); this.showError(e.message); } }
    }, delay);
  }

  setView(a, b, quiet) {
    const minSpan = 1000;
    let span = Math.max(minSpan, b - a);
    const maxSpan = this.span * 1.05;
    if (span > maxSpan) span = maxSpan;
    let lo = a, hi = a + span;
    const padLo = -this.span * 0.025, padHi = this.span * 1.025;
    if (lo < padLo) { lo = padLo; hi = lo + span; }
    if (hi > padHi) { hi = padHi; lo = hi - span; }
    this.view = [lo, hi];
    this.draw();
    this.refetch(90);
    if (!quiet && this.opts.onView) this.opts.onView(lo, hi);
  }

  reset() { this.setView(0, this.span); }
  zoom(factor, atX) {
    const tc = atX === undefined ? (this.view[0] + this.view[1]) / 2 : this.t(atX);
    this.setView(tc - (tc - this.view[0]) * factor, tc + (this.view[1] - tc) * factor);
  }
  pan(frac) { const d = (this.view[1] - this.view[0]) * frac; this.setView(this.view[0] + d, this.view[1] + d); }

  // Zoom to [a, b] (ns relative to the run) with a margin, and outline it and the given intervals.
  focus(a, b, ids, label) {
    const pad = Math.max((b - a) * 0.15, 2000);
    this.highlight = { s: a - this.offset, e: b - this.offset, ids: ids || [], rows: [], label: label || "" };
    this.setView(a - this.offset - pad, b - this.offset + pad);
    if (ids && ids.length) {
      this.fetchJson(this.opts.api + "/intervals?ids=" + ids.slice(0, 200).join(",")).then((r) => {
        if (this.highlight) { this.highlight.rows = r.intervals; this.draw(); }
      }).catch(() => {});
    }
  }

  showError(msg) {
    const ctx = this.ctx;
    if (!ctx || this.destroyed) return;
    ctx.fillStyle = "#c62828"; ctx.font = "13px system-ui";
    ctx.fillText("could not load the timeline: " + msg, this.opts.gutter + 10, 20);
  }

  // ---- drawing ------------------------------------------------------------------------------------
  draw() {
    const ctx = this.ctx;
    if (!ctx) return;
    const W = this.cssW, G = this.opts.gutter;
    ctx.clearRect(0, 0, W, this.height);
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, W, this.height);
    this.drawAxis();
    for (const row of this.lanes) {
      if (row.header) {
        ctx.fillStyle = "#1d2330"; ctx.font = "600 12px system-ui";
        ctx.fillText("rank " + row.rank, 8, row.y + 13);
        ctx.fillStyle = "#e2e5ec"; ctx.fillRect(G, row.y + 9, W - G - 8, 1);
        continue;
      }
      if (row.extra === "group" && row.open) continue;
      if (row.extra) { ctx.fillStyle = "#fbfcfe"; ctx.fillRect(G, row.y, W - G - 8, row.h); continue; }
      if (row.stacked) continue;  // its group's row is its background
      ctx.fillStyle = row.kind === "cpu_thread" ? "#fafafa" : "#f4f6fa";
      ctx.fillRect(G, row.y, W - G - 8, row.h);
    }
    ctx.save();
    ctx.beginPath(); ctx.rect(G, 24, W - G - 8, this.height - 24); ctx.clip();
    if (this.data) {
      this.drawExposed();
      this.drawSteps();
      for (const lane of this.data.lanes) this.drawLane(lane);
      for (const row of this.lanes) if (row.extra && this.rowPainters[row.extra]) this.rowPainters[row.extra](this, row);
    } else {
      ctx.fillStyle = "#6b7385"; ctx.font = "13px system-ui"; ctx.fillText("loading…", G + 10, 50);
    }
    this.drawHighlight();
    if (this.data) for (const layer of this.layers) layer(this);
    ctx.restore();
    this.drawLabels();
    if (this.pending) {
      const msg = "loading this view… (a large run is read into memory on first use)";
      ctx.font = "12px system-ui";
      const w = ctx.measureText(msg).width + 16;
      ctx.fillStyle = "rgba(29, 35, 48, 0.85)"; ctx.fillRect(W - w - 12, 26, w, 22);
      ctx.fillStyle = "#fff"; ctx.fillText(msg, W - w - 4, 41);
    }
    // the boxes under a still mouse change with every zoom and every new slice: refresh the tooltip
    if (this.lastMouse) this.hover(this.lastMouse);
  }

  drawAxis() {
    const ctx = this.ctx, G = this.opts.gutter;
    const span = this.view[1] - this.view[0];
    const target = span / Math.max(2, this.plotW / 110);
    const p = Math.pow(10, Math.floor(Math.log10(target)));
    const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= target) || p * 10;
    ctx.fillStyle = "#6b7385"; ctx.font = "11px system-ui"; ctx.strokeStyle = "#eef0f4"; ctx.lineWidth = 1;
    for (let t = Math.ceil(this.view[0] / step) * step; t <= this.view[1]; t += step) {
      const x = Math.round(this.x(t)) + 0.5;
      ctx.beginPath(); ctx.moveTo(x, 20); ctx.lineTo(x, this.height); ctx.stroke();
      ctx.fillText(tlTick(t, step), x + 3, 13);
    }
    ctx.fillStyle = "#e2e5ec"; ctx.fillRect(G, 22, this.cssW - G - 8, 1);
  }

  rel(t) { return t - this.offset; }  // run-relative ns -> shared axis

  drawExposed() {
    const ctx = this.ctx;
    ctx.fillStyle = "rgba(228, 87, 86, 0.16)";
    for (const ex of this.data.exposed) {
      const rows = this.lanes.filter((r) => !r.header && r.extra !== "ranksum" && r.rank === ex.rank && r.kind !== "cpu_thread");
      if (!rows.length) continue;
      const y0 = Math.min(...rows.map((r) => r.y)), y1 = Math.max(...rows.map((r) => r.y + r.h));
      for (let i = 0; i < ex.s.length; i++) {
        const x0 = this.x(this.rel(ex.s[i])), x1 = this.x(this.rel(ex.s[i] + ex.d[i]));
        ctx.fillRect(x0, y0, Math.max(1.5, x1 - x0), y1 - y0);
      }
    }
  }

  // step windows: the analysis' (opts.steps, GPU-aligned) when given, else the trace's step markers
  stepsInView() {
    const all = this.opts.steps || this.data.steps;
    const a = this.view[0] + this.offset, b = this.view[1] + this.offset;
    const out = all.filter((st) => st.e > a && st.s < b);
    if (out.length <= 400) return out;
    const stride = Math.ceil(out.length / 400);
    return out.filter((_, i) => i % stride === 0);
  }

  // set-up (before the first step) and tail (after the last): shaded, labelled, one-time work
  drawPhases() {
    const ctx = this.ctx, G = this.opts.gutter, right = this.cssW - 8;
    ctx.font = "10px system-ui";
    for (const p of this.opts.phases || []) {
      const x0 = Math.max(G, this.x(this.rel(p.s))), x1 = Math.min(right, this.x(this.rel(p.e)));
      if (x1 <= x0) continue;
      ctx.fillStyle = "rgba(120, 120, 140, 0.10)";
      ctx.fillRect(x0, 22, x1 - x0, this.height - 22);
      if (x1 - x0 > 40) { ctx.fillStyle = "#5a6070"; ctx.fillText(p.phase === "setup" ? "set-up" : "tail", x0 + 3, 34); }  // the step labels' row
    }
  }

  // The rows of each rank, top and bottom (css px), when the lanes are grouped by rank; null for one rank.
  rankBands() {
    const bands = {};
    for (const row of this.lanes) {
      if (row.rank === undefined) continue;
      const b = bands[row.rank] || (bands[row.rank] = [row.y, row.y]);
      b[0] = Math.min(b[0], row.y); b[1] = Math.max(b[1], row.y + (row.h || 18));
    }
    return Object.keys(bands).length > 1 ? bands : null;
  }

  // Step boundaries, dashed. With several ranks each rank's steps are drawn over its own rows only, labelled
  // in its header row, so whose step line is whose is plain.
  drawSteps() {
    this.drawPhases();
    const ctx = this.ctx;
    ctx.strokeStyle = "rgba(29, 35, 48, 0.35)"; ctx.setLineDash([3, 3]); ctx.lineWidth = 1;
    ctx.fillStyle = "#1d2330"; ctx.font = "10px system-ui";
    const bands = this.rankBands();
    const shown = bands ? undefined : (this.lanes.find((r) => r.rank !== undefined) || {}).rank;  // one rank's lanes
    const lastLabel = {};
    const seen = new Set();
    for (const st of this.stepsInView()) {
      const band = bands ? bands[st.rank] : [22, this.height];
      if (!band || (!bands && shown !== undefined && st.rank !== undefined && st.rank !== shown)) continue;
      for (const t of [st.s, st.e]) {
        const x = Math.round(this.x(this.rel(t))) + 0.5;
        if (seen.has(x + ":" + st.rank)) continue;
        seen.add(x + ":" + st.rank);
        ctx.beginPath(); ctx.moveTo(x, band[0]); ctx.lineTo(x, band[1]); ctx.stroke();
      }
      const xs = this.x(this.rel(st.s)), key = bands ? st.rank : 0;
      if (xs - (lastLabel[key] ?? -1e9) > 48 && xs > this.opts.gutter - 20) {
        ctx.fillText(bands ? "r" + st.rank + " step " + st.step : "step " + st.step, xs + 3, bands ? band[0] + 8 : 34);
        lastLabel[key] = xs;
      }
    }
    ctx.setLineDash([]);
  }

  drawLane(lane) {
    const row = this.rowByLane[lane.lane];
    if (!row) return;
    const ctx = this.ctx, d = this.data, kinds = d.kinds;
    const G = this.opts.gutter, right = this.cssW - 8;
    const y = row.y, h = row.h;
    // merged busy boxes: colour of their main kind, opacity = busy fraction
    for (let i = 0; i < lane.bs.length; i++) {
      const x0 = this.x(this.rel(lane.bs[i])), x1 = this.x(this.rel(lane.bs[i] + lane.bd[i]));
      if (x1 < G || x0 > right) continue;
      const frac = lane.bd[i] > 0 ? lane.bb[i] / lane.bd[i] : 1;
      ctx.globalAlpha = 0.3 + 0.7 * Math.min(1, frac);
      ctx.fillStyle = TL_COLORS[kinds[lane.bk[i]]] || "#888";
      ctx.fillRect(x0, y + 5, Math.max(1, x1 - x0), h - 10);
    }
    ctx.globalAlpha = 1;
    ctx.font = "11px system-ui";
    for (let i = 0; i < lane.s.length; i++) {
      const kind = kinds[lane.k[i]];
      const x0 = this.x(this.rel(lane.s[i])), x1 = this.x(this.rel(lane.s[i] + lane.d[i]));
      if (x1 < G || x0 > right) continue;
      const w = Math.max(1, x1 - x0);
      const tall = kind === "sync_wait";
      ctx.fillStyle = TL_COLORS[kind] || "#888";
      ctx.fillRect(x0, tall ? y + 1 : y + 4, w, tall ? h - 2 : h - 8);
      if (w > 50) {
        const a = Math.max(x0, G) + 3, room = Math.min(x1, right) - a - 3;
        if (room > 30) {
          ctx.fillStyle = "#fff";
          ctx.fillText(this.fit(boxLabel(kind, d.names[lane.n[i]]), room), a, y + h / 2 + 4);
        }
      }
    }
  }

  fit(text, room) {
    const ctx = this.ctx;
    if (ctx.measureText(text).width <= room) return text;
    let lo = 0, hi = text.length;
    while (lo < hi) { const m = (lo + hi + 1) >> 1; if (ctx.measureText(text.slice(0, m) + "…").width <= room) lo = m; else hi = m - 1; }
    return text.slice(0, lo) + "…";
  }

  drawSelection() {
    const ctx = this.ctx;
    if (this.range) {
      const x0 = this.x(this.rel(this.range[0])), x1 = this.x(this.rel(this.range[1]));
      ctx.fillStyle = "rgba(255, 196, 0, 0.16)"; ctx.fillRect(x0, 22, Math.max(1, x1 - x0), this.height - 22);
      ctx.fillStyle = "#c79100"; ctx.fillRect(x0 - 1, 22, 2, this.height - 22); ctx.fillRect(x1 - 1, 22, 2, this.height - 22);
    }
    for (const [hit, color] of [[this.hovered, "#5a6b8c"], [this.selected, "#111"]]) {
      const row = hit && this.rowByLane[hit.lane];
      if (!row) continue;
      const a = this.x(this.rel(hit.s)), b = this.x(this.rel(hit.s + hit.d));
      ctx.strokeStyle = color; ctx.lineWidth = 2;
      ctx.strokeRect(a - 1, row.y + 1, Math.max(3, b - a + 2), row.h - 2);
    }
    ctx.lineWidth = 1;
  }

  drawHighlight() {
    this.drawSelection();
    const hl = this.highlight;
    if (!hl) return;
    const ctx = this.ctx;
    const x0 = this.x(hl.s), x1 = this.x(hl.e);
    ctx.fillStyle = "rgba(47, 111, 237, 0.10)";
    ctx.fillRect(x0, 22, Math.max(2, x1 - x0), this.height - 22);
    ctx.strokeStyle = "#2f6fed"; ctx.lineWidth = 2;
    ctx.strokeRect(x0, 23, Math.max(2, x1 - x0), this.height - 25);
    for (const r of hl.rows) {
      const row = this.rowByLane[r.lane];
      if (!row) continue;
      const a = this.x(this.rel(r.s)), b = this.x(this.rel(r.s + r.d));
      ctx.strokeStyle = "#111"; ctx.lineWidth = 2;
      ctx.strokeRect(a - 1, row.y + 1, Math.max(3, b - a + 2), row.h - 2);
    }
    ctx.lineWidth = 1;
  }

  drawLabels() {
    const ctx = this.ctx, G = this.opts.gutter;
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 22, G - 4, this.height);
    for (const row of this.lanes) {
      if (row.header) {
        ctx.fillStyle = "#1d2330"; ctx.font = "600 12px system-ui";
        ctx.fillText((this.collapsed ? "▾ " : "") + "rank " + row.rank, 8, row.y + 13);
        continue;
      }
      if (row.extra === "ranksum") {
        ctx.fillStyle = "#1d2330"; ctx.font = "600 12px system-ui"; ctx.fillText("▸ rank " + row.rank, 8, row.y + 11);
        ctx.fillStyle = "#6b7385"; ctx.font = "10.5px system-ui";
        ctx.fillText(this.fit(row.label, G - 24), 18, row.y + 22);
        continue;
      }
      if (row.extra === "group") {
        const n = row.count + " stream" + (row.count === 1 ? "" : "s");
        ctx.fillStyle = "#1d2330"; ctx.font = "600 12px system-ui";
        ctx.fillText(this.fit((row.open ? "▾ " : "▸ ") + row.group + (row.open ? " · " + n : ""), G - 20), 10, row.y + 13);
        if (!row.open) {
          ctx.fillStyle = "#6b7385"; ctx.font = "10.5px system-ui";
          ctx.fillText(this.fit(n + " on one row · click", G - 20), 10, row.y + 26);
        }
        continue;
      }
      if (row.extra) {
        ctx.fillStyle = "#6b7385"; ctx.font = "10.5px system-ui";
        ctx.fillText(this.fit(row.label, G - 24), 18, row.y + 16);
        continue;
      }
      if (row.stacked) continue;
      ctx.fillStyle = "#1d2330"; ctx.font = "12px system-ui";
      ctx.fillText(this.fit(this.role(row), G - 20), 10, row.y + 13);
      ctx.fillStyle = "#6b7385"; ctx.font = "10.5px system-ui";
      ctx.fillText(this.fit(row.label, G - 20), 10, row.y + 26);
    }
  }

  // what a lane is, as its first label line ("CPU thread", "compute stream", ...): a comm lane whose
  // collectives a host thread ran (gloo; no queue track) is a "comm thread"
  role(row) {
    const hostRun = row.kind === "comm_stream" && (!this.opts.gpu || row.queue === false);
    return hostRun ? "comm thread" : TL_ROLE[row.kind] || row.kind;
  }

  // index of the box (sorted by start) that contains t, or -1
  indexAt(s, dur, t, slack) {
    let lo = 0, hi = s.length - 1, best = -1;
    while (lo <= hi) { const m = (lo + hi) >> 1; if (s[m] <= t + slack) { best = m; lo = m + 1; } else hi = m - 1; }
    for (let i = best; i >= 0 && i > best - 64; i--) if (s[i] + dur[i] + slack >= t && s[i] - slack <= t) return i;
    return -1;
  }
}

// an axis label for time t (ns) precise enough to tell ticks `step` ns apart
function tlTick(t, step) {
  const a = Math.max(Math.abs(t), step);
  const [unit, scale] = a >= 1e9 ? ["s", 1e9] : a >= 1e6 ? ["ms", 1e6] : a >= 1e3 ? ["µs", 1e3] : ["ns", 1];
  const digits = Math.max(0, Math.min(9, Math.ceil(-Math.log10(step / scale) - 1e-9)));
  return (t / scale).toFixed(digits) + " " + unit;
}

// What one timeline draws now: the kinds of the boxes on its shown lanes (single and merged), whether it draws
// merged boxes, exposed-copy shading and queue tracks, and the parts ("busy", "comm") of its rank summary lanes.
function drawnBy(tl) {
  const out = { kinds: new Set(), merged: false, exposed: false, queue: false, summary: new Set() };
  const d = tl && !tl.destroyed && tl.data;
  if (!d) return out;
  for (const lane of d.lanes.filter((l) => tl.rowByLane[l.lane])) {
    for (const k of lane.k) out.kinds.add(d.kinds[k]);
    for (const k of lane.bk) out.kinds.add(d.kinds[k]);
    out.merged = out.merged || lane.bs.length > 0;
  }
  const shadedRank = (rank) => Object.values(tl.rowByLane).some((r) => r.rank === rank && r.kind !== "cpu_thread");
  out.exposed = (d.exposed || []).some((x) => x.s.length > 0 && shadedRank(x.rank));
  out.queue = tl.lanes.some((r) => r.extra === "queue");
  for (const part of summaryParts(tl)) out.summary.add(part);
  return out;
}

// The parts of the rank summary lanes drawn with some height: "busy" and/or "comm" (tl_ranks.js).
function summaryParts(tl) {
  const sum = tl.rankSummary, parts = new Set();
  if (!sum) return parts;
  for (const row of tl.lanes.filter((r) => r.extra === "ranksum")) {
    const r = sum.byRank[row.rank];
    if (!r) continue;
    if (r.busy.some((v) => v > 0)) parts.add("busy");
    if (r.comm.some((v) => v > 0)) parts.add("comm");
  }
  return parts;
}

// The legend of what the timelines draw, kept in step with each draw: every kind on their shown lanes
// (single boxes and merged ones), the parts of collapsed ranks' summary lanes, then the exposed-copy
// shading, merged boxes and queue tracks where drawn.
// `timelines()` gives the page's current timelines (the compare page makes new ones for another step).
export function tlLegend(el, timelines) {
  const item = (color, text, opacity) => {
    const span = SS.el("span"), sw = SS.el("i");
    sw.style.background = color;
    if (opacity) sw.style.opacity = opacity;
    span.append(sw, document.createTextNode(text));
    return span;
  };
  const update = () => {
    const all = timelines().map(drawnBy);
    const kinds = new Set(all.flatMap((x) => [...x.kinds]));
    const summary = new Set(all.flatMap((x) => [...x.summary]));
    const items = Object.keys(TL_LABELS).filter((k) => kinds.has(k)).map((k) => item(TL_COLORS[k], TL_LABELS[k]));
    for (const k of kinds) if (!(k in TL_LABELS)) items.push(item("#888", k));
    for (const part of ["busy", "comm"]) if (summary.has(part)) items.push(item(RANK_COLORS[part], RANK_LABELS[part]));
    if (all.some((x) => x.exposed)) items.push(item("rgba(228, 87, 86, 0.3)", "copy not overlapped by compute"));
    if (all.some((x) => x.merged)) items.push(item("#4c78a8", "merged (opacity = busy %)", "0.45"));
    if (all.some((x) => x.queue)) items.push(item("#4c78a8", "queued ops (queue track)", "0.7"), item("#e45756", "host lead (queue track)", "0.7"));
    el.replaceChildren(...items);
  };
  const roots = new Set(timelines().filter(Boolean).map((tl) => tl.root));
  for (const root of roots) for (const type of ["tl-drawn", "tl-rank-summary"]) root.addEventListener(type, update);
  update();
}

Object.assign(Timeline.prototype, Input);
