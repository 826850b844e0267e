// The host -> device handoff on the timeline: a queue track under each GPU stream (ops launched and not
// finished, and how far ahead the host is), and arrows from a launch to the GPU work it queued (and from a
// sync wait to the work it waited for), shown for the hovered and the selected interval, as Perfetto's
// flows. Data: GET <api>/queue (per-pixel max depth and lead) and <api>/links?id= (cached per id).
import { SS } from "./common.js";

const DEPTH_COLOR = "#4c78a8", LEAD_COLOR = "#e45756", LINK_COLOR = "#2f6fed", WAIT_COLOR = "#c62828";

export function attachHandoff(tl) {
  const links = new Map();  // interval id -> {interval, links} (or a pending Promise)
  tl.links = links;
  tl.queue = null;
  tl.followView("/queue", () => (tl.opts.rank !== undefined ? "&rank=" + tl.opts.rank : ""), (q) => {
    q.byLane = {};
    for (const l of q.lanes) q.byLane[l.lane] = l;
    tl.queue = q;
    tl.draw();
    tl.root.dispatchEvent(new CustomEvent("tl-queue"));
  });

  tl.rowPainters.queue = (t, row) => {
    const q = t.queue && t.queue.byLane[row.index];
    if (!q) return;
    const ctx = t.ctx, n = q.depth.length, px = (t.queue.end_ns - t.queue.start_ns) / n;
    const maxD = Math.max(1, ...q.depth), maxL = Math.max(1, ...q.lead_ns);
    const base = row.y + row.h - 2, h = row.h - 6;
    ctx.fillStyle = DEPTH_COLOR; ctx.globalAlpha = 0.55;
    for (let i = 0; i < n; i++) {
      if (!q.depth[i]) continue;
      const x0 = t.x(t.rel(t.queue.start_ns + i * px)), x1 = t.x(t.rel(t.queue.start_ns + (i + 1) * px));
      const y = h * q.depth[i] / maxD;
      ctx.fillRect(x0, base - y, Math.max(1, x1 - x0), y);
    }
    ctx.globalAlpha = 1; ctx.strokeStyle = LEAD_COLOR; ctx.lineWidth = 1.2; ctx.beginPath();
    for (let i = 0; i < n; i++) {
      const x = t.x(t.rel(t.queue.start_ns + (i + 0.5) * px)), y = base - h * q.lead_ns[i] / maxL;
      if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
    }
    ctx.stroke(); ctx.lineWidth = 1;
    ctx.font = "10px system-ui"; ctx.fillStyle = "#1d2330";
    ctx.fillText("max " + maxD + " queued · lead up to " + SS.ns(Math.max(...q.lead_ns)), t.opts.gutter + 4, row.y + 10);
  };

  // links of one interval id: fetched once, then redrawn
  tl.linksFor = (id) => {
    if (id === undefined || id === null) return Promise.resolve(null);
    const have = links.get(id);
    if (have) return have instanceof Promise ? have : Promise.resolve(have);
    const p = tl.fetchJson(tl.opts.api + "/links?id=" + id).then((body) => {
      links.set(id, body);
      tl.draw();
      if (tl.hovered && tl.hovered.id === id && !tl.tip.hidden) tl.showTip(tl.hovered);
      tl.root.dispatchEvent(new CustomEvent("tl-links", { detail: body }));
      return body;
    }).catch(() => { links.delete(id); return null; });
    links.set(id, p);
    return p;
  };
  const ready = (id) => { const v = links.get(id); return v && !(v instanceof Promise) ? v : null; };

  tl.tipLines.push((t, hit) => {
    const body = ready(hit.id);
    if (!body) { t.linksFor(hit.id); return []; }
    return body.links.map((lk) => describeLink(lk, hit.id));
  });
  tl.root.addEventListener("tl-select", (e) => { if (e.detail) tl.linksFor(e.detail.id); });

  tl.layers.push((t) => {
    for (const hit of [t.hovered, t.selected]) {
      const body = hit && ready(hit.id);
      if (body) for (const lk of body.links) drawArrow(t, lk);
    }
  });
}

// A link as a tooltip line, seen from interval `id`. The GPU may start an op before its launch call returns
// (a negative delay, common in torch.profiler traces): that is said, never printed as a negative delay.
export function describeLink(lk, id) {
  if (lk.relation === "waited") return "waited for " + lk.dst.name + " (it ended " + SS.ns(lk.delay_ns) + " before the wait did)";
  const early = lk.delay_ns < 0, gap = SS.ns(Math.abs(lk.delay_ns));
  if (lk.dst.id === id) {
    return "queued by " + lk.src.name + (early
      ? " · no queueing delay: the GPU started it " + gap + " before the launch call returned"
      : " · queueing delay " + gap + " (launch end → GPU start)");
  }
  return "queued " + lk.dst.name + " · it started " + gap + (early ? " before the launch call returned" : " after the launch returned");
}

// An arrow from the end of the source interval to the start (or, for a wait, the end) of the target.
function drawArrow(t, lk) {
  const a = t.rowByLane[lk.src.lane], b = t.rowByLane[lk.dst.lane];
  if (!a || !b) return;
  const ctx = t.ctx, wait = lk.relation === "waited";
  const x0 = t.x(t.rel(wait ? lk.src.s : lk.src.s + lk.src.d)), y0 = a.y + a.h / 2;
  const x1 = t.x(t.rel(wait ? lk.dst.s + lk.dst.d : lk.dst.s)), y1 = b.y + b.h / 2;
  const color = wait ? WAIT_COLOR : LINK_COLOR;
  ctx.strokeStyle = color; ctx.fillStyle = color; ctx.lineWidth = 1.6;
  ctx.beginPath(); ctx.moveTo(x0, y0);
  const mid = (y0 + y1) / 2;
  ctx.bezierCurveTo(x0 + 20, mid, x1 - 20, mid, x1, y1);
  ctx.stroke();
  const ang = Math.atan2(y1 - mid, 20);
  ctx.beginPath(); ctx.moveTo(x1, y1);
  ctx.lineTo(x1 - 8 * Math.cos(ang - 0.4), y1 - 8 * Math.sin(ang - 0.4));
  ctx.lineTo(x1 - 8 * Math.cos(ang + 0.4), y1 - 8 * Math.sin(ang + 0.4));
  ctx.closePath(); ctx.fill();
  ctx.lineWidth = 2;
  for (const [r, iv] of [[a, lk.src], [b, lk.dst]]) {
    const l = t.x(t.rel(iv.s)), w = Math.max(3, t.x(t.rel(iv.s + iv.d)) - l);
    ctx.strokeRect(l - 1, r.y + 1, w + 2, r.h - 2);
  }
  ctx.lineWidth = 1;
}
