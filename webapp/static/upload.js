// Upload page: files from the picker or dropped on the zone, uploaded one by one with progress.
import { SS } from "./common.js";

const cfg = window.STREAMSCOPE;
const zone = document.getElementById("drop-zone");
const input = document.getElementById("file-input");
const list = document.getElementById("upload-list");
function uploadOne(file) {
  const li = SS.el("li", { "class": "upload-item" });
  const name = SS.el("span", { "class": "fname", title: file.name }, file.name);
  const bar = SS.el("progress", { max: "100", value: "0" });
  const msg = SS.el("span", { "class": "msg" }, "waiting…");
  li.append(name, bar, msg); list.appendChild(li);
  return new Promise((resolve) => {
    if (!/\.json(\.gz)?$/i.test(file.name)) {
      msg.textContent = "not a trace file: the name must end in .json or .json.gz";
      msg.className = "msg error"; bar.replaceWith(SS.el("span")); li.classList.add("failed"); return resolve();
    }
    if (file.size > cfg.limit) {
      msg.textContent = "file is larger than the upload limit of " + SS.bytes(cfg.limit);
      msg.className = "msg error"; bar.replaceWith(SS.el("span")); li.classList.add("failed"); return resolve();
    }
    const xhr = new XMLHttpRequest();
    const ticket = Math.random().toString(36).slice(2, 12);
    let poll = null;
    // once the body is sent, the server may hold the upload in its memory queue: say so
    const watch = () => {
      fetch(cfg.ingest_url, { headers: { "Accept": "application/json" } }).then((r) => r.json()).then((q) => {
        const jobs = q.jobs || [];
        const mine = jobs.findIndex((j) => j.ticket === ticket);
        if (mine < 0 || !poll) return;
        msg.textContent = jobs[mine].state === "queued"
          ? "queued: waiting for server memory (" + jobs.slice(0, mine).length + " ahead)"
          : "analyzing…";
      }).catch(() => {});
    };
    xhr.upload.onload = () => { msg.textContent = "analyzing…"; poll = setInterval(watch, 1000); watch(); };
    const stop = () => { if (poll) clearInterval(poll); poll = null; };
    xhr.addEventListener("loadend", stop);
    xhr.open("POST", cfg.upload_url + "?name=" + encodeURIComponent(file.name) + "&ticket=" + ticket);
    xhr.setRequestHeader("Accept", "application/json");
    xhr.setRequestHeader("Content-Type", "application/octet-stream");
    xhr.upload.onprogress = (e) => {
      if (e.lengthComputable) { bar.value = Math.round(100 * e.loaded / e.total); msg.textContent = bar.value < 100 ? "uploading " + bar.value + "%" : "analyzing…"; }
    };
    xhr.onload = () => {
      let body = null;
      try { body = JSON.parse(xhr.responseText); } catch (e) { body = null; }
      if (xhr.status === 201 && body) {
        bar.value = 100; msg.className = "msg ok"; msg.textContent = "";
        const a = SS.el("a", { href: body.url }, "stored as \u201c" + body.run.name + "\u201d — open the timeline");
        msg.appendChild(a); li.classList.add("done");
      } else {
        bar.replaceWith(SS.el("span", { "class": "bar-gap" })); msg.className = "msg error"; li.classList.add("failed");
        msg.textContent = (body && body.error) || ("upload failed (HTTP " + xhr.status + ")");
      }
      resolve();
    };
    xhr.onerror = () => { bar.replaceWith(SS.el("span")); msg.className = "msg error"; msg.textContent = "upload failed: the server did not answer"; li.classList.add("failed"); resolve(); };
    xhr.send(file);
  });
}
function uploadRanks(files) {
  // one request, one "file" field per rank: the server merges them into one run
  const li = SS.el("li", { "class": "upload-item" });
  const msg = SS.el("span", { "class": "msg" }, "uploading and merging " + files.length + " ranks…");
  li.append(SS.el("span", { "class": "fname" }, files.map((f) => f.name).join(", ")), msg); list.appendChild(li);
  const form = new FormData();
  files.forEach((f) => form.append("file", f, f.name));
  return fetch(cfg.merge_url, { method: "POST", body: form, headers: { Accept: "application/json" } })
    .then((r) => r.json().then((body) => ({ ok: r.status === 201, body }), () => ({ ok: false, body: null })))
    .then(({ ok, body }) => {
      if (ok) {
        msg.className = "msg ok"; msg.textContent = "";
        msg.appendChild(SS.el("a", { href: body.url }, "stored as \u201c" + body.run.name + "\u201d — open the timeline"));
        li.classList.add("done");
      } else {
        msg.className = "msg error"; msg.textContent = (body && body.error) || "upload failed"; li.classList.add("failed");
      }
    }, () => { msg.className = "msg error"; msg.textContent = "upload failed: the server did not answer"; li.classList.add("failed"); });
}
async function uploadAll(files) {
  if (document.getElementById("merge-ranks").checked && files.length > 1) return uploadRanks(files);
  for (const f of files) await uploadOne(f);
}
input.addEventListener("change", () => { uploadAll(Array.from(input.files)); input.value = ""; });
["dragenter", "dragover"].forEach((t) => zone.addEventListener(t, (e) => { e.preventDefault(); zone.classList.add("over"); }));
["dragleave", "drop"].forEach((t) => zone.addEventListener(t, (e) => { e.preventDefault(); zone.classList.remove("over"); }));
zone.addEventListener("drop", (e) => uploadAll(Array.from(e.dataTransfer.files)));
