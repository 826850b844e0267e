// Shareable views and image export. The URL's hash holds the view: #start=NS&end=NS[&rank=R][&sel=ID]
// [&q=TEXT&rx=1] (ns relative to the run start), kept current as the view changes, so a reload or a sent
// link opens the same view. "Save image" writes the canvas as PNG; small views also as SVG.
import { TL_COLORS } from "./tl_theme.js";

export const SVG_MAX_BOXES = 5000;

export function readViewHash(hash) {
  const p = new URLSearchParams((hash || "").replace(/^#/, ""));
  const num = (k) => (p.has(k) && p.get(k) !== "" && isFinite(Number(p.get(k))) ? Number(p.get(k)) : undefined);
  return { start: num("start"), end: num("end"), rank: num("rank"), sel: num("sel"), q: p.get("q") || "", rx: p.get("rx") === "1" };
}

export function attachShare(tl, onRestore) {
  const write = () => {
    const p = new URLSearchParams();
    p.set("start", String(Math.round(tl.view[0]))); p.set("end", String(Math.round(tl.view[1])));
    if (tl.opts.rank !== undefined) p.set("rank", String(tl.opts.rank));
    if (tl.selected) p.set("sel", String(tl.selected.id));
    if (tl.search && tl.search.q) { p.set("q", tl.search.q); if (tl.search.regex) p.set("rx", "1"); }
    history.replaceState(null, "", "#" + p.toString());
  };
  let timer = null;
  const later = () => { clearTimeout(timer); timer = setTimeout(write, 200); };
  for (const ev of ["tl-view", "tl-select", "tl-drawn"]) tl.root.addEventListener(ev, later);
  tl.writeViewHash = write;

  // restore: the view at once, the selection once its row is known (from /links)
  const state = readViewHash(location.hash);
  if (state.start !== undefined && state.end !== undefined && state.end > state.start) {
    tl.setView(state.start, state.end, true);
  }
  if (state.sel !== undefined) {
    tl.linksFor(state.sel).then((body) => {
      if (!body) return;
      const iv = body.interval, row = tl.rowByLane[iv.lane];
      tl.select({ lane: iv.lane, id: iv.id, s: iv.s, d: iv.d, kind: iv.kind, name: iv.name, bytes: 0, step: iv.step,
        source: "", label: row ? row.label : "" });
    });
  }
  if (onRestore) onRestore(state);
  return state;
}

function download(name, blob) {
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob); a.download = name;
  document.body.append(a); a.click(); a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

export function boxesInView(tl) {
  return tl.data ? tl.data.lanes.reduce((n, l) => n + l.s.length + l.bs.length, 0) : 0;
}

export function savePng(tl, name) {
  tl.canvas.toBlob((blob) => { if (blob) download(name + ".png", blob); }, "image/png");
}

// An SVG of the lanes and boxes in view (labels, boxes; no overlays): for views of at most SVG_MAX_BOXES.
export function saveSvg(tl, name) {
  const W = tl.cssW, H = tl.height, G = tl.opts.gutter, d = tl.data;
  const esc = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  const parts = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="system-ui" font-size="11">`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`];
  for (const row of tl.lanes) {
    const label = row.extra === "group" ? row.group + " · " + row.count + " streams" : row.label;
    if (row.header || row.stacked || (row.extra && row.extra !== "group")) continue;
    parts.push(`<text x="8" y="${row.y + 14}">${esc(label)}</text>`);
  }
  for (const lane of d.lanes) {
    const row = tl.rowByLane[lane.lane];
    if (!row) continue;
    const box = (s, dur, kind, op) => {
      const x0 = Math.max(G, tl.x(tl.rel(s))), x1 = Math.min(W - 8, tl.x(tl.rel(s + dur)));
      if (x1 < G || x0 > W - 8) return;
      parts.push(`<rect x="${x0.toFixed(1)}" y="${row.y + 4}" width="${Math.max(1, x1 - x0).toFixed(1)}" height="${row.h - 8}" ` +
        `fill="${TL_COLORS[kind] || "#888"}" opacity="${op}"/>`);
    };
    for (let i = 0; i < lane.s.length; i++) box(lane.s[i], lane.d[i], d.kinds[lane.k[i]], 1);
    for (let i = 0; i < lane.bs.length; i++) box(lane.bs[i], lane.bd[i], d.kinds[lane.bk[i]], 0.6);
  }
  parts.push("</svg>");
  download(name + ".svg", new Blob([parts.join("\n")], { type: "image/svg+xml" }));
}
