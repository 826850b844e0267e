// Panels beside the timeline: details of the clicked interval (with its launch and what it queued), the
// stats of a selected range (GET <api>/range), and the list of keys ("?").
import { SS } from "./common.js";
import { describeLink } from "./tl_handoff.js";
import { KEYS, KEYS_NOTE } from "./tl_input.js";
import { TL_LABELS } from "./tl_theme.js";

function table(rows) {
  const t = SS.el("table", { "class": "kv" });
  for (const [k, v] of rows) {
    const tr = SS.el("tr");
    tr.append(SS.el("th", {}, k), SS.el("td", {}, v));
    t.append(tr);
  }
  return t;
}

// Fill `el` with the selected interval's details; links come from tl.linksFor.
export function attachDetails(tl, el) {
  const show = async (hit) => {
    el.replaceChildren();
    if (!hit) { el.append(SS.el("p", { "class": "muted" }, "Click an interval to see its details.")); return; }
    // a sampled Python stack: its innermost frame, then each caller outwards
    const stack = hit.kind === "sample" ? hit.name.split(";").reverse() : [hit.name];
    const rows = [["name", stack[0]], ...stack.slice(1).map((f) => ["called from", f]),
      ["kind", TL_LABELS[hit.kind] || hit.kind], ["stream", hit.label],
      ["start", SS.ns(hit.s)], ["duration", SS.ns(hit.d)], ["end", SS.ns(hit.s + hit.d)]];
    if (hit.bytes > 0) {
      rows.push(["bytes", SS.bytes(hit.bytes) + (hit.memory ? " · " + hit.memory + " memory" : "")]);
      if (hit.d > 0) rows.push(["bandwidth", (hit.bytes / hit.d).toFixed(2) + " GB/s"]);
    }
    rows.push(["step", hit.step >= 0 ? String(hit.step) : "—"], ["source line", hit.source || "—"], ["id", String(hit.id)]);
    el.append(SS.el("h3", {}, "Selected interval"), table(rows));
    const body = await tl.linksFor(hit.id);
    if (!body || tl.selected !== hit) return;
    const extra = [];
    for (const lk of body.links) {  // the tooltip's words: a GPU start before the launch returned is said so
      extra.push([lk.relation === "waited" ? "waited for" : lk.dst.id === hit.id ? "launch" : "queued", describeLink(lk, hit.id)]);
    }
    if (!extra.length) extra.push(["launch", "no link to a launch in this trace"]);
    el.append(table(extra.slice(0, 12)));
    if (extra.length > 12) el.append(SS.el("p", { "class": "muted small" }, "… and " + (extra.length - 12) + " more"));
  };
  tl.root.addEventListener("tl-select", (e) => show(e.detail));
  show(null);
}

// Fill `el` with the stats of the selected range; `gpu` false (a run without GPU work) leaves the GPU
// figures out.
export function attachRangeStats(tl, el, gpu = true) {
  let seq = 0;
  const show = async (range) => {
    const mine = ++seq;
    el.replaceChildren();
    if (!range) {
      el.append(SS.el("p", { "class": "muted" }, "Shift+drag (or drag on the time axis) to select a range."));
      return;
    }
    const url = tl.opts.api + "/range?start_ns=" + range[0] + "&end_ns=" + range[1] +
      (tl.opts.rank !== undefined ? "&rank=" + tl.opts.rank : "");
    let r;
    try { r = await tl.fetchJson(url); } catch (e) { el.append(SS.el("p", { "class": "error" }, e.message)); return; }
    if (mine !== seq) return;
    tl.rangeStats = r;
    el.append(SS.el("h3", {}, "Range " + SS.ns(r.start_ns) + " – " + SS.ns(r.end_ns) + " (" + SS.ns(r.end_ns - r.start_ns) + ")"));
    const gpuRows = [
      ["GPU busy", SS.ns(r.gpu_busy_ns) + " · " + SS.pct(r.gpu_busy_frac)],
      ["copy/compute overlap", SS.ns(r.copy_compute_overlap_ns) + " · " + SS.pct(r.copy_compute_overlap_frac)],
      ["exposed copy", SS.ns(r.exposed_copy_ns)],
      ["sync wait", SS.ns(r.sync_wait_ns)],
    ];
    el.append(table([...(gpu ? gpuRows : []), ["intervals", r.intervals.toLocaleString()]]));
    if (r.top_ops.length) {
      el.append(SS.el("h3", {}, "Top ops by time in the range"));
      el.append(table(r.top_ops.map((o) => [SS.ns(o.total_ns) + " · " + o.count + "×", (TL_LABELS[o.kind] || o.kind) + " · " + o.name])));
    }
    el.dataset.ready = "1";
    tl.root.dispatchEvent(new CustomEvent("tl-rangestats", { detail: r }));
  };
  tl.root.addEventListener("tl-range", (e) => show(e.detail));
  show(null);
}

// "?" (or the page's help button) toggles the list of keys in `dialog` (a <dialog>).
export function attachHelp(tl, dialog, button) {
  const list = SS.el("table", { "class": "kv" });
  for (const [k, v] of KEYS) { const tr = SS.el("tr"); tr.append(SS.el("th", {}, k), SS.el("td", {}, v)); list.append(tr); }
  dialog.append(SS.el("h3", {}, "Timeline keys"), list,
    SS.el("p", { "class": "muted small" }, KEYS_NOTE + " Esc or ? closes this."));
  const toggle = () => { if (dialog.open) dialog.close(); else dialog.show(); };
  tl.root.addEventListener("tl-help", toggle);
  if (button) button.addEventListener("click", toggle);
  dialog.addEventListener("keydown", (e) => {
    if (e.key === "?" || e.key === "Escape") { e.preventDefault(); dialog.close(); tl.root.focus(); }  // not the page's key too
  });
}
