// Shared helpers (an ES module): JSON fetch with clear errors, formatting, sortable tables, the window a step is
// shown in.
export const SS = {
  async json(url, opts) {
    const r = await fetch(url, Object.assign({ headers: { "Accept": "application/json" } }, opts || {}));
    let body = null;
    try { body = await r.json(); } catch (e) { body = null; }
    if (!r.ok) throw new Error((body && body.error) || ("HTTP " + r.status));
    return body;
  },
  ns(v) {
    if (v === null || v === undefined || !isFinite(v)) return "—";
    const a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toPrecision(3) + " s";
    if (a >= 1e6) return (v / 1e6).toPrecision(3) + " ms";
    if (a >= 1e3) return (v / 1e3).toPrecision(3) + " µs";
    return Math.round(v) + " ns";
  },
  // sizes in binary units, as webapp/formatting.py writes them: 3 significant digits, trailing zeros dropped
  // ("64 MiB", "6.25 GiB", "2 GiB"); bandwidth is decimal GB/s (bytes per ns)
  bytes(v) {
    if (v === null || v === undefined || !isFinite(v)) return "—";
    const a = Math.abs(v);
    for (const [unit, scale] of [["TiB", 2 ** 40], ["GiB", 2 ** 30], ["MiB", 2 ** 20], ["KiB", 2 ** 10]]) {
      if (a >= scale) return Number((v / scale).toPrecision(3)) + " " + unit;
    }
    return Math.round(v) + " B";
  },
  pct(v) { return (v === null || v === undefined || !isFinite(v)) ? "—" : (100 * v).toFixed(1) + "%"; },
  // Load Plotly (only on pages with a chart) from ``src``, then draw ``fig`` into #step-chart.
  stepChart(src, fig) {
    const s = document.createElement("script");
    s.src = src; s.async = true;
    s.onload = () => window.Plotly.newPlot("step-chart", fig.data, fig.layout, { displaylogo: false, responsive: true });
    document.body.appendChild(s);
  },
  el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  },
  // Click a <th data-sort> to sort its table body; cells may carry data-v with the raw value.
  sortable(table) {
    table.querySelectorAll("th[data-sort]").forEach((th) => {
      th.addEventListener("click", () => {
        const idx = Array.from(th.parentNode.children).indexOf(th);
        const num = th.dataset.sort === "num";
        const asc = !th.classList.contains("asc");
        table.querySelectorAll("th").forEach((h) => h.classList.remove("asc", "desc"));
        th.classList.add(asc ? "asc" : "desc");
        const body = table.tBodies[0];
        const rows = Array.from(body.rows);
        const key = (r) => { const c = r.cells[idx]; const v = c.dataset.v !== undefined ? c.dataset.v : c.textContent; return num ? parseFloat(v) || 0 : v.toLowerCase(); };
        rows.sort((a, b) => { const x = key(a), y = key(b); return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1); });
        rows.forEach((r) => body.appendChild(r));
      });
    });
  },
};

// The window "go to a step" shows for a step [start, end] (ns, any one clock): 3% of its length either side, at
// least 1 µs (the timeline's shortest view). The run page (its step box, per-step table and rank heatmap) and the
// offline report all zoom to a step through this, so one step looks the same on both.
export function stepWindow(start, end) {
  const pad = Math.max((end - start) * 0.03, 1000);
  return [start - pad, end + pad];
}
