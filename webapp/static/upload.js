// Upload page: files from the picker or dropped on the zone, uploaded one by one with progress. The server
// tells a file's format by its bytes (and says in one line why it refuses one); a zip of a job's rank files
// goes to the multi-rank upload, as do several files when "merge" is ticked.
import { SS } from "./common.js";

const cfg = window.STREAMSCOPE;
const zone = document.getElementById("drop-zone");
const input = document.getElementById("file-input");
const list = document.getElementById("upload-list");
const TOO_LARGE = "file is larger than the upload limit of " + SS.bytes(cfg.limit);
const TOO_LARGE_TOGETHER = "the files together are larger than the upload limit of " + SS.bytes(cfg.limit) + " (merged ranks go in one request)";
const ZIP_MAGIC = [[0x50, 0x4b, 0x03, 0x04], [0x50, 0x4b, 0x05, 0x06]];  // "PK": a zip, or an empty one

// Whether `file` is a zip, by its first bytes.
async function isZip(file) {
  const head = new Uint8Array(await file.slice(0, 4).arrayBuffer());
  return ZIP_MAGIC.some((magic) => magic.every((b, i) => head[i] === b));
}

function uploadOne(file) {
  const li = SS.el("li", { "class": "upload-item" });
  const name = SS.el("span", { "class": "fname", title: file.name }, file.name);
  const bar = SS.el("progress", { max: "100", value: "0" });
  const msg = SS.el("span", { "class": "msg" }, "waiting…");
  li.append(name, bar, msg); list.appendChild(li);
  return new Promise((resolve) => {
    if (file.size > cfg.limit) {
      msg.textContent = TOO_LARGE;
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
// One request, one "file" field per rank (or one zip of the rank files): the server merges them into one run.
function uploadRanks(files) {
  const li = SS.el("li", { "class": "upload-item" });
  const what = files.length > 1 ? files.length + " ranks" : "the rank files in it";
  const msg = SS.el("span", { "class": "msg" }, "uploading and merging " + what + "…");
  li.append(SS.el("span", { "class": "fname" }, files.map((f) => f.name).join(", ")), msg); list.appendChild(li);
  // the server's limit is on the request: all the files together
  if (files.reduce((sum, f) => sum + f.size, 0) > cfg.limit) {
    msg.className = "msg error"; msg.textContent = TOO_LARGE_TOGETHER; li.classList.add("failed");
    return Promise.resolve();
  }
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
  for (const f of files) await ((await isZip(f)) ? uploadRanks([f]) : uploadOne(f));
}
input.addEventListener("change", () => { uploadAll(Array.from(input.files)); input.value = ""; });
["dragenter", "dragover"].forEach((t) => zone.addEventListener(t, (e) => { e.preventDefault(); zone.classList.add("over"); }));
["dragleave", "drop"].forEach((t) => zone.addEventListener(t, (e) => { e.preventDefault(); zone.classList.remove("over"); }));
zone.addEventListener("drop", (e) => uploadAll(Array.from(e.dataTransfer.files)));
