/* The runs page (runs.html): every run of the store from runs-data.js (results/report/run_list.py: each
   field's values once, a row of indexes per run, newest first), filtered by recipe, size, backend, hardware,
   schedule, status and nights, searched by text (a quarantined run also by "quarantined"), and shown
   PAGE_SIZE rows at a time, so that 100,000 runs stay quick. The filters live in the address
   (runs.html#backend=maxtext&status=oom), so a filtered list can be linked and survives the back button.
   tests/results/test_dashboard_demo_browser.py drives it. */
(function () {
  "use strict";

  var PAGE_SIZE = 100;
  var data = window.jaxbenchRuns;
  var form = document.getElementById("run-filters");
  var body = document.querySelector("#run-table tbody");
  var count = document.getElementById("run-count");
  var pager = document.getElementById("run-pager");
  if (!data || !form || !body) return;

  var column = {};
  data.fields.forEach(function (name, i) { column[name] = i; });
  var SELECTS = ["recipe", "size", "backend", "hardware", "schedule", "status"];
  var VALUED = data.fields.filter(function (name) { return data.values[name]; }); // text, not a flag
  var haystacks = null; // the lower-case text of each row, made on the first search
  var page = 0, pages = 1; // the page shown, and how many the last render() found

  function value(row, field) { return data.values[field][row[column[field]]]; }

  /* Each select lists its field's values; render() writes beside each how many runs it would show with the
     other filters as they are (so the counts narrow as filters are chosen). */
  var options = {}; // field -> the <option> of each value index
  SELECTS.forEach(function (field) {
    var select = form.elements[field];
    options[field] = [];
    data.values[field]
      .map(function (text, i) { return { text: text, i: i }; })
      .sort(function (a, b) { return a.text < b.text ? -1 : a.text > b.text ? 1 : 0; })
      .forEach(function (v) {
        var option = document.createElement("option");
        option.value = v.text;
        options[field][v.i] = option;
        select.appendChild(option);
      });
  });

  function state() {
    var s = { q: form.elements.q.value.trim().toLowerCase(), from: form.elements.from.value,
      to: form.elements.to.value };
    SELECTS.forEach(function (field) { s[field] = form.elements[field].value; });
    return s;
  }

  function haystack(i) {
    if (!haystacks) {
      haystacks = data.rows.map(function (row) {
        var texts = [row[0]].concat(VALUED.map(function (f) { return value(row, f); }));
        if (row[column.quarantined]) texts.push("quarantined");
        return texts.join(" ").toLowerCase();
      });
    }
    return haystacks[i];
  }

  /* The rows that pass every filter, and per select the count of each of its values among the rows that
     pass every other filter: one pass, since a row failing exactly one select counts for that select only. */
  function matching(s) {
    var wanted = {}; // field -> index of the chosen value
    SELECTS.forEach(function (field) {
      if (s[field] !== "") wanted[field] = data.values[field].indexOf(s[field]);
    });
    var fields = Object.keys(wanted), terms = s.q ? s.q.split(/\s+/) : [];
    var nights = data.values.night, at = column.night;
    var counts = {};
    SELECTS.forEach(function (field) { counts[field] = data.values[field].map(function () { return 0; }); });
    var found = [];
    for (var i = 0; i < data.rows.length; i++) {
      var row = data.rows[i], keep = true;
      if (s.from) keep = nights[row[at]] >= s.from;
      if (keep && s.to) keep = nights[row[at]] <= s.to;
      for (var t = 0; t < terms.length && keep; t++) keep = haystack(i).indexOf(terms[t]) >= 0;
      if (!keep) continue;
      var failed = null, fails = 0;
      for (var f = 0; f < fields.length && fails < 2; f++) {
        if (row[column[fields[f]]] !== wanted[fields[f]]) { failed = fields[f]; fails += 1; }
      }
      if (fails === 1) counts[failed][row[column[failed]]] += 1;
      if (fails > 0) continue;
      SELECTS.forEach(function (field) { counts[field][row[column[field]]] += 1; });
      found.push(row);
    }
    return { rows: found, counts: counts };
  }

  function label(counts) {
    SELECTS.forEach(function (field) {
      options[field].forEach(function (option, i) {
        option.textContent = (data.values[field][i] || "(none)") + " (" + counts[field][i] + ")";
      });
    });
  }

  function cell(tr, text, className) {
    var td = document.createElement("td");
    td.textContent = text;
    if (className) td.className = className;
    tr.appendChild(td);
    return td;
  }

  function render() {
    var s = state(), found = matching(s), rows = found.rows;
    label(found.counts);
    pages = Math.max(1, Math.ceil(rows.length / PAGE_SIZE));
    page = Math.min(Math.max(page, 0), pages - 1);
    var shown = rows.slice(page * PAGE_SIZE, (page + 1) * PAGE_SIZE);
    var fragment = document.createDocumentFragment();
    shown.forEach(function (row) {
      var tr = document.createElement("tr"), id = row[0];
      var first = cell(tr, "", "num");
      if (row[column.page]) {
        var a = document.createElement("a");
        a.href = "runs/" + id + ".html";
        a.className = "run";
        a.textContent = id;
        first.appendChild(a);
      } else {
        first.textContent = id;
        first.title = "older than the newest nights: no page of its own";
      }
      cell(tr, value(row, "night"), "night");
      // A microbenchmark's parameters are long: named in full on hover (and searched), shown without.
      var benchmark = value(row, "benchmark"), short = benchmark.replace(/\[[^\]]*\]/g, "");
      cell(tr, short, "bench").title = short === benchmark ? "" : benchmark;
      cell(tr, value(row, "recipe"));
      cell(tr, value(row, "size") || "-");
      cell(tr, value(row, "backend"));
      cell(tr, value(row, "hardware"), "hw");
      cell(tr, value(row, "schedule"));
      var status = value(row, "status"), td = cell(tr, "");
      var badge = document.createElement("span");
      badge.className = "state " + (status === "ok" ? "s-ok" : "s-invalid");
      badge.textContent = status;
      td.appendChild(badge);
      if (row[column.quarantined]) {
        // Out of every judgement by a person's decision (jaxbench runs release brings it back).
        tr.className = "quarantined";
        var mark = document.createElement("span");
        mark.className = "state s-quarantined";
        mark.textContent = "quarantined";
        mark.title = "left out of every judgement and chart: jaxbench runs release " + id + " brings it back";
        td.appendChild(document.createTextNode(" "));
        td.appendChild(mark);
      }
      fragment.appendChild(tr);
    });
    body.replaceChildren(fragment);
    var total = data.rows.length.toLocaleString("en-US");
    count.textContent = rows.length === 0 ? "No run matches (of " + total + " runs)." :
      "Runs " + (page * PAGE_SIZE + 1).toLocaleString("en-US") + "–" +
      (page * PAGE_SIZE + shown.length).toLocaleString("en-US") + " of " +
      rows.length.toLocaleString("en-US") + (rows.length === data.rows.length ? "" : " matching (of " +
      total + ")") + ".";
    pager.querySelector(".page-of").textContent = "page " + (page + 1) + " of " + pages;
    pager.querySelectorAll("button").forEach(function (b) {
      var back = b.dataset.page === "first" || b.dataset.page === "previous";
      b.disabled = back ? page === 0 : page >= pages - 1;
    });
  }

  /* The address holds what is chosen: "#backend=maxtext&status=oom&page=2". */
  function save() {
    var s = state(), parts = [];
    Object.keys(s).forEach(function (k) {
      var v = k === "q" ? form.elements.q.value.trim() : s[k];
      if (v) parts.push(encodeURIComponent(k) + "=" + encodeURIComponent(v));
    });
    if (page > 0) parts.push("page=" + (page + 1));
    history.replaceState(null, "", parts.length ? "#" + parts.join("&") : location.pathname);
  }

  function load() {
    var chosen = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (part) {
      var kv = part.split("=");
      if (kv[0]) chosen[decodeURIComponent(kv[0])] = decodeURIComponent(kv.slice(1).join("="));
    });
    SELECTS.concat(["from", "to", "q"]).forEach(function (k) { form.elements[k].value = chosen[k] || ""; });
    page = chosen.page ? parseInt(chosen.page, 10) - 1 || 0 : 0;
  }

  var typing = null;
  form.addEventListener("input", function (event) {
    var now = function () { page = 0; render(); save(); };
    clearTimeout(typing);
    if (event.target.name === "q") typing = setTimeout(now, 120); else now();
  });
  form.addEventListener("submit", function (event) { event.preventDefault(); });
  form.addEventListener("reset", function () { setTimeout(function () { page = 0; render(); save(); }, 0); });
  pager.addEventListener("click", function (event) {
    var which = event.target.dataset && event.target.dataset.page;
    if (!which) return;
    page = { first: 0, previous: page - 1, next: page + 1, last: pages - 1 }[which];
    render();
    save();
  });
  window.addEventListener("hashchange", function () { load(); render(); });
  load();
  render();
})();
