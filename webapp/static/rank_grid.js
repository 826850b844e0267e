// The run page's rank x step heatmap (step time or wait in collectives, picked by a <select>): a click on
// a cell calls onCell(rank, step, start_ns, end_ns) with that rank's step window (run clock, ns).
// Figures come from the analysis (rank_figures, built by webapp.figures), cell windows from its grid.
export function rankGrid(Plotly, el, select, figures, grid, onCell) {
  const draw = () => {
    const fig = figures[select.value] || figures.step_time_ns;
    Plotly.react(el, fig.data, fig.layout, { displaylogo: false, responsive: true });
  };
  select.addEventListener("change", draw);
  draw();
  el.on("plotly_click", (ev) => {
    const p = ev.points && ev.points[0];
    if (!p) return;
    const [i, j] = Array.isArray(p.pointNumber) ? p.pointNumber : p.pointIndex;
    const s = grid.start_ns[i][j], e = grid.end_ns[i][j];
    if (s === null || e === null) return;
    onCell(grid.ranks[i], grid.steps[j], s, e);
  });
}

// Plotly, loaded once from `src` (the vendored bundle) when a page first needs it.
let plotlyLoad = null;
export function loadPlotly(src) {
  if (!plotlyLoad) {
    plotlyLoad = new Promise((resolve, reject) => {
      if (window.Plotly) { resolve(window.Plotly); return; }
      const s = document.createElement("script");
      s.src = src; s.async = true;
      s.onload = () => resolve(window.Plotly);
      s.onerror = () => reject(new Error("could not load Plotly"));
      document.body.appendChild(s);
    });
  }
  return plotlyLoad;
}
