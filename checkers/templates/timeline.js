/* timeline.html: ops per lane over time. The data's shape is written by checkers/pages/optimeline.py. */
(() => {
  "use strict";
  const D = JSON.parse(document.getElementById("tl-data").textContent);
  const COLOUR = { ok: "#2a9d8f", fail: "#e76f51", info: "#e9c46a", open: "#e9c46a" };
  const OUTCOMES = ["ok", "fail", "info"];
  const FAULT_COLOURS = ["#adb5bd", "#cdb4db", "#a2d2ff", "#ffc8dd", "#bde0fe", "#ffafcc", "#d8e2dc"];
  const WITNESS = "#d62828";
  const DETAIL = 30000; // draw single ops when the window holds at most this many
  const KEEP = 24; // chunks kept in memory
  const GUTTER = 90; // px of lane labels
  const AXIS = 22; // px of the time axis
  const US = 1e6;

  const main = document.getElementById("main");
  const over = document.getElementById("overview");
  const tip = document.getElementById("tip");
  const statusEl = document.getElementById("status");
  const detailEl = document.getElementById("detail");

  const END = Math.max(D.end_us / US, 1e-3);
  const LANES = D.lanes.length;
  const ORDER = D.lanes.map((_, lane) => lane).sort((x, y) => D.lanes[x].first - D.lanes[y].first);
  const ROW = new Int32Array(LANES); // lanes are drawn in the order of their first process
  ORDER.forEach((lane, row) => { ROW[lane] = row; });
  const BIN = D.bins.width_us / US;
  const NBINS = D.bins.count;
  const witnessOps = new Set(D.witnesses.flatMap((w) => w.ops));
  const faultColour = {};
  D.faults.forEach((f) => {
    if (!(f.label in faultColour)) {
      faultColour[f.label] = FAULT_COLOURS[Object.keys(faultColour).length % FAULT_COLOURS.length];
    }
  });

  // Totals per bin (all lanes) and their prefix sums, to estimate how many ops a window holds.
  const totals = OUTCOMES.map(() => new Float64Array(NBINS));
  D.bins.lanes.forEach((lane) => lane.forEach((counts, o) => counts.forEach((c, b) => { totals[o][b] += c; })));
  const prefix = new Float64Array(NBINS + 1);
  for (let b = 0; b < NBINS; b++) prefix[b + 1] = prefix[b] + totals[0][b] + totals[1][b] + totals[2][b];

  const chunks = new Map(); // k -> {cols, used}
  const loading = new Set();
  const stats = { mode: "", drawn: 0, draws: 0, errors: 0 };
  let view = { a: 0, b: END };
  let cursor = null; // #t= time, drawn as a line
  let selected = null; // {kind: "op"|"nemesis", ...}
  let pendingOp = null; // #op= index still to find in the chunks
  let notice = ""; // shown instead of the window's summary until the next link is followed
  let tick = 0;
  let frame = 0;
  let rowH = 12;

  const clamp = (x, lo, hi) => Math.min(hi, Math.max(lo, x));
  const width = () => main.clientWidth;
  const X = (t) => GUTTER + ((t - view.a) / (view.b - view.a)) * (width() - GUTTER - 6);
  const T = (x) => view.a + ((x - GUTTER) / (width() - GUTTER - 6)) * (view.b - view.a);
  const laneY = (lane) => AXIS + (ROW[lane] + 1) * rowH; // row 0 is the nemesis

  function estimate(a, b) {
    const lo = clamp(Math.floor(a / BIN), 0, NBINS);
    const hi = clamp(Math.floor(b / BIN) + 1, 0, NBINS);
    return prefix[hi] - prefix[lo];
  }

  function needed(a, b) {
    const au = a * US, bu = b * US, out = [];
    D.chunks.forEach((c, k) => { if (c[0] <= bu && c[1] >= au) out.push(k); });
    return out;
  }

  function load(k) {
    if (chunks.has(k) || loading.has(k)) return;
    loading.add(k);
    const s = document.createElement("script");
    s.src = `${D.chunk_dir}/chunk-${String(k).padStart(5, "0")}.js`;
    s.onload = () => s.remove();
    s.onerror = () => {
      s.remove();
      loading.delete(k);
      stats.errors++;
      notice = `could not load ${s.src}`;
      schedule();
    };
    document.head.appendChild(s);
  }

  function evict(keep) {
    if (chunks.size <= KEEP) return;
    const old = [...chunks.entries()].filter(([k]) => !keep.includes(k)).sort((x, y) => x[1].used - y[1].used);
    for (const [k] of old.slice(0, chunks.size - KEEP)) chunks.delete(k);
  }

  function setView(a, b) {
    const span = clamp(b - a, 1e-4, END * 1.02);
    const mid = clamp((a + b) / 2, 0, END);
    view = { a: mid - span / 2, b: mid + span / 2 };
    schedule();
  }

  function schedule() {
    if (!frame) frame = requestAnimationFrame(draw);
  }

  function fit(canvas, cssHeight) {
    const r = window.devicePixelRatio || 1;
    canvas.style.height = `${cssHeight}px`;
    canvas.width = Math.round(canvas.clientWidth * r);
    canvas.height = Math.round(cssHeight * r);
    const ctx = canvas.getContext("2d");
    ctx.setTransform(r, 0, 0, r, 0, 0);
    ctx.clearRect(0, 0, canvas.clientWidth, cssHeight);
    return ctx;
  }

  function niceStep(span, count) {
    const raw = span / count, p = 10 ** Math.floor(Math.log10(raw));
    return [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw);
  }

  function faultBands(ctx, x, top, h) {
    for (const f of D.faults) {
      const x0 = x(f.start), x1 = Math.max(x(f.end), x0 + 2);
      ctx.fillStyle = faultColour[f.label];
      ctx.globalAlpha = 0.45;
      ctx.fillRect(x0, top, x1 - x0, h);
    }
    ctx.globalAlpha = 1;
  }

  function drawOverview() {
    const w = over.clientWidth, h = 70;
    const ctx = fit(over, h);
    const ox = (t) => (t / END) * w;
    faultBands(ctx, ox, 0, h);
    const cols = OUTCOMES.map(() => new Float64Array(w));
    for (let b = 0; b < NBINS; b++) {
      const c = Math.min(w - 1, Math.floor(ox(b * BIN)));
      for (let o = 0; o < 3; o++) cols[o][c] += totals[o][b];
    }
    let max = 1;
    for (let c = 0; c < w; c++) max = Math.max(max, cols[0][c] + cols[1][c] + cols[2][c]);
    for (let c = 0; c < w; c++) {
      let y = h;
      for (let o = 0; o < 3; o++) {
        const bar = (cols[o][c] / max) * (h - 4);
        if (bar <= 0) continue;
        ctx.fillStyle = COLOUR[OUTCOMES[o]];
        ctx.fillRect(c, y - bar, 1, bar);
        y -= bar;
      }
    }
    ctx.fillStyle = WITNESS;
    for (const wt of D.witnesses) if (wt.t !== null) ctx.fillRect(ox(wt.t) - 1, 0, 2, 10);
    ctx.fillStyle = "rgba(29,35,42,0.12)";
    const a = ox(view.a), b = ox(view.b);
    ctx.fillRect(0, 0, Math.max(0, a), h);
    ctx.fillRect(b, 0, Math.max(0, w - b), h);
    ctx.strokeStyle = "#1d232a";
    ctx.strokeRect(a, 0.5, Math.max(1, b - a), h - 1);
  }

  function drawAxis(ctx, w, h) {
    const step = niceStep(view.b - view.a, Math.max(2, Math.floor((w - GUTTER) / 110)));
    const digits = Math.max(0, -Math.floor(Math.log10(step)));
    ctx.fillStyle = "#667";
    ctx.strokeStyle = "#eef";
    ctx.font = "11px system-ui, sans-serif";
    for (let t = Math.ceil(view.a / step) * step; t <= view.b; t += step) {
      const x = X(t);
      ctx.fillText(`${t.toFixed(digits)} s`, x + 2, 14);
      ctx.beginPath();
      ctx.moveTo(x, AXIS - 4);
      ctx.lineTo(x, h);
      ctx.stroke();
    }
  }

  function drawLanes(ctx, w) {
    ctx.font = "11px system-ui, sans-serif";
    for (let r = 0; r <= LANES; r++) {
      const y = AXIS + r * rowH;
      if (r % 2 === 0) {
        ctx.fillStyle = "rgba(0,0,0,0.03)";
        ctx.fillRect(0, y, w, rowH);
      }
      if (rowH >= 9) {
        ctx.fillStyle = "#667";
        const lane = D.lanes[ORDER[r - 1]];
        const text = r === 0 ? "nemesis" : lane.label + (lane.processes > 1 ? ` (${lane.processes})` : "");
        ctx.fillText(text, 4, y + rowH - 2, GUTTER - 8);
      }
    }
  }

  // Many ops: per lane, per pixel column, a stacked bar of ok/fail/info counts.
  function drawAggregate(ctx, w) {
    const lo = clamp(Math.floor(view.a / BIN), 0, NBINS), hi = clamp(Math.ceil(view.b / BIN), 0, NBINS);
    const cols = Math.max(1, w - GUTTER);
    let max = 1;
    const sums = D.bins.lanes.map((lane) => {
      const s = OUTCOMES.map(() => new Float64Array(cols));
      for (let b = lo; b < hi; b++) {
        const x0 = clamp(X(b * BIN), GUTTER, w - 1), x1 = clamp(X((b + 1) * BIN), GUTTER, w);
        // a narrow bin adds to one pixel column; a wide one gives each of its columns its count
        for (let c = Math.floor(x0); c < Math.max(Math.floor(x0) + 1, Math.floor(x1)); c++) {
          for (let o = 0; o < 3; o++) s[o][c - GUTTER] += lane[o][b];
        }
      }
      for (let c = 0; c < cols; c++) max = Math.max(max, s[0][c] + s[1][c] + s[2][c]);
      return s;
    });
    let drawn = 0;
    sums.forEach((s, lane) => {
      const base = laneY(lane) + rowH - 1;
      for (let c = 0; c < cols; c++) {
        let y = base;
        for (let o = 0; o < 3; o++) {
          if (!s[o][c]) continue;
          const bar = Math.max(1, (s[o][c] / max) * (rowH - 2));
          ctx.fillStyle = COLOUR[OUTCOMES[o]];
          ctx.fillRect(GUTTER + c, y - bar, 1, bar);
          y -= bar;
          drawn++;
        }
      }
    });
    return drawn;
  }

  function visibleOps(ks, each) {
    const au = view.a * US, bu = view.b * US;
    for (const k of ks) {
      const cols = chunks.get(k).cols;
      for (let i = 0; i < cols.i.length; i++) {
        if (cols.b[i] >= au && cols.a[i] <= bu) each(cols, i);
      }
    }
  }

  function opBox(a, b, lane) {
    const x0 = X(a / US), x1 = Math.max(X(b / US), x0 + 1);
    return [x0, laneY(lane) + 1, x1 - x0, Math.max(1, rowH - 2)];
  }

  function drawOps(ctx, ks) {
    const paths = Object.fromEntries(D.types.map((t) => [t, new Path2D()]));
    const marked = [];
    let drawn = 0;
    visibleOps(ks, (cols, i) => {
      const box = opBox(cols.a[i], cols.b[i], cols.l[i]);
      paths[D.types[cols.y[i]]].rect(...box);
      if (witnessOps.has(cols.i[i]) || witnessOps.has(cols.j[i])) marked.push(box);
      drawn++;
    });
    for (const t of D.types) {
      ctx.fillStyle = COLOUR[t];
      ctx.fill(paths[t]);
    }
    ctx.strokeStyle = WITNESS;
    ctx.lineWidth = 2;
    for (const box of marked) ctx.strokeRect(box[0] - 1, box[1] - 1, box[2] + 2, box[3] + 2);
    ctx.lineWidth = 1;
    return drawn;
  }

  function drawNemesis(ctx) {
    for (const n of D.nemesis) {
      const x0 = X(n[2] / US), x1 = Math.max(X(n[3] / US), x0 + 2);
      ctx.fillStyle = COLOUR[n[5]];
      ctx.fillRect(x0, AXIS + 2, x1 - x0, rowH - 4);
      if (witnessOps.has(n[0]) || witnessOps.has(n[1])) {
        ctx.strokeStyle = WITNESS;
        ctx.strokeRect(x0 - 1, AXIS + 1, x1 - x0 + 2, rowH - 2);
      }
    }
  }

  function drawMarks(ctx, h) {
    ctx.fillStyle = WITNESS;
    for (const wt of D.witnesses) if (wt.t !== null) ctx.fillRect(X(wt.t) - 1, 0, 2, AXIS - 6);
    if (cursor !== null) {
      ctx.fillStyle = "#1565c0";
      ctx.fillRect(X(cursor) - 0.5, AXIS, 1, h - AXIS);
    }
    if (selected && selected.box) {
      ctx.strokeStyle = "#1565c0";
      ctx.lineWidth = 2;
      const [x, y, w, hh] = selected.box();
      ctx.strokeRect(x - 2, y - 2, w + 4, hh + 4);
      ctx.lineWidth = 1;
    }
  }

  function findPending(ks) {
    if (pendingOp === null || ks.some((k) => !chunks.has(k))) return;
    let hit = null;
    visibleOps(ks, (cols, i) => { if (cols.i[i] === pendingOp || cols.j[i] === pendingOp) hit = opRef(cols, i); });
    if (hit) {
      const half = (view.b - view.a) / 2, mid = (hit.t0 + hit.t1) / 2;
      select(hit);
      setView(mid - half, mid + half);
    } else {
      notice = `op ${pendingOp} is not a client op in this history`;
    }
    pendingOp = null;
  }

  function draw() {
    frame = 0;
    stats.draws++;
    drawOverview();
    rowH = clamp(Math.floor((window.innerHeight - 280) / (LANES + 1)), 4, 22);
    const h = AXIS + (LANES + 1) * rowH + 4;
    const ctx = fit(main, h);
    const w = main.clientWidth;
    drawLanes(ctx, w);
    drawAxis(ctx, w, h);
    ctx.save();
    ctx.beginPath();
    ctx.rect(GUTTER, 0, w - GUTTER, h);
    ctx.clip();
    faultBands(ctx, X, AXIS, h - AXIS);
    const ks = needed(view.a, view.b);
    const inChunks = ks.reduce((n, k) => n + D.chunks[k][2], 0);
    const few = estimate(view.a, view.b) <= DETAIL && inChunks <= 4 * DETAIL;
    if (few) {
      ks.forEach((k) => { if (chunks.has(k)) chunks.get(k).used = ++tick; else load(k); });
    }
    if (few && ks.every((k) => chunks.has(k))) {
      stats.mode = "ops";
      stats.drawn = drawOps(ctx, ks);
      findPending(ks);
    } else {
      stats.mode = few ? "loading" : "aggregate";
      stats.drawn = drawAggregate(ctx, w);
    }
    drawNemesis(ctx);
    drawMarks(ctx, h);
    ctx.restore();
    const more = { ops: "", loading: ", loading them…", aggregate: ", counted per time bin: zoom in to see each op" };
    statusEl.textContent = notice ||
      `${view.a.toFixed(3)} s – ${view.b.toFixed(3)} s: about ${Math.round(estimate(view.a, view.b))} ops${more[stats.mode]}`;
  }

  function opRef(cols, i) {
    const lane = cols.l[i], a = cols.a[i], b = cols.b[i];
    const f = D.fs[cols.f[i]], type = D.types[cols.y[i]];
    const node = cols.n[i] >= 0 ? D.nodes[cols.n[i]] : "-";
    const done = cols.j[i] >= 0 ? `→ #${cols.j[i]} at ${(b / US).toFixed(6)} s` : "(never completed)";
    const text = `#${cols.i[i]} process ${cols.p[i]} ${f} ${type}\ninvoked ${(a / US).toFixed(6)} s ${done}\n` +
      `latency ${((b - a) / 1000).toFixed(3)} ms, node ${node}\n${cols.v[i]}` +
      (witnessOps.has(cols.i[i]) || witnessOps.has(cols.j[i]) ? "\nWITNESS" : "");
    return { index: cols.i[i], t0: a / US, t1: b / US, text, box: () => opBox(a, b, lane) };
  }

  function nemesisRef(n) {
    const text = `#${n[0]} nemesis ${n[4]} ${n[5]}\n${(n[2] / US).toFixed(6)} s → ${(n[3] / US).toFixed(6)} s\n${n[6]}`;
    const box = () => { const x0 = X(n[2] / US); return [x0, AXIS + 2, Math.max(X(n[3] / US), x0 + 2) - x0, rowH - 4]; };
    return { index: n[0], t0: n[2] / US, t1: n[3] / US, text, box };
  }

  function hit(x, y) {
    const row = Math.floor((y - AXIS) / rowH);
    const tol = 3 * (view.b - view.a) / (width() - GUTTER);
    const t = T(x);
    let best = null, bestD = Infinity;
    const consider = (t0, t1, make) => {
      const d = t < t0 ? t0 - t : t > t1 ? t - t1 : 0;
      if (d <= tol && d < bestD) { bestD = d; best = make; }
    };
    if (row === 0) {
      for (const n of D.nemesis) consider(n[2] / US, n[3] / US, () => nemesisRef(n));
    } else if (stats.mode === "ops") {
      visibleOps(needed(view.a, view.b), (cols, i) => {
        if (cols.l[i] === ORDER[row - 1]) consider(cols.a[i] / US, cols.b[i] / US, () => opRef(cols, i));
      });
    }
    return best && best();
  }

  function select(ref) {
    selected = ref;
    detailEl.textContent = ref ? ref.text : "none";
    detailEl.classList.toggle("muted", !ref);
    schedule();
  }

  function zoom(factor, at) {
    const t = at === undefined ? (view.a + view.b) / 2 : at;
    setView(t - (t - view.a) * factor, t + (view.b - t) * factor);
  }

  // Centre on `t` with a window small enough to show single ops.
  function focus(t, atLeast = 0) {
    let span = Math.max(Math.min(view.b - view.a, 2), atLeast * 1.2);
    while (span > Math.max(1e-3, atLeast * 1.2) && estimate(t - span / 2, t + span / 2) > DETAIL / 2) span /= 2;
    setView(t - span / 2, t + span / 2);
  }

  function focusOp(index) {
    const n = D.nemesis.find((r) => r[0] === index || r[1] === index);
    if (n) {
      select(nemesisRef(n));
      focus(n[2] / US, (n[3] - n[2]) / US);
      return;
    }
    const s = D.samples;
    let lo = 0, hi = s.length - 1;
    if (!s.length || index > D.lines - 1 || index < 0) {
      notice = `op ${index} is not in this history`;
      return;
    }
    while (lo < hi) { const m = (lo + hi + 1) >> 1; if (s[m][0] <= index) lo = m; else hi = m - 1; }
    const t0 = s[lo][1] / US, t1 = lo + 1 < s.length ? s[lo + 1][1] / US : END;
    pendingOp = index;
    focus((t0 + t1) / 2, t1 - t0);
  }

  function fromHash() {
    const h = new URLSearchParams(location.hash.slice(1));
    notice = "";
    const t = parseFloat(h.get("t"));
    if (Number.isFinite(t)) {
      cursor = t;
      focus(t);
    }
    const op = parseInt(h.get("op"), 10);
    if (Number.isFinite(op)) focusOp(op);
    schedule();
  }

  // Interaction: wheel zooms, drag pans, click pins an op, the overview picks a window.
  let drag = null;
  main.addEventListener("wheel", (e) => {
    e.preventDefault();
    zoom(Math.exp(e.deltaY * 0.0015), T(e.offsetX));
  }, { passive: false });
  main.addEventListener("mousedown", (e) => { drag = { x: e.clientX, a: view.a, b: view.b, moved: false }; });
  window.addEventListener("mouseup", (e) => {
    if (drag && !drag.moved && e.target === main) select(hit(e.offsetX, e.offsetY));
    if (drag && !drag.moved && selected) history.replaceState(null, "", `#op=${selected.index}`);
    drag = null;
  });
  window.addEventListener("mousemove", (e) => {
    if (drag) {
      const dx = e.clientX - drag.x;
      if (Math.abs(dx) > 2) drag.moved = true;
      const dt = (dx / (width() - GUTTER)) * (drag.b - drag.a);
      setView(drag.a - dt, drag.b - dt);
      return;
    }
    if (e.target !== main) { tip.style.display = "none"; return; }
    const ref = hit(e.offsetX, e.offsetY);
    tip.style.display = ref ? "block" : "none";
    if (ref) {
      tip.textContent = ref.text;
      tip.style.left = `${e.clientX + 14}px`;
      tip.style.top = `${e.clientY + 14}px`;
    }
  });
  let pick = null;
  over.addEventListener("mousedown", (e) => { pick = e.offsetX; });
  over.addEventListener("mouseup", (e) => {
    if (pick === null) return;
    const w = over.clientWidth, t0 = (Math.min(pick, e.offsetX) / w) * END, t1 = (Math.max(pick, e.offsetX) / w) * END;
    if (Math.abs(e.offsetX - pick) < 3) {
      const span = view.b - view.a;
      setView(t0 - span / 2, t0 + span / 2);
    } else {
      setView(t0, t1);
    }
    pick = null;
  });
  document.getElementById("zoom-in").onclick = () => zoom(0.5);
  document.getElementById("zoom-out").onclick = () => zoom(2);
  document.getElementById("zoom-all").onclick = () => setView(0, END);
  window.addEventListener("keydown", (e) => {
    const span = view.b - view.a;
    const keys = { "+": () => zoom(0.5), "=": () => zoom(0.5), "-": () => zoom(2), 0: () => setView(0, END),
      ArrowLeft: () => setView(view.a - span / 4, view.b - span / 4),
      ArrowRight: () => setView(view.a + span / 4, view.b + span / 4) };
    if (keys[e.key]) { keys[e.key](); e.preventDefault(); }
  });
  document.querySelectorAll("#witnesses li[data-op]").forEach((li) => {
    li.addEventListener("click", () => {
      if (li.dataset.op !== "") location.hash = `op=${li.dataset.op}`;
      else if (li.dataset.t !== "") location.hash = `t=${li.dataset.t}`;
    });
  });
  const legend = document.getElementById("legend");
  for (const [label, colour] of Object.entries(faultColour)) {
    const span = document.createElement("span");
    span.innerHTML = `<span class="key" style="background:${colour}"></span>`;
    span.append(label);
    span.style.marginRight = "1rem";
    legend.append(span);
  }
  window.addEventListener("resize", schedule);
  window.addEventListener("hashchange", fromHash);

  window.TL = {
    chunk(k, cols) {
      loading.delete(k);
      chunks.set(k, { cols, used: ++tick });
      evict(needed(view.a, view.b));
      schedule();
    },
    status: () => ({ ...stats, a: view.a, b: view.b, loading: loading.size, loaded: chunks.size,
      selected: selected && selected.index }),
  };
  fromHash();
})();
