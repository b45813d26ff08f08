// The problems view: one model's problems x settings, each cell a sample's state.
// Data files are scripts that call reprogridView.receive(id, payload) (script tags load from
// file:// where fetch() cannot), loaded on demand: the index, then one model's matrix, then a
// problem's texts when a cell is clicked, the model's paired counts when two settings are chosen.
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
    const gid = (h.setting && index.keys[h.setting]) || h.model || (index.groups[0] && index.groups[0].id);
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

  function pairOf(ka, kb) {
    return load(view.gid + "/pairs").then((pairs) => {
      const ia = pairs.keys.indexOf(ka), ib = pairs.keys.indexOf(kb);
      return {result: pairs.pairs[Math.min(ia, ib) + "," + Math.max(ia, ib)], swapped: ia > ib, options: pairs.options};
    });
  }

  function drawCompare() {
    const g = view.group;
    if (!view.a || !view.b || view.a === view.b) return Promise.resolve();
    // The paired test is stored once per pair, A the setting earlier in the grid's order.
    let [ka, kb] = [view.a, view.b];
    const ja = g.settings.findIndex((s) => s.key === ka), jb = g.settings.findIndex((s) => s.key === kb);
    if (ja > jb) [ka, kb] = [kb, ka];
    const sa = g.settings.find((s) => s.key === ka), sb = g.settings.find((s) => s.key === kb);
    const i = view.cell ? view.cell.i : (visibleRows(visibleColumns())[0] ?? 0);
    return Promise.all([pairOf(ka, kb), problemData(i)]).then(([pair, data]) => {
      const r = pair.result;
      const stats = !r ? "no paired result stored" : r.error ? "not comparable: " + esc(r.error) :
        "n = <b id=\"pair-n\">" + r.n + "</b> problems &middot; b (only A passes) = <b id=\"pair-b\">" + r.b + "</b> &middot; c (only B passes) = <b id=\"pair-c\">" + r.c +
        "</b> &middot; B &minus; A = <b id=\"pair-delta\">" + r.delta_pp.toFixed(2) + "</b> pp [" + r.ci_low_pp.toFixed(2) + ", " + r.ci_high_pp.toFixed(2) + "] &middot; " +
        esc(r.method) + " p = <b id=\"pair-p\">" + Number(r.p_value).toPrecision(3) + "</b> &middot; detectable &ge; " + r.mdd_pp.toFixed(1) + " pp" +
        " <span class=\"muted\">(" + pair.options.n_resamples + " resamples, " + Math.round(100 * pair.options.confidence) + "% interval)</span>";
      const pa = (data.byKey[ka] || []).find((x) => x.i === view.sample) || (data.byKey[ka] || [])[0];
      const pb = (data.byKey[kb] || []).find((x) => x.i === view.sample) || (data.byKey[kb] || [])[0];
      const text = (x) => (x ? data.texts[x.program] : "");
      $("compare").innerHTML = "<h2>Two settings &middot; " + esc(g.problems[i]) + "</h2>" +
        "<p>A <span class=\"sw\" style=\"border-color:#0072B2\">A</span>" + esc(sa.label) + " <span class=\"muted\">" + ka.slice(0, 12) + "</span> &middot; B <span class=\"sw\" style=\"border-color:#E69F00\">B</span>" +
        esc(sb.label) + " <span class=\"muted\">" + kb.slice(0, 12) + "</span> <span class=\"muted\">(A is the one earlier in the grid's order)</span></p>" +
        "<p id=\"pair-stats\">" + stats + "</p>" + diffTable(text(pa), text(pb));
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

  // select(task, key) and compare(keyA, keyB) return a promise of the drawn panel.
  window.reprogridView = {receive, state: view, select: selectCell, compare};
})();
