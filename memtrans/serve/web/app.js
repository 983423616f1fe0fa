// radgen report viewer: uploads a study to v1/reports, shows the report and
// each word's attention over every view. Plain JavaScript, nothing loaded
// from elsewhere.
"use strict";

const $ = (s) => document.querySelector(s);
const state = { files: [], report: null, pinned: -1, token: sessionStorage.getItem("radgen-token") || "", busy: false };
const DISPLAY = 360; // longer side of a view on the page, in CSS pixels

function headers() {
  return state.token ? { Authorization: "Bearer " + state.token } : {};
}

async function errorText(resp) {
  try {
    const body = await resp.json();
    if (body && body.error) return body.error.message + " (" + body.error.code + ")";
  } catch (e) { /* not JSON */ }
  return "HTTP " + resp.status;
}

function setStatus(text, kind) {
  const el = $("#status");
  el.textContent = text;
  el.className = "status" + (kind ? " " + kind : "");
}

async function loadModel() {
  const resp = await fetch("v1/model", { headers: headers() });
  if (resp.status === 401) {
    $("#auth").classList.remove("hidden");
    $("#model").textContent = "access token required";
    return;
  }
  if (!resp.ok) {
    $("#model").textContent = await errorText(resp);
    return;
  }
  $("#auth").classList.add("hidden");
  const m = await resp.json();
  state.model = m;
  $("#model").textContent = `${m.name} · ${m.architecture} · ${m.views} view${m.views === 1 ? "" : "s"} · ${m.checksum.slice(0, 19)}…`;
  $("#maxlen").max = m.max_length;
  const banner = $("#provenance");
  if (m.trained_on && m.trained_on.synthetic) {
    banner.textContent = `This model was trained on synthetic films, not radiographs of patients${m.trained_on.data ? " — " + m.trained_on.data : ""}. ` +
      "Its reports about real radiographs are fluent but mean nothing: use it to try the service, not to read films.";
    banner.classList.remove("hidden");
  } else {
    banner.classList.add("hidden");
  }
}

function byName(a, b) {
  return a.name.localeCompare(b.name, undefined, { numeric: true });
}

function setFiles(list) {
  state.files = Array.from(list).sort(byName);
  const ol = $("#filelist");
  ol.replaceChildren(...state.files.map((f) => {
    const li = document.createElement("li");
    li.textContent = `${f.name} (${(f.size / 1024).toFixed(1)} KiB)`;
    return li;
  }));
  $("#again").disabled = state.files.length === 0;
  if (state.files.length) generate();
}

async function generate() {
  if (state.busy || state.files.length === 0) return;
  state.busy = true;
  $("#again").disabled = true;
  setStatus("Generating the report…", "busy");
  const form = new FormData();
  form.append("attention", "true");
  form.append("images", "true");
  form.append("fhir", "true");
  form.append("beam_size", $("#beam").value);
  if ($("#maxlen").value) form.append("max_length", $("#maxlen").value);
  for (const f of state.files) form.append("view", f, f.name);
  try {
    const resp = await fetch("v1/reports", { method: "POST", body: form, headers: headers() });
    if (resp.status === 401) {
      $("#auth").classList.remove("hidden");
      setStatus("This service needs an access token.", "error");
      return;
    }
    if (!resp.ok) {
      setStatus(await errorText(resp), "error");
      return;
    }
    const r = await resp.json();
    state.report = r;
    state.pinned = -1;
    await render(r);
    const t = r.timings;
    setStatus(`Report ready in ${Math.round(t.total_ms)} ms (generation ${Math.round(t.generate_ms)} ms, batch of ${t.batch}).`);
  } catch (e) {
    setStatus("The request failed: " + e.message, "error");
  } finally {
    state.busy = false;
    $("#again").disabled = state.files.length === 0;
  }
}

function loadImage(src) {
  return new Promise((resolve, reject) => {
    const img = new Image();
    img.onload = () => resolve(img);
    img.onerror = () => reject(new Error("cannot show a view"));
    img.src = src;
  });
}

// PUNCT are the tokens written against the word before them.
const PUNCT = new Set([".", ",", ";", ":", "?", "!", ")"]);
const ENDS = new Set([".", "?", "!"]);

// sentenceWords lays the report's tokens out as sentences: each word a
// span that keeps its token index (for its attention map), the first word
// of a sentence capitalised, punctuation attached to the word before it.
function sentenceWords(words) {
  const out = [];
  let start = true;
  words.forEach((w, t) => {
    if (w === "") return; // the end of the report
    const span = document.createElement("span");
    span.className = "word";
    span.dataset.t = t;
    span.dataset.token = w;
    const punct = PUNCT.has(w);
    span.textContent = start && !punct ? w.charAt(0).toUpperCase() + w.slice(1) : w;
    if (punct) span.classList.add("punct");
    span.addEventListener("mouseenter", () => show(t));
    span.addEventListener("mouseleave", () => show(state.pinned));
    span.addEventListener("click", () => pin(t));
    if (out.length > 0 && !punct) out.push(document.createTextNode(" "));
    out.push(span);
    if (punct) start = ENDS.has(w);
    else start = false;
  });
  return out;
}

// identityRows are the study's identity as the DICOM header gives it.
function identityRows(st) {
  if (!st) return [];
  const when = [st.study_date, st.study_time].filter(Boolean).join(" ");
  return [["Patient", st.patient_name], ["Patient ID", st.patient_id ? st.patient_id + (st.issuer_of_patient_id ? ` (${st.issuer_of_patient_id})` : "") : ""],
    ["Born", st.patient_birth_date], ["Sex", st.patient_sex], ["Study date", when], ["Accession", st.accession_number],
    ["Study", st.study_description], ["Modality", st.modality], ["Study UID", st.study_instance_uid]].filter(([, v]) => v && v.trim && v.trim() !== "");
}

async function render(r) {
  $("#words").replaceChildren(...sentenceWords(r.words));
  const ident = $("#identity");
  const rows = identityRows(r.study);
  ident.replaceChildren(...rows.map(([k, v]) => {
    const div = document.createElement("div");
    const dt = document.createElement("dt"); dt.textContent = k;
    const dd = document.createElement("dd"); dd.textContent = v;
    div.append(dt, dd);
    return div;
  }));
  ident.classList.toggle("hidden", rows.length === 0);
  const warnings = [];
  if (r.truncated) {
    warnings.push(`This report was cut off at its maximum length (${r.tokens.length} tokens) before the model ended it: its last sentence may be incomplete.`);
  }
  if (state.model && state.model.trained_on && state.model.trained_on.synthetic) {
    warnings.push("Written by a model trained on synthetic films: not a reading of this study.");
  }
  $("#warnings").replaceChildren(...warnings.map((w) => {
    const p = document.createElement("p");
    p.className = "warning";
    p.textContent = w;
    return p;
  }));
  const meta = $("#meta");
  meta.replaceChildren();
  const metaRows = [["log-probability", r.log_prob.toFixed(3)], ["tokens", String(r.tokens.length)],
    ["model", `${r.model.name} ${r.model.checksum}`]];
  if (r.study_id) metaRows.unshift(["study", r.study_id]);
  for (const [k, v] of metaRows) {
    const dt = document.createElement("dt"); dt.textContent = k;
    const dd = document.createElement("dd"); dd.textContent = v;
    meta.append(dt, dd);
  }
  $("#fhir").disabled = !r.fhir;

  const views = $("#views");
  views.replaceChildren();
  const imgs = await Promise.all((r.views || []).map((v) => loadImage(v.png)));
  imgs.forEach((img, i) => {
    const s = DISPLAY / Math.max(img.naturalWidth, img.naturalHeight);
    const w = Math.max(1, Math.round(img.naturalWidth * s)), h = Math.max(1, Math.round(img.naturalHeight * s));
    const fig = document.createElement("figure");
    fig.className = "view";
    fig.style.width = w + "px"; // the film's width: no band beside a portrait film
    const stack = document.createElement("div");
    stack.className = "stack";
    const base = document.createElement("canvas");
    base.width = w; base.height = h; base.className = "img";
    base.getContext("2d").drawImage(img, 0, 0, w, h);
    const heat = document.createElement("canvas");
    heat.width = w; heat.height = h; heat.className = "heat";
    heat.dataset.view = i;
    stack.append(base, heat);
    const cap = document.createElement("figcaption");
    const v = r.views[i];
    cap.textContent = `view ${i + 1}: ${v.name} (${v.width}×${v.height})`;
    fig.append(stack, cap);
    if (v.dicom) fig.append(windowLevel(base));
    views.append(fig);
  });
  $("#result").classList.remove("hidden");
  show(-1);
}

// windowLevel adds window and level controls to a DICOM view: the
// displayed grey levels g (0-255, the file rendered with its own window)
// are mapped through (g - (level - width / 2)) / width, clamped, so a
// narrower window spreads the levels around the chosen one.
function windowLevel(canvas) {
  const ctx = canvas.getContext("2d");
  const orig = ctx.getImageData(0, 0, canvas.width, canvas.height);
  const box = document.createElement("div");
  box.className = "wl";
  const mk = (label, min, max, value) => {
    const l = document.createElement("label"); l.textContent = label;
    const input = document.createElement("input");
    input.type = "range"; input.min = min; input.max = max; input.value = value;
    input.setAttribute("aria-label", label);
    box.append(l, input);
    return input;
  };
  const width = mk("Window", 1, 255, 255);
  const level = mk("Level", 0, 255, 128);
  width.className = "wl-width"; level.className = "wl-level";
  const apply = () => {
    const W = Number(width.value), L = Number(level.value), lo = L - W / 2;
    const out = ctx.createImageData(orig.width, orig.height);
    for (let i = 0; i < orig.data.length; i += 4) {
      for (let c = 0; c < 3; c++) out.data[i + c] = Math.max(0, Math.min(255, Math.round((orig.data[i + c] - lo) / W * 255)));
      out.data[i + 3] = orig.data[i + 3];
    }
    ctx.putImageData(out, 0, 0);
  };
  width.addEventListener("input", apply);
  level.addEventListener("input", apply);
  const reset = document.createElement("button");
  reset.type = "button"; reset.textContent = "Reset window";
  reset.addEventListener("click", () => { width.value = 255; level.value = 128; ctx.putImageData(orig, 0, 0); });
  box.append(reset);
  return box;
}

function pin(t) {
  state.pinned = state.pinned === t ? -1 : t;
  document.querySelectorAll(".word").forEach((el) => el.classList.toggle("on", Number(el.dataset.t) === state.pinned));
  show(state.pinned);
}

// jet maps [0, 1] to the blue-to-red colour map of the legend.
function jet(x) {
  const c = (v) => Math.round(255 * Math.min(1, Math.max(0, v)));
  return [c(1.5 - Math.abs(4 * x - 3)), c(1.5 - Math.abs(4 * x - 2)), c(1.5 - Math.abs(4 * x - 1))];
}

// show draws token t's attention over every view (t < 0 clears it): the
// view's patch weights, normalised to [0, 1], upsampled bilinearly and
// blended at half opacity.
function show(t) {
  const r = state.report;
  const label = $("#current");
  const canvases = document.querySelectorAll("canvas.heat");
  if (!r || !r.attention || t < 0 || t >= r.attention.weights.length) {
    canvases.forEach((c) => c.getContext("2d").clearRect(0, 0, c.width, c.height));
    label.textContent = r && r.attention ? "(hover over a word)" : "";
    return;
  }
  label.textContent = `of “${r.words[t]}”`;
  const g = r.attention.grid, row = r.attention.weights[t];
  canvases.forEach((c) => {
    const v = Number(c.dataset.view);
    const w = row.slice(v * g * g, (v + 1) * g * g);
    let lo = Infinity, hi = -Infinity;
    for (const x of w) { lo = Math.min(lo, x); hi = Math.max(hi, x); }
    const span = hi - lo > 1e-12 ? hi - lo : 1;
    const ctx = c.getContext("2d");
    const out = ctx.createImageData(c.width, c.height);
    for (let y = 0; y < c.height; y++) {
      // Patch centres sit at (i + 0.5) / g of the image.
      const fy = Math.min(g - 1, Math.max(0, (y + 0.5) / c.height * g - 0.5));
      const y0 = Math.floor(fy), y1 = Math.min(g - 1, y0 + 1), ay = fy - y0;
      for (let x = 0; x < c.width; x++) {
        const fx = Math.min(g - 1, Math.max(0, (x + 0.5) / c.width * g - 0.5));
        const x0 = Math.floor(fx), x1 = Math.min(g - 1, x0 + 1), ax = fx - x0;
        const val = (w[y0 * g + x0] * (1 - ax) + w[y0 * g + x1] * ax) * (1 - ay) + (w[y1 * g + x0] * (1 - ax) + w[y1 * g + x1] * ax) * ay;
        const [cr, cg, cb] = jet((val - lo) / span);
        const i = 4 * (y * c.width + x);
        out.data[i] = cr; out.data[i + 1] = cg; out.data[i + 2] = cb; out.data[i + 3] = 128;
      }
    }
    ctx.putImageData(out, 0, 0);
  });
}

function downloadFHIR() {
  const r = state.report;
  if (!r || !r.fhir) return;
  const blob = new Blob([JSON.stringify(r.fhir, null, 2)], { type: "application/fhir+json" });
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = (r.study_id || "report").replace(/[^A-Za-z0-9._-]/g, "_") + ".fhir.json";
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

function init() {
  const drop = $("#drop");
  ["dragenter", "dragover"].forEach((ev) => drop.addEventListener(ev, (e) => { e.preventDefault(); drop.classList.add("over"); }));
  ["dragleave", "drop"].forEach((ev) => drop.addEventListener(ev, (e) => { e.preventDefault(); drop.classList.remove("over"); }));
  drop.addEventListener("drop", (e) => setFiles(e.dataTransfer.files));
  $("#files").addEventListener("change", (e) => setFiles(e.target.files));
  $("#again").addEventListener("click", generate);
  $("#fhir").addEventListener("click", downloadFHIR);
  $("#auth-form").addEventListener("submit", (e) => {
    e.preventDefault();
    state.token = $("#token").value.trim();
    sessionStorage.setItem("radgen-token", state.token);
    loadModel();
    if (state.files.length) generate();
  });
  loadModel();
}

init();
