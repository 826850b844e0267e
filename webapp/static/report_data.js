// Offline reports: data embedded in the page (gzip + base64 blobs) instead of a server's JSON API.
// EmbeddedTimeline is the app's Timeline with fetchJson answered from a run's embedded views: for each
// window asked, the finest embedded view that covers it (the whole-run overview always does).
import { Timeline } from "./timeline.js";

export async function inflate(b64) {
  if (typeof DecompressionStream === "undefined") {
    throw new Error("this browser cannot unpack the report's data (it needs DecompressionStream: a browser from 2023 or later)");
  }
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return await new Response(stream).text();
}

// Plotly, unpacked from the page once and run as an inline script (no request)
let plotlyReady = null;
export function loadPlotly(b64) {
  if (!plotlyReady) {
    plotlyReady = inflate(b64).then((code) => {
      const s = document.createElement("script");
      s.textContent = code;
      document.head.appendChild(s);
      return window.Plotly;
    });
  }
  return plotlyReady;
}

export class EmbeddedRun {
  // data: {views: [{start_ns, end_ns, width_px, level, focus, label, merged, blob}], evidence: blob}
  constructor(data) {
    this.views = data.views || [];
    this.evidenceBlob = data.evidence;
    this.cache = new Map();
    this.evidence = null;
  }

  async view(v) {
    if (!this.cache.has(v)) this.cache.set(v, inflate(v.blob).then((t) => JSON.parse(t)));
    return this.cache.get(v);
  }

  // the finest view that covers [a, b) (ns from the run's start) within the run (nothing lies outside the
  // overview's window); the overview when none does
  pick(a, b) {
    let best = this.views[0];
    a = Math.max(a, best.start_ns); b = Math.min(b, best.end_ns);
    for (const v of this.views) {
      if (v.start_ns <= a && v.end_ns >= b && (v.end_ns - v.start_ns) / v.width_px < (best.end_ns - best.start_ns) / best.width_px) best = v;
    }
    return best;
  }

  // answers the URLs Timeline asks (…/overview, …/timeline?start_ns&end_ns, …/intervals?ids); the server's
  // other endpoints (search, links, queue, range) are not in the file: their promise rejects
  async answer(url) {
    const u = new URL(url, "http://report.invalid/");
    if (u.pathname.endsWith("/overview")) { this.lastPicked = this.views[0]; return this.view(this.views[0]); }
    if (u.pathname.endsWith("/intervals")) {
      if (!this.evidence) this.evidence = this.evidenceBlob ? inflate(this.evidenceBlob).then((t) => JSON.parse(t)) : Promise.resolve([]);
      const ids = new Set((u.searchParams.get("ids") || "").split(",").map(Number));
      return { intervals: (await this.evidence).filter((r) => ids.has(r.id)) };
    }
    if (!u.pathname.endsWith("/timeline")) throw new Error("not in this offline report: " + u.pathname.split("/").pop());
    const a = Number(u.searchParams.get("start_ns")), b = Number(u.searchParams.get("end_ns"));
    const v = this.pick(a, b);
    const data = await this.view(v);
    this.lastPicked = v;
    return data;
  }
}

export class EmbeddedTimeline extends Timeline {
  // opts.embedded: an EmbeddedRun; every other option as for Timeline
  fetchJson(url) { return this.opts.embedded.answer(url); }
}
