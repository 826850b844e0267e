// Find ops by name (substring, or a regular expression) with GET <api>/search: the matches in view are
// outlined, and next / previous jump the view to the next match in time order (keeping the zoom) and
// select it. Works on runs of any size: the server pages the matches.
import { SS } from "./common.js";

const MATCH_COLOR = "#ffb000";

export function attachSearch(tl, form) {
  const input = form.querySelector("input[type=search]");
  const regex = form.querySelector("input[type=checkbox]");
  const count = form.querySelector(".count");
  const state = { q: "", regex: false, total: 0, inView: [], current: null, seq: 0 };
  tl.search = state;

  const base = () => tl.opts.api + "/search?q=" + encodeURIComponent(state.q) + (state.regex ? "&regex=1" : "") +
    (tl.opts.rank !== undefined ? "&rank=" + tl.opts.rank : "");
  const say = (text, bad) => { count.textContent = text; count.classList.toggle("error", !!bad); };

  const refreshView = async () => {
    if (!state.q) { state.inView = []; tl.draw(); return; }
    const seq = state.seq;
    const a = Math.max(0, Math.floor(tl.view[0] + tl.offset)), b = Math.max(a + 1, Math.ceil(tl.view[1] + tl.offset));
    try {
      const r = await tl.fetchJson(base() + "&start_ns=" + a + "&end_ns=" + b + "&limit=1000");
      if (seq !== state.seq) return;
      state.inView = r.matches;
      tl.draw();
    } catch (e) { /* the count line already says why */ }
  };

  const run = async () => {
    state.q = input.value.trim(); state.regex = regex.checked; state.current = null;
    const seq = ++state.seq;
    if (!state.q) { state.total = 0; say(""); refreshView(); return; }
    try {
      const r = await tl.fetchJson(base() + "&limit=1");
      if (seq !== state.seq) return;
      state.total = r.total;
      say(r.total ? r.total.toLocaleString() + " matches" : "no match");
    } catch (e) { if (seq === state.seq) { state.total = 0; say(e.message, true); } return; }
    refreshView();
    form.dispatchEvent(new CustomEvent("search-done"));
  };

  // jump to the next (dir > 0) or previous match after the current one (or the view's centre)
  const step = async (dir) => {
    if (input.value.trim() !== state.q || regex.checked !== state.regex) await run();
    if (!state.q || !state.total) return;
    const centre = Math.round((tl.view[0] + tl.view[1]) / 2 + tl.offset);
    const cursor = state.current ? state.current.cursor : centre + ":-1";
    let r = await tl.fetchJson(base() + "&limit=1&" + (dir > 0 ? "after=" : "before=") + cursor);
    if (!r.matches.length) r = await tl.fetchJson(base() + "&limit=1" + (dir > 0 ? "" : "&before=999999999999999999:0"));  // wrap
    const m = r.matches[0];
    if (!m) return;
    state.current = m;
    const span = Math.max(tl.view[1] - tl.view[0], m.d * 1.5);
    const mid = m.s + m.d / 2 - tl.offset;
    tl.setView(mid - span / 2, mid + span / 2);
    const lane = tl.rowByLane[m.lane];
    tl.select({ lane: m.lane, id: m.id, s: m.s, d: m.d, kind: m.kind, name: m.name, bytes: 0, step: m.step,
      source: "", label: lane ? lane.label : "" });
    say((state.total || 0).toLocaleString() + " matches · at " + SS.ns(m.s));
    form.dispatchEvent(new CustomEvent("search-jump", { detail: m }));
  };

  let timer = null;
  input.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(run, 250); });
  regex.addEventListener("change", run);
  form.addEventListener("submit", (e) => { e.preventDefault(); step(1); });
  form.querySelector(".next").addEventListener("click", () => step(1));
  form.querySelector(".prev").addEventListener("click", () => step(-1));
  input.addEventListener("keydown", (e) => { if (e.key === "Enter" && e.shiftKey) { e.preventDefault(); step(-1); } });
  tl.root.addEventListener("tl-view", () => { clearTimeout(state.viewTimer); state.viewTimer = setTimeout(refreshView, 150); });
  tl.searchStep = step;
  tl.setSearch = (q, rx) => { input.value = q; regex.checked = !!rx; return run(); };

  tl.layers.push((t) => {
    const ctx = t.ctx;
    ctx.strokeStyle = MATCH_COLOR; ctx.lineWidth = 2;
    for (const m of state.inView) {
      const row = t.rowByLane[m.lane];
      if (!row) continue;
      const a = t.x(t.rel(m.s)), b = t.x(t.rel(m.s + m.d));
      ctx.strokeRect(a - 1.5, row.y + 0.5, Math.max(3, b - a + 3), row.h - 1);
    }
    ctx.lineWidth = 1;
  });
}
