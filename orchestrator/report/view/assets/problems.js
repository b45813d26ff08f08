// The problems view: one model's problems x settings, each cell a sample's state.
// Data files are scripts that call reprogridView.receive(id, payload) (script tags load from
// file:// where fetch() cannot), loaded on demand: the index, then one model's matrix (named by
// its folder, data/<name>/), then a problem's texts when a cell is clicked. Two settings' paired
// counts are computed here from the matrix's cells (what `reprogrid compare` computes from the
// store); an interval is resampled only when asked for.
"use strict";
(function () {
  const STATES = {
    P: ["passed", "passed"], F: ["failed", "failed"], E: ["error", "error (could not run)"],
    T: ["timeout", "timeout"], R: ["truncated_prompt", "truncated prompt"],
    L: ["length_limit", "hit the length limit"], X: ["toolchain_missing", "toolchain missing"],
    N: ["not_executed", "not executed"],
  };
  const CODE_OF = {};
  Object.keys(STATES).forEach((c) => { CODE_OF[STATES[c][0]] = c; });
  const cache = {}, waiting = {};
  const view = {
    index: null, group: null, gid: null, allowed: {}, outcome: "", sort: "dataset", sample: 0,
    cell: null, a: null, b: null, focus: null, openedMs: null,
  };
  const $ = (id) => document.getElementById(id);
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]));

  function receive(id, data) {
    cache[id] = data;
    if (waiting[id]) { waiting[id].forEach((w) => w.resolve(data)); delete waiting[id]; }
    if (id === "index") start(data);
  }
  function load(id) {
    if (cache[id]) return Promise.resolve(cache[id]);
    return new Promise((resolve, reject) => {
      const first = !waiting[id];
      (waiting[id] = waiting[id] || []).push({resolve, reject});
      if (!first) return;
      const s = document.createElement("script");
      s.src = "data/" + id + ".js";
      s.charset = "utf-8";
      s.onerror = () => { (waiting[id] || []).forEach((w) => w.reject(new Error("cannot load " + s.src))); delete waiting[id]; };
      document.head.appendChild(s);
    });
  }

  function hashParams() {
    const out = {};
    location.hash.replace(/^#/, "").split("&").forEach((kv) => {
      const at = kv.indexOf("=");
      if (at > 0) out[decodeURIComponent(kv.slice(0, at))] = decodeURIComponent(kv.slice(at + 1));
    });
    return out;
  }

  function start(index) {
    view.index = index;
    $("meta").innerHTML = "Store <code>" + esc(index.store) + "</code> &middot; generated " + esc(index.generated_at) +
      " &middot; " + index.groups.length + " model(s)" + (index.report ? " &middot; <a href=\"" + esc(index.report) + "\">the report</a>" : "");
    $("model").innerHTML = index.groups.map((g) => "<option value=\"" + g.id + "\">" + esc(g.label) +
      " (" + g.n_settings + " settings)</option>").join("");
    $("outcome").innerHTML += Object.keys(STATES).map((c) => "<option value=\"" + c + "\">" + esc(STATES[c][1]) + "</option>").join("");
    $("model").onchange = () => openGroup($("model").value, null);
    $("sort").onchange = () => { view.sort = $("sort").value; drawBody(); };
    $("outcome").onchange = () => { view.outcome = $("outcome").value; drawBody(); };
    $("sample").onchange = () => { view.sample = Number($("sample").value); drawBody(); };
    $("cmp-a").onchange = () => choose("a", $("cmp-a").value || null);
    $("cmp-b").onchange = () => choose("b", $("cmp-b").value || null);
    $("matrix").addEventListener("click", onMatrixClick);
    const h = hashParams();
    // #model= names a model's folder, or the model (its label) itself
    const named = h.model && index.groups.find((g) => g.id === h.model || g.label === h.model || g.model === h.model);
    const gid = (h.setting && index.keys[h.setting]) || (named && named.id) || (index.groups[0] && index.groups[0].id);
    if (!gid) { $("meta").textContent = "This store holds no generated setting."; return; }
    openGroup(gid, h);
  }

  function openGroup(gid, h) {
    $("model").value = gid;
    return load(gid + "/matrix").then((group) => {
      view.group = group; view.gid = gid; view.cell = null; view.a = null; view.b = null; view.focus = null;
      view.allowed = {}; view.sample = 0;
      group.axes.forEach((a) => { view.allowed[a] = new Set(group.settings.map((s) => String(s.axes[a]))); });
      const maxN = Math.max(1, ...group.settings.map((s) => s.axes.n_samples));
      $("sample-box").hidden = maxN < 2;
      $("sample").innerHTML = Array.from({length: maxN}, (_, i) => "<option value=\"" + i + "\">" + i + "</option>").join("");
      drawFilters(); drawLegend();
      if (h && h.setting && group.settings.some((s) => s.key === h.setting)) { view.focus = h.setting; view.a = h.setting; }
      drawAll();
      if (view.focus) {
        const th = document.querySelector("#matrix thead th.key.focus");
        if (th) th.scrollIntoView({block: "nearest", inline: "center"});
      }
      if (h && h.problem && view.focus) selectCell(h.problem, view.focus);
      view.openedMs = performance.now();
      document.body.dataset.ready = gid;
    });
  }

  function drawFilters() {
    const g = view.group;
    $("filters").innerHTML = g.axes.map((a) => {
      const values = [...new Set(g.settings.map((s) => String(s.axes[a])))];
      return "<fieldset><legend>" + esc(a) + "</legend>" + values.map((v) =>
        "<label><input type=\"checkbox\" data-axis=\"" + esc(a) + "\" value=\"" + esc(v) + "\" checked> " + esc(v) + "</label>").join("") + "</fieldset>";
    }).join("");
    $("filters").querySelectorAll("input").forEach((box) => {
      box.onchange = () => {
        const set = view.allowed[box.dataset.axis];
        if (box.checked) set.add(box.value); else set.delete(box.value);
        drawAll();
      };
    });
  }

  function drawLegend() {
    const counts = {};
    view.group.cells.forEach((row) => { for (const ch of row) if (STATES[ch]) counts[ch] = (counts[ch] || 0) + 1; });
    $("legend").innerHTML = "<b>Cells:</b> " + Object.keys(STATES).map((c) =>
      "<span class=\"item\"><span class=\"sw s" + c + "\">" + c + "</span>" + esc(STATES[c][1]) +
      " <span class=\"muted\">(" + (counts[c] || 0) + ")</span></span>").join("") +
      "<span class=\"item\"><span class=\"sw s_\"></span>no sample</span>";
  }

  function visibleColumns() {
    const g = view.group, out = [];
    g.settings.forEach((s, j) => {
      if (g.axes.every((a) => view.allowed[a].has(String(s.axes[a])))) out.push(j);
    });
    return out;
  }

  function codesOf(i) { return view.group.cells[i].split(","); }
  function shown(code) { return code.length > 1 ? (code[view.sample] || "") : code; }

  function disagreement(codes, cols) {
    const rates = [];
    cols.forEach((j) => { const c = codes[j]; if (c) rates.push(c.split("P").length - 1 === 0 ? 0 : (c.split("P").length - 1) / c.length); });
    if (rates.length < 2) return 0;
    const mean = rates.reduce((x, y) => x + y, 0) / rates.length;
    return rates.reduce((x, r) => x + (r - mean) * (r - mean), 0) / rates.length;
  }

  function drawAll() { drawHead(); drawBody(); drawCompareChoices(); drawCompare(); }

  function colWidth(n) {
    const room = Math.max(400, document.documentElement.clientWidth - 60 - 150);
    return Math.max(18, Math.min(72, Math.floor(room / Math.max(1, n))));
  }

  function drawHead() {
    const g = view.group, cols = visibleColumns(), w = colWidth(cols.length);
    const axes = g.axes.length ? g.axes : ["template"];
    let html = "<tr><th class=\"corner\" rowspan=\"" + (axes.length) + "\" style=\"width:92px;top:0\">problem</th>" +
      "<th class=\"corner\" rowspan=\"" + axes.length + "\" style=\"width:44px;top:0;left:auto\" title=\"share of the shown settings that pass\">pass</th>";
    const rowH = 18;
    axes.forEach((a, r) => {
      if (r > 0) html += "<tr>";
      const last = r === axes.length - 1;
      let k = 0;
      while (k < cols.length) {
        const s = g.settings[cols[k]];
        const value = String(s.axes[a]);
        if (last) {
          const cls = "key" + (w < 40 ? " v" : "") + (s.key === view.focus ? " focus" : "") + (s.key === view.a ? " ca" : "") + (s.key === view.b ? " cb" : "");
          html += "<th class=\"" + cls + "\" data-s=\"" + s.key + "\" data-j=\"" + cols[k] + "\" style=\"width:" + w + "px;top:" + (r * rowH) +
            "px\" title=\"" + esc(s.label + " · " + s.key.slice(0, 12) + (s.pass_pct === null ? "" : " · " + s.pass_pct + "% passed") + " · click to compare") + "\">" + esc(value) + "</th>";
          k += 1; continue;
        }
        let span = 1;
        while (k + span < cols.length && sameUpTo(g.settings[cols[k + span]], s, axes, r)) span += 1;
        html += "<th class=\"ax\" colspan=\"" + span + "\" style=\"top:" + (r * rowH) + "px;height:" + (rowH - 2) + "px\" title=\"" + esc(a + ": " + value) + "\">" + esc(value) + "</th>";
        k += span;
      }
      html += "</tr>";
    });
    $("matrix").querySelector("thead").innerHTML = html;
  }
  function sameUpTo(x, y, axes, r) { for (let q = 0; q <= r; q++) if (String(x.axes[axes[q]]) !== String(y.axes[axes[q]])) return false; return true; }

  function visibleRows(cols) {
    const g = view.group;
    let rows = g.problems.map((_, i) => i);
    if (view.outcome) rows = rows.filter((i) => { const c = codesOf(i); return cols.some((j) => shown(c[j]) === view.outcome); });
    if (view.sort === "disagreement") {
      const d = {};
      rows.forEach((i) => { d[i] = disagreement(codesOf(i), cols); });
      rows.sort((x, y) => (d[y] - d[x]) || (x - y));
    }
    return rows;
  }

  function drawBody() {
    const g = view.group, cols = visibleColumns(), rows = visibleRows(cols);
    const parts = [];
    rows.forEach((i) => {
      const c = codesOf(i);
      let pass = 0, held = 0;
      cols.forEach((j) => { if (c[j]) { held += 1; pass += (c[j].split("P").length - 1) / c[j].length; } });
      let html = "<tr data-i=\"" + i + "\" data-p=\"" + esc(g.problems[i]) + "\"><th>" + esc(g.problems[i]) + "</th><td class=\"share\">" +
        (held ? pass.toFixed(0) + "/" + held : "") + "</td>";
      cols.forEach((j) => {
        const code = shown(c[j]);
        const sel = view.cell && view.cell.i === i && view.cell.j === j ? " sel" : "";
        const mark = g.settings[j].key === view.focus ? " focus" : "";
        html += "<td class=\"c s" + (code || "_") + sel + mark + "\" data-j=\"" + j + "\">" + code + "</td>";
      });
      parts.push(html + "</tr>");
    });
    $("matrix").querySelector("tbody").innerHTML = parts.join("");
    $("count").textContent = rows.length + " of " + g.problems.length + " problems, " + cols.length + " of " + g.settings.length + " settings";
  }

  function onMatrixClick(ev) {
    const td = ev.target.closest("td.c"), th = ev.target.closest("th.key");
    if (td) {
      const i = Number(td.parentNode.dataset.i), j = Number(td.dataset.j);
      selectCell(view.group.problems[i], view.group.settings[j].key);
    } else if (th) {
      const key = th.dataset.s;
      // The first pick is A, the second B; a third starts again with A.
      if (!view.a) { if (key !== view.b) view.a = key; } else if (!view.b) { if (key !== view.a) view.b = key; } else { view.a = key; view.b = null; }
      markAB(); drawCompareChoices(); drawCompare();
    }
  }

  function selectCell(task, key) {
    const g = view.group, i = g.problems.indexOf(task), j = g.settings.findIndex((s) => s.key === key);
    if (i < 0 || j < 0) return Promise.resolve();
    view.cell = {i, j};
    document.querySelectorAll("#matrix td.sel").forEach((x) => x.classList.remove("sel"));
    const row = document.querySelector("#matrix tbody tr[data-i=\"" + i + "\"]");
    const td = row && row.querySelector("td[data-j=\"" + j + "\"]");
    if (td) td.classList.add("sel");
    return Promise.all([drawDetail(i, j), drawCompare()]);
  }

  // A problem file holds consecutive problems (the matrix's problem_files lists the first of
  // each), and a problem a row of values per sample (named once, in data.fields), its setting
  // as a column of the model's matrix: turned back into {setting key: [sample, ...]} once.
  function problemData(i) {
    const gid = view.gid, group = cache[gid + "/matrix"];
    let first = 0;
    for (const start of group.problem_files) { if (start <= i) first = start; else break; }
    return load(gid + "/p/" + first).then((file) => {
      const data = file.problems[i - file.first];
      if (!data.byKey) {
        const byKey = {};
        data.samples.forEach((row) => {
          const sample = {};
          data.fields.forEach((field, n) => { sample[field] = row[n]; });
          const key = group.settings[sample.setting].key;
          (byKey[key] = byKey[key] || []).push(sample);
        });
        data.byKey = byKey;
      }
      return data;
    });
  }

  function drawDetail(i, j) {
    const g = view.group, s = g.settings[j], task = g.problems[i];
    $("detail").innerHTML = "<h2>Sample</h2><p class=\"muted\">Loading " + esc(task) + "&hellip;</p>";
    return problemData(i).then((data) => {
      const samples = data.byKey[s.key] || [];
      const sample = samples.find((x) => x.i === view.sample) || samples[0];
      if (!sample) { $("detail").innerHTML = "<h2>Sample</h2><p class=\"muted\">" + esc(s.label) + " holds no sample of " + esc(task) + ".</p>"; return; }
      const t = (k) => (k === null || k === undefined ? "" : data.texts[k]);
      const code = CODE_OF[sample.state] || "_";
      const err = sample.error_type || sample.error_message ? "<div class=\"err\" id=\"detail-error\">" + esc(sample.error_type || "") +
        (sample.error_message !== null && sample.error_message !== undefined ? ": " + esc(t(sample.error_message)) : "") + "</div>" : "<div id=\"detail-error\" class=\"muted\">no error recorded</div>";
      // the harness's prompt slicing cut this continuation (orchestrator/report/tables/mismatch.py)
      const cut = sample.decode_mismatch ? "<div class=\"warn\" id=\"detail-mismatch\"><b>Decode mismatch:</b> the harness's prompt slicing " +
        "cut this continuation in the wrong place: the decoded text does not start with the prompt (e.g. a BOS token that is also the " +
        "template's text was dropped), so characters of the continuation are lost. See docs/report.md, &ldquo;Decode mismatch&rdquo;.</div>" : "";
      $("detail").innerHTML = "<h2>" + esc(task) + " &middot; " + esc(s.label) + " <span class=\"muted\">" + esc(s.key.slice(0, 12)) +
        " &middot; sample " + sample.i + " of " + samples.length + "</span></h2>" +
        "<p><span class=\"sw s" + code + "\">" + code + "</span> <b id=\"detail-state\">" + esc(STATES[code] ? STATES[code][1] : sample.state) + "</b>" +
        " <span class=\"muted\">outcome " + esc(sample.outcome || "none") + " &middot; " + (sample.n_prompt_tokens ?? "?") + " prompt tokens, " + (sample.n_output_tokens ?? "?") + " output tokens</span></p>" + err + cut +
        "<div class=\"texts\"><div><h3>Prompt</h3><pre id=\"detail-prompt\">" + esc(t(sample.prompt)) + "</pre></div>" +
        "<div><h3>Raw continuation</h3><pre id=\"detail-continuation\">" + esc(t(sample.continuation)) + "</pre></div>" +
        "<div><h3>Program (post-processed, as tested)</h3><pre id=\"detail-program\">" + esc(t(sample.program)) + "</pre></div></div>";
    });
  }

  function drawCompareChoices() {
    const g = view.group, opts = "<option value=\"\">(none)</option>" + g.settings.map((s) =>
      "<option value=\"" + s.key + "\">" + esc(s.label) + " · " + s.key.slice(0, 8) + "</option>").join("");
    $("cmp-a").innerHTML = opts; $("cmp-b").innerHTML = opts;
    $("cmp-a").value = view.a || ""; $("cmp-b").value = view.b || "";
  }

  // Only the marks of A and B change: redrawing the matrix would cost more than the comparison.
  function markAB() {
    document.querySelectorAll("#matrix thead th.key").forEach((th) => {
      th.classList.toggle("ca", th.dataset.s === view.a);
      th.classList.toggle("cb", th.dataset.s === view.b);
    });
  }
  function choose(which, key) { view[which] = key; markAB(); return drawCompare(); }
  function compare(a, b) { view.a = a; view.b = b; drawCompareChoices(); markAB(); return drawCompare(); }

  // Each setting's outcome on problem i: its passing samples of its samples (a cell's P codes,
  // or the count the matrix lists in `passing`: a truncated prompt's sample that passed), or
  // null where it holds no sample.
  function outcome(g, i, j) {
    const code = g.cells[i].split(",")[j];
    if (!code) return null;
    if (!g.passingAt) { g.passingAt = {}; (g.passing || []).forEach(([p, s, k]) => { g.passingAt[p + "," + s] = k; }); }
    const listed = g.passingAt[i + "," + j];
    return {k: listed === undefined ? code.split("P").length - 1 : listed, n: code.length};
  }
  function some(names) { return names.length ? names.slice(0, 3).join(", ") + (names.length > 3 ? ", ..." : "") : "none"; }

  // B compared with A on the problems both hold, as orchestrator/analysis/paired.py computes it:
  // d = B's pass rate minus A's per problem; b problems where A does better, c where B does.
  function pairStats(g, ja, jb) {
    const onlyA = [], onlyB = [], d = [];
    let binary = true;
    g.problems.forEach((task, i) => {
      const a = outcome(g, i, ja), b = outcome(g, i, jb);
      if (a && !b) onlyA.push(task); else if (b && !a) onlyB.push(task);
      else if (a && b) { d.push(b.k / b.n - a.k / a.n); binary = binary && a.n === 1 && b.n === 1; }
    });
    if (onlyA.length || onlyB.length) {
      onlyA.sort(); onlyB.sort();
      return {error: "the settings hold different problems: " + onlyA.length + " only in A (" + some(onlyA) + "), " + onlyB.length + " only in B (" + some(onlyB) + ")"};
    }
    if (!d.length) return {error: "no problem holds samples of both"};
    let b = 0, c = 0, sum = 0, squares = 0;
    d.forEach((x) => { if (x < 0) b += 1; else if (x > 0) c += 1; sum += x; squares += x * x; });
    const n = d.length;
    return {n, b, c, d, binary, delta_pp: 100 * (sum / n), p: binary ? mcnemarP(b, c) : null, mdd_pp: mddPp(squares / n, n)};
  }

  // The exact two-sided McNemar p: 2 P(X <= min(b, c)) for X ~ Binomial(b + c, 1/2), at most 1,
  // in exact integers, then the double nearest to it (what `compare` prints).
  function mcnemarP(b, c) {
    const m = b + c, low = Math.min(b, c);
    if (m === 0) return 1;
    let term = 1n, tail = 0n;
    for (let k = 0; k <= low; k++) {
      if (k > 0) term = term * BigInt(m - k + 1) / BigInt(k);
      tail += term;
    }
    const num = 2n * tail, den = 1n << BigInt(m);
    return num >= den ? 1 : nearest(num, den);
  }
  // num / den (0 < num < den) rounded once: 64 bits of the quotient and a sticky bit for the rest,
  // rounded to a double by Number(), then scaled by powers of two (exact while it is normal).
  function nearest(num, den) {
    const shift = den.toString(2).length - num.toString(2).length + 64;
    const scaled = num << BigInt(shift);
    let q = scaled / den;
    if (q * den !== scaled) q |= 1n;
    const half = Math.floor(shift / 2);
    return Number(q) * Math.pow(2, -half) * Math.pow(2, -(shift - half));
  }
  // the minimum detectable difference at 80% power, two-sided alpha 0.05 (minimum_detectable_pp)
  const Z_MDD = 2.801585218112968;
  function mddPp(secondMoment, n) { return 100 * Z_MDD * Math.sqrt(Math.max(secondMoment, 1 / n) / n); }

  // The page's own resampling, on request: seeded (mulberry32), never the report's draws.
  function generator(seed) {
    let a = seed >>> 0;
    return () => {
      a = (a + 0x6D2B79F5) >>> 0;
      let t = Math.imul(a ^ (a >>> 15), a | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }
  // numpy.quantile's `linear` method over sorted values
  function quantile(sorted, level) {
    const h = (sorted.length - 1) * level, f = Math.floor(h), t = h - f;
    const lo = sorted[f], hi = sorted[Math.min(f + 1, sorted.length - 1)];
    return t >= 0.5 ? hi - (hi - lo) * (1 - t) : lo + (hi - lo) * t;
  }
  function resampled(stats, options) {
    const d = stats.d, n = d.length, R = options.n_resamples, next = generator(options.seed);
    const means = new Float64Array(R);
    for (let r = 0; r < R; r++) {
      let s = 0;
      for (let k = 0; k < n; k++) s += d[Math.floor(next() * n)];
      means[r] = s / n;
    }
    means.sort();
    const out = {low: 100 * quantile(means, (1 - options.confidence) / 2), high: 100 * quantile(means, (1 + options.confidence) / 2)};
    if (!stats.binary) Object.assign(out, signFlip(d, R, next));
    return out;
  }
  // two-sided sign-flip permutation p of sum(d): every sign pattern of the nonzero differences
  // when they are at most R, else R random patterns with the +1 correction (paired.py)
  function signFlip(d, R, next) {
    const nonzero = d.filter((x) => x !== 0), m = nonzero.length;
    if (m === 0) return {p: 1, exhaustive: true};
    const observed = nonzero.reduce((x, y) => x + y, 0);
    const tol = 4 * d.length * Number.EPSILON * nonzero.reduce((x, y) => x + Math.abs(y), 0);
    let less = 0, greater = 0, total = 0;
    const count = (s) => { if (s <= observed + tol) less += 1; if (s >= observed - tol) greater += 1; total += 1; };
    const exhaustive = Math.pow(2, m) <= R;
    if (exhaustive) {
      for (let pattern = 0; pattern < Math.pow(2, m); pattern++) {
        let s = 0;
        for (let k = 0; k < m; k++) s += (pattern >> k) & 1 ? -nonzero[k] : nonzero[k];
        count(s);
      }
      return {p: Math.min(1, 2 * Math.min(less, greater) / total), exhaustive};
    }
    for (let r = 0; r < R; r++) {
      let s = 0;
      for (let k = 0; k < m; k++) s += next() < 0.5 ? -nonzero[k] : nonzero[k];
      count(s);
    }
    return {p: Math.min(1, 2 * Math.min((less + 1) / (total + 1), (greater + 1) / (total + 1))), exhaustive};
  }

  function statsText(r, sa, sb) {
    if (r.error) return "not comparable: " + esc(r.error);
    const unit = r.binary ? ["only A passes", "only B passes"] : ["A scores higher", "B scores higher"];
    const test = r.binary
      ? " &middot; exact McNemar p = <b id=\"pair-p\" data-p=\"" + r.p + "\">" + Number(r.p).toPrecision(3) + "</b>"
      : " &middot; <span class=\"muted\">B &minus; A is the mean over problems of each side's pass rate (passing samples / samples)</span>";
    return "n = <b id=\"pair-n\">" + r.n + "</b> problems &middot; b (" + unit[0] + ") = <b id=\"pair-b\">" + r.b + "</b> &middot; c (" + unit[1] + ") = <b id=\"pair-c\">" + r.c +
      "</b> &middot; B &minus; A = <b id=\"pair-delta\" data-pp=\"" + r.delta_pp + "\">" + r.delta_pp.toFixed(2) + "</b> pp" + test +
      " &middot; detectable &ge; <span id=\"pair-mdd\" data-pp=\"" + r.mdd_pp + "\">" + r.mdd_pp.toFixed(1) + "</span> pp" +
      "<br><button type=\"button\" id=\"pair-resample\">" + (r.binary ? "Interval" : "Interval and sign-flip p") + "</button> <span id=\"pair-resampled\" class=\"muted\"></span>" +
      "<br><span class=\"muted\">The report's numbers: <code>reprogrid compare " + sa.key.slice(0, 12) + " " + sb.key.slice(0, 12) + "</code>.</span>";
  }

  function resampleOnRequest(r) {
    const options = view.index.resampling;
    const x = resampled(r, options);
    const p = r.binary ? "" : " &middot; sign-flip permutation p = <b id=\"pair-perm-p\" data-p=\"" + x.p + "\">" + Number(x.p).toPrecision(3) + "</b>" + (x.exhaustive ? " (every sign pattern)" : "");
    $("pair-resampled").innerHTML = "B &minus; A " + Math.round(100 * options.confidence) + "% interval <b id=\"pair-interval\">[" + x.low.toFixed(2) + ", " + x.high.toFixed(2) + "]</b> pp" + p +
      " (the page's own resampling: " + options.n_resamples + " draws, seed " + options.seed + "; <code>reprogrid compare</code> draws its own)";
  }

  function drawCompare() {
    const g = view.group;
    if (!view.a || !view.b || view.a === view.b) return Promise.resolve();
    const ka = view.a, kb = view.b;
    const ja = g.settings.findIndex((s) => s.key === ka), jb = g.settings.findIndex((s) => s.key === kb);
    const sa = g.settings[ja], sb = g.settings[jb];
    const stats = pairStats(g, ja, jb);
    const i = view.cell ? view.cell.i : (visibleRows(visibleColumns())[0] ?? 0);
    return problemData(i).then((data) => {
      const pa = (data.byKey[ka] || []).find((x) => x.i === view.sample) || (data.byKey[ka] || [])[0];
      const pb = (data.byKey[kb] || []).find((x) => x.i === view.sample) || (data.byKey[kb] || [])[0];
      const text = (x) => (x ? data.texts[x.program] : "");
      $("compare").innerHTML = "<h2>Two settings &middot; " + esc(g.problems[i]) + "</h2>" +
        "<p>A <span class=\"sw\" style=\"border-color:#0072B2\">A</span>" + esc(sa.label) + " <span class=\"muted\">" + ka.slice(0, 12) + "</span> &middot; B <span class=\"sw\" style=\"border-color:#E69F00\">B</span>" +
        esc(sb.label) + " <span class=\"muted\">" + kb.slice(0, 12) + "</span></p>" +
        "<p id=\"pair-stats\" data-a=\"" + ka + "\" data-b=\"" + kb + "\">" + statsText(stats, sa, sb) + "</p>" + diffTable(text(pa), text(pb));
      const button = $("pair-resample");
      if (button) button.onclick = () => resampleOnRequest(stats);
    });
  }

  function lineDiff(a, b) {
    // Longest common subsequence of lines; ops in order: ["=", i, j], ["-", i], ["+", j].
    const n = a.length, m = b.length, L = Array.from({length: n + 1}, () => new Int32Array(m + 1));
    for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) L[i][j] = a[i] === b[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
    const ops = []; let i = 0, j = 0;
    while (i < n && j < m) {
      if (a[i] === b[j]) { ops.push(["=", i++, j++]); } else if (L[i + 1][j] >= L[i][j + 1]) ops.push(["-", i++]); else ops.push(["+", j++]);
    }
    while (i < n) ops.push(["-", i++]);
    while (j < m) ops.push(["+", j++]);
    return ops;
  }

  function diffTable(pa, pb) {
    const lines = (t) => { const out = t.split("\n"); if (out.length > 1 && out[out.length - 1] === "") out.pop(); return out; };
    const a = lines(pa), b = lines(pb), ops = lineDiff(a, b), rows = [];
    let k = 0;
    while (k < ops.length) {
      if (ops[k][0] === "=") { rows.push([ops[k][1], "same", ops[k][2], "same"]); k++; continue; }
      const dels = [], adds = [];
      while (k < ops.length && ops[k][0] !== "=") { (ops[k][0] === "-" ? dels : adds).push(ops[k][1]); k++; }
      for (let q = 0; q < Math.max(dels.length, adds.length); q++) {
        rows.push([q < dels.length ? dels[q] : null, "del", q < adds.length ? adds[q] : null, "add"]);
      }
    }
    const cell = (lines, at, cls) => at === null ? "<td class=\"ln\"></td><td class=\"gap\"></td>" :
      "<td class=\"ln\">" + (at + 1) + "</td><td class=\"" + cls + "\">" + esc(lines[at]) + "</td>";
    const same = ops.every((o) => o[0] === "=");
    return "<div class=\"sides\"><h3>Programs, A left, B right" + (same ? " (identical)" : "") + "</h3><table id=\"diff\"><colgroup><col class=\"n\"><col><col class=\"n\"><col></colgroup>" +
      rows.map((r) => "<tr>" + cell(a, r[0], r[1]) + cell(b, r[2], r[3]) + "</tr>").join("") + "</table></div>";
  }

  // select(task, key) and compare(keyA, keyB) return a promise of the drawn panel; pair(keyA,
  // keyB) the paired counts of two settings of the open model.
  function pair(ka, kb) {
    const g = view.group;
    return pairStats(g, g.settings.findIndex((s) => s.key === ka), g.settings.findIndex((s) => s.key === kb));
  }
  window.reprogridView = {receive, state: view, select: selectCell, compare, pair};
})();
