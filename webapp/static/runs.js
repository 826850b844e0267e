// Runs list: search, pick two to compare, rename and delete.
import { SS } from "./common.js";

const cfg = window.STREAMSCOPE;
const table = document.getElementById("runs-table");
const search = document.getElementById("run-search");
const compareBtn = document.getElementById("compare-btn");
if (table) {
  SS.sortable(table);
  search.addEventListener("input", () => {
    const q = search.value.trim().toLowerCase();
    let shown = 0;
    for (const row of table.tBodies[0].rows) {
      const hit = !q || row.textContent.toLowerCase().includes(q);
      row.hidden = !hit; shown += hit ? 1 : 0;
    }
    document.getElementById("run-count").textContent = shown;
  });
  // the runs ticked, in the order they were ticked: the first is the baseline (A), the second is B
  let picked = [];
  table.addEventListener("change", (ev) => {
    if (!ev.target.classList.contains("pick-run")) return;
    const id = ev.target.value;
    if (!ev.target.checked) picked = picked.filter((x) => x !== id);
    else if (picked.length >= 2) ev.target.checked = false;
    else picked.push(id);
    compareBtn.disabled = picked.length !== 2;
    compareBtn.title = picked.length === 2 ? "the run ticked first is the baseline (A)" : "tick two runs: the first is the baseline (A)";
  });
  compareBtn.addEventListener("click", () => {
    const [a, b] = picked;
    window.location = cfg.compare_url + "?a=" + encodeURIComponent(a) + "&b=" + encodeURIComponent(b);
  });
  table.addEventListener("click", async (ev) => {
    const row = ev.target.closest("tr[data-id]");
    if (!row) return;
    const id = row.dataset.id;
    const link = row.querySelector(".run-name");
    try {
      if (ev.target.classList.contains("rename")) {
        const name = window.prompt("New name for this run:", link.textContent);
        if (!name || !name.trim()) return;
        const r = await SS.json(cfg.api + "/" + id, { method: "PATCH", headers: { "Content-Type": "application/json", "Accept": "application/json" }, body: JSON.stringify({ name: name }) });
        link.textContent = r.run.name; link.parentNode.dataset.v = r.run.name;
      } else if (ev.target.classList.contains("delete")) {
        if (!window.confirm("Delete the run \u201c" + link.textContent + "\u201d? This cannot be undone.")) return;
        await SS.json(cfg.api + "/" + id, { method: "DELETE" });
        row.remove();
        picked = picked.filter((x) => x !== id);
        compareBtn.disabled = picked.length !== 2;
        document.getElementById("run-count").textContent = table.tBodies[0].rows.length;
      }
    } catch (e) { window.alert(e.message); }
  });
}
