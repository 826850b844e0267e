// The timeline's mouse and keyboard input, mixed into Timeline.prototype: wheel over the timeline zooms
// (shift: pans; elsewhere the page scrolls), drag pans, click selects an interval, shift+drag or a drag on the
// time axis selects a range; W/A/S/D as in Perfetto, plus + - arrows 0, f (zoom to the selection), Esc (clear
// it) and ? (list the keys). With opts.pageKeys the keys work anywhere on the page, as in Perfetto, unless a
// text field has the focus (a focused slider keeps its arrow keys); without it, only while the timeline has it.
import { SS } from "./common.js";
import { TL_LABELS } from "./tl_theme.js";

const TIP_CALLERS = 6;  // callers a sampled stack's tooltip lists under its innermost frame

export const KEYS = [
  ["W / + ", "zoom in"], ["S / −", "zoom out"], ["A / ←", "pan left"], ["D / →", "pan right"],
  ["0 / Home", "whole run"], ["F", "zoom to the selection"], ["Esc", "clear the selection"],
  ["click", "select an interval (details, links)"], ["shift+drag, or drag on the time axis", "select a range (stats)"],
  ["wheel over the timeline", "zoom (shift+wheel: pan)"], ["drag", "pan"], ["?", "show these keys"],
];
export const KEYS_NOTE = "The keys work anywhere on the page unless a text field has the focus.";

// Input types one types text into; every other input (a checkbox, a slider, a button) leaves the keys to the
// timeline. An input with no type (or an unknown one) is a text field.
const TEXT_INPUT_TYPES = new Set(["", "text", "search", "number", "email", "url", "password", "tel",
  "date", "datetime-local", "month", "time", "week"]);
const TEXT_FIELDS = "textarea, [contenteditable=''], [contenteditable='true'], [contenteditable='plaintext-only']";

// Whether a key press belongs to the text field it was typed in rather than to the page's timeline.
export function typingIn(target) {
  if (!target || !target.closest) return false;
  if (target.closest(TEXT_FIELDS)) return true;
  return target.tagName === "INPUT" && TEXT_INPUT_TYPES.has(target.type);
}

// Keys a focused slider moves itself with; the timeline leaves them to it.
const SLIDER_KEYS = new Set(["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "Home", "End", "PageUp", "PageDown"]);
// Keys a focused drop-down list opens and walks its options with; letters go to the timeline (its handler
// takes them before the list's type-ahead can pick an option).
const SELECT_KEYS = new Set([...SLIDER_KEYS, "Enter", " ", "Escape"]);

// Whether a key press belongs to the element that has the focus rather than to the page's timeline.
function keyBelongsTo(target, key) {
  if (typingIn(target)) return true;
  if (target && target.tagName === "SELECT") return SELECT_KEYS.has(key);
  return !!(target && target.tagName === "INPUT" && target.type === "range" && SLIDER_KEYS.has(key));
}

export const Input = {
  // wheel: zoom (shift: pan); drag: pan; click: select an interval; shift+drag or drag on the time axis:
  // select a range. Keys (see the head of this file) are listed in KEYS.
  bind() {
    const c = this.canvas;
    c.addEventListener("wheel", (e) => {
      const r = c.getBoundingClientRect();
      if (e.clientX - r.left < this.opts.gutter) return;  // over the lane names: the page scrolls
      e.preventDefault();
      this.lastMouse = { clientX: e.clientX, clientY: e.clientY };
      if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) this.pan((e.deltaX || e.deltaY) / 800);
      else this.zoom(Math.exp(e.deltaY * 0.0015), e.clientX - r.left);
    }, { passive: false });
    let drag = null;
    const local = (e) => { const r = c.getBoundingClientRect(); return [e.clientX - r.left, e.clientY - r.top]; };
    c.addEventListener("mousedown", (e) => {
      const [x, y] = local(e);
      const range = e.shiftKey || y < 22;
      drag = { x: e.clientX, lx: x, ly: y, view: this.view.slice(), range: range, moved: false };
      c.style.cursor = range ? "col-resize" : "grabbing";
    });
    const onWin = (type, fn) => { window.addEventListener(type, fn); this.winListeners.push([type, fn]); };
    onWin("mouseup", (e) => {
      if (!drag) return;
      const d = drag; drag = null; c.style.cursor = "";
      if (d.range && d.moved) {
        const [x] = local(e);
        const a = this.t(Math.min(d.lx, x)), b = this.t(Math.max(d.lx, x));
        this.setRange(a + this.offset, b + this.offset);
      } else if (!d.moved) this.select(this.hitAt(d.lx, d.ly));
    });
    onWin("mousemove", (e) => {
      if (!drag) return;
      if (Math.abs(e.clientX - drag.x) > 3) drag.moved = true;
      if (!drag.moved) return;
      if (drag.range) {
        const [x] = local(e);
        this.range = [this.t(Math.min(drag.lx, x)) + this.offset, this.t(Math.max(drag.lx, x)) + this.offset];
        this.draw();
        return;
      }
      const dt = (e.clientX - drag.x) / this.plotW * (drag.view[1] - drag.view[0]);
      this.setView(drag.view[0] - dt, drag.view[1] - dt);
    });
    c.addEventListener("mousemove", (e) => this.hover(e));
    c.addEventListener("mouseleave", () => { this.tip.hidden = true; this.lastMouse = null; this.setHovered(null); });
    c.addEventListener("click", (e) => {  // a folded group's name opens it; an open group's name folds it
      const [x, y] = local(e);
      if (x > this.opts.gutter) return;
      const row = this.lanes.find((r) => r.extra === "group" && y >= r.y && y < r.y + r.h);
      if (row) this.toggleGroup(row.key);
    });
    c.addEventListener("dblclick", (e) => { const r = c.getBoundingClientRect(); this.zoom(0.4, e.clientX - r.left); });
    this.onKey = (e) => {
      if (e.ctrlKey || e.metaKey || e.altKey || e.defaultPrevented) return;
      if (this.opts.pageKeys ? keyBelongsTo(e.target, e.key) : e.target !== this.root) return;
      const k = e.key.length === 1 ? e.key.toLowerCase() : e.key;
      if (k === "+" || k === "=" || k === "w") this.zoom(0.6);
      else if (k === "-" || k === "_" || k === "s") this.zoom(1 / 0.6);
      else if (k === "ArrowLeft" || k === "a") this.pan(-0.2);
      else if (k === "ArrowRight" || k === "d") this.pan(0.2);
      else if (k === "0" || k === "Home") this.reset();
      else if (k === "f") this.focusSelection();
      else if (k === "Escape") { this.select(null); this.setRange(null); }
      else if (k === "?") this.root.dispatchEvent(new CustomEvent("tl-help"));
      else return;
      e.preventDefault();
    };
    this.keyTarget = this.opts.pageKeys ? document : this.root;
    this.keyTarget.addEventListener("keydown", this.onKey);
  },

  // Select one interval (a hit from hitAt, or null) and tell the page (tl-select).
  select(hit) {
    this.selected = hit;
    this.draw();
    this.root.dispatchEvent(new CustomEvent("tl-select", { detail: hit }));
  },

  // Select the range [a, b] (ns relative to the run; null clears it) and tell the page (tl-range).
  setRange(a, b) {
    this.range = a === null || a === undefined ? null : [Math.max(0, Math.round(a)), Math.round(b)];
    if (this.range && this.range[1] <= this.range[0]) this.range = null;
    this.draw();
    this.root.dispatchEvent(new CustomEvent("tl-range", { detail: this.range }));
  },

  // Zoom to the selected interval or range ("f", as in Perfetto).
  focusSelection() {
    const r = this.range || (this.selected && [this.selected.s, this.selected.s + this.selected.d]);
    if (!r) return;
    const pad = Math.max((r[1] - r[0]) * 0.1, 1000);
    this.setView(r[0] - this.offset - pad, r[1] - this.offset + pad);
  },

  setHovered(hit) {
    const before = this.hovered && this.hovered.id, after = hit && hit.id;
    this.hovered = hit;
    if (before !== after) this.draw();
  },

  hover(e) {
    this.lastMouse = { clientX: e.clientX, clientY: e.clientY };
    const r = this.canvas.getBoundingClientRect();
    const x = e.clientX - r.left, y = e.clientY - r.top;
    const hit = this.data && x > this.opts.gutter ? this.hitAt(x, y) : null;
    this.setHovered(hit && !hit.merged ? hit : null);
    this.showTip(hit, e.clientX, e.clientY);
  },

  showTip(hit, cx, cy) {
    if (!hit) { this.tip.hidden = true; return; }
    if (cx !== undefined) this.tipAt = [cx, cy];
    const lines = this.describe(hit);
    if (!hit.merged) for (const fn of this.tipLines) lines.push(...fn(this, hit));
    this.tip.textContent = lines.join("\n");
    this.tip.hidden = false;
    const [tx, ty] = this.tipAt;
    this.tip.style.left = Math.min(tx + 14, window.innerWidth - 470) + "px"; this.tip.style.top = (ty + 14) + "px";
  },

  // The box under (x, y): a single interval {lane, i, id, s, d, kind, name, ...} or a merged box
  // {merged: true, lane, j}; null over empty space.
  hitAt(x, y) {
    const d = this.data;
    if (!d || x <= this.opts.gutter) return null;
    const slack = 2 * (this.view[1] - this.view[0]) / this.plotW;  // 2 px
    const t = this.t(x) + this.offset;
    let merged = null;
    // the lane under y; the lanes of a folded group share one row: the first of them with a box at t
    for (const row of this.lanes.filter((rw) => !rw.header && !rw.extra && y >= rw.y && y < rw.y + rw.h)) {
      const lane = d.lanes.find((l) => l.lane === row.index);
      if (!lane) continue;
      const i = this.indexAt(lane.s, lane.d, t, slack);
      if (i >= 0) {
        return { lane: row.index, i: i, id: lane.id[i], s: lane.s[i], d: lane.d[i], kind: d.kinds[lane.k[i]],
          name: d.names[lane.n[i]], bytes: lane.b[i], memory: d.memory_kinds[lane.m[i]], step: lane.st[i],
          source: d.sources[lane.src[i]] || "", label: row.label, rowKind: row.kind };
      }
      const j = merged ? -1 : this.indexAt(lane.bs, lane.bd, t, slack);
      if (j >= 0) merged = { merged: true, lane: row.index, j: j, label: row.label, lod: lane };
    }
    return merged;
  },

  describe(hit) {
    const kinds = this.data.kinds;
    if (hit.merged) {
      const lane = hit.lod, j = hit.j;
      return [lane.bn[j].toLocaleString() + " intervals merged (mostly " + TL_LABELS[kinds[lane.bk[j]]] + ")",
        SS.ns(lane.bd[j]) + " span · busy " + SS.pct(lane.bb[j] / Math.max(1, lane.bd[j])) + " (" + SS.ns(lane.bb[j]) + ")",
        hit.label, "zoom in to see them one by one"];
    }
    const stack = hit.kind === "sample" ? hit.name.split(";").reverse() : [hit.name];  // innermost frame first
    const lines = [stack[0], TL_LABELS[hit.kind] + " · " + SS.ns(hit.d) + " · starts at " + SS.ns(hit.s)];
    if (stack.length > 1) {
      lines.push(...stack.slice(1, 1 + TIP_CALLERS).map((f) => "  called from " + f));
      if (stack.length > 1 + TIP_CALLERS) lines.push("  … " + (stack.length - 1 - TIP_CALLERS) + " frames more");
    }
    if (hit.bytes > 0) lines.push(SS.bytes(hit.bytes) + (hit.d > 0 ? " · " + (hit.bytes / hit.d).toFixed(2) + " GB/s" : "") +
      (hit.memory ? " · " + hit.memory + " memory" : ""));
    lines.push(hit.label + (hit.step >= 0 ? " · step " + hit.step : ""));
    if (hit.source) lines.push("source: " + hit.source);
    return lines;
  },

  find(x, y) {  // the tooltip text at (x, y), or null (kept for tests and tools)
    const hit = this.hitAt(x, y);
    return hit ? this.describe(hit).join("\n") : null;
  },

};
