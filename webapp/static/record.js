// Record page: start a recording job and poll its log until it is done.
import { SS } from "./common.js";

const cfg = window.STREAMSCOPE;
const form = document.getElementById("record-form");
const box = document.getElementById("record-status");
const logEl = document.getElementById("record-log");
form.addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const data = new FormData(form);
  const body = data.get("what") === "script" ? { script: data.get("script") } : { demo: data.get("demo") };
  box.hidden = false; logEl.textContent = "starting…";
  form.querySelector("button").disabled = true;
  try {
    let job = await SS.json(cfg.start_url, { method: "POST", headers: { "Content-Type": "application/json", "Accept": "application/json" }, body: JSON.stringify(body) });
    while (job.state === "running") {
      await new Promise((r) => setTimeout(r, 700));
      job = await SS.json(cfg.start_url + "/" + job.id);
      logEl.textContent = job.log.join("\n") || "recording…";
      logEl.scrollTop = logEl.scrollHeight;
    }
    if (job.state === "done") { window.location = job.run_url; return; }
    logEl.textContent += "\nfailed: " + job.error;
  } catch (e) { logEl.textContent = "failed: " + e.message; }
  box.querySelector(".progress").hidden = true;
  form.querySelector("button").disabled = false;
});
