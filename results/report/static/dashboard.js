/* The dashboard's interactive plots, drawn with plotly.js (assets/plotly.min.js, copied into the site from
   the plotly package on PyPI when it is built: no CDN, the site works offline and from file://).
   results/report/charts.py writes each chart's data as JSON into the page:
     <div class="chart" data-chart="ID"></div> <script type="application/json" id="ID">{...}</script>
   Hover shows the value, night, run and the components that moved; a click on a point opens its run page;
   drag to zoom (double click: back), the range buttons pick the last nights, "log axis" switches the scale.
   tests/results/test_dashboard_browser.py drives all of it in a real headless Chromium. */
(function () {
  "use strict";

  var LINES = ["#1f5fa8", "#d2691e", "#2e7d32", "#8e24aa", "#c62828", "#00838f", "#6d4c41", "#5c6bc0"];
  var MEAN = "#6d6d6d", BAND = "#f2b84b", FAILED = "#8e24aa";
  var KINDS = {
    step: { name: "step (change point)", colour: "#c62828" },
    drift: { name: "drift", colour: "#ef6c00" },
    transient: { name: "transient", colour: "#7b1fa2" }
  };
  var DAY_MS = 86400000;
  var PERCENT = "fraction"; // stored as a fraction of 1, shown in percent (formatting.PERCENT_UNIT)
  /* Failed nights and the findings' hover handles sit on a hidden 0..1 axis over the plot, so that they stay
     at its bottom and top whatever the zoom, and on a log axis too. */
  var OVERLAY = { overlaying: "y", range: [0, 1], visible: false, fixedrange: true };

  /* Plotly reads a small set of tags (<b>, <br>, <a>) in every text it draws: names from the store are
     escaped so that they are shown, never read as markup. */
  function esc(text) {
    return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  /* Python's "%.4g": 4 significant digits, exponent below 1e-4 and from 1e4. */
  function g4(v) {
    var a = Math.abs(v);
    if (a !== 0 && (a < 1e-4 || a >= 1e4)) {
      var parts = v.toExponential(3).split("e");
      var mantissa = parts[0].indexOf(".") >= 0 ? parts[0].replace(/\.?0+$/, "") : parts[0];
      var exponent = parseInt(parts[1], 10);
      return mantissa + "e" + (exponent < 0 ? "-" : "+") + (Math.abs(exponent) < 10 ? "0" : "") +
        Math.abs(exponent);
    }
    return String(Number(v.toPrecision(4)));
  }

  /* The same text as results/report/formatting.py's format_percent: MFU in percent. */
  function formatPercent(v) {
    var percent = v * 100;
    return (Math.abs(percent) >= 1 || percent === 0 ? percent.toFixed(1) : g3(percent)) + "%";
  }

  function g3(v) { return String(Number(v.toPrecision(3))); }

  /* The same text as results/report/formatting.py's format_value. */
  function formatValue(v, unit) {
    if (v === null || v === undefined || !isFinite(v)) return "-";
    if (unit === PERCENT) return formatPercent(v);
    if (unit === "bytes") {
      var scales = [[1e9, "GB"], [1e6, "MB"], [1e3, "kB"]];
      for (var i = 0; i < scales.length; i++) {
        if (Math.abs(v) >= scales[i][0]) return g4(v / scales[i][0]) + " " + scales[i][1];
      }
      return g4(v) + " bytes";
    }
    var a = Math.abs(v);
    var text = a >= 1000 && a < 1e6 ? Math.round(v).toLocaleString("en-US") : g4(v);
    return (text + " " + unit).trim();
  }

  function runHref(chart, line, run) {
    if (!chart.runBase || run === null || line.noPage.indexOf(run) >= 0) return null;
    return chart.runBase + run + ".html";
  }

  function lineTraces(chart, line, index) {
    var colour = LINES[index % LINES.length];
    var text = [], links = [], failedX = [], failedText = [], failedLinks = [];
    // Backfilled nights (a release run later) are open diamonds, the nights that ran then dots.
    var backfilled = line.x.map(function () { return false; });
    (line.backfill || []).forEach(function (i) { backfilled[i] = true; });
    var symbols = backfilled.map(function (b) { return b ? "diamond-open" : "circle"; });
    var sizes = backfilled.map(function (b) { return b ? 8 : 4; });
    line.x.forEach(function (night, i) {
      var run = line.run[i], status = line.status[i] || "ok", href = runHref(chart, line, run);
      var runs = line.runs && line.runs[i] > 1 ? " (median of " + line.runs[i] + " runs)" : "";
      var about = night + (run !== null ? " · run " + run : "");
      var commits = line.commits && line.commits[i] ? "<br>" + esc(line.commits[i]) : "";
      var open = href ? "<br><i>click: open run " + run + "</i>" : "";
      var later = backfilled[i] ? "<br>backfilled: a published release, run later" : "";
      text.push("<b>" + esc(formatValue(line.y[i], chart.unit)) + "</b>" + runs +
        (status !== "ok" ? " (" + esc(status) + ")" : "") + "<br>" + about + commits + later + open);
      links.push(href);
      // A gap (no run that night) only breaks the line; a run without a value is marked.
      if (line.y[i] === null && status !== "gap") {
        failedX.push(night);
        failedText.push("<b>" + esc(status) + "</b><br>" + about + commits + open);
        failedLinks.push(href);
      }
    });
    var traces = [{
      type: "scatter", mode: "lines+markers", name: esc(line.name), x: line.x, y: line.y,
      connectgaps: false, line: { color: colour, width: 1.6 },
      marker: { size: sizes, color: colour, symbol: symbols },
      text: text, customdata: links, hovertemplate: "%{text}<extra>" + esc(line.name) + "</extra>",
      meta: "series"
    }];
    if (failedX.length) {
      traces.push({
        type: "scatter", mode: "markers", name: "failed run (no value)", x: failedX, yaxis: "y2",
        y: failedX.map(function () { return 0.03; }), legendgroup: "failed", showlegend: index === 0,
        marker: { symbol: "triangle-up", size: 9, color: FAILED }, text: failedText, customdata: failedLinks,
        hovertemplate: "%{text}<extra></extra>", meta: "failed"
      });
    }
    return traces;
  }

  function segmentTrace(chart) {
    var x = [], y = [];
    chart.segments.forEach(function (s) { x.push(s.start, s.end, null); y.push(s.mean, s.mean, null); });
    return {
      type: "scatter", mode: "lines", name: "segment mean", x: x, y: y,
      line: { color: MEAN, width: 2, dash: "dash" },
      text: y.map(function (v) { return v === null ? "" : "segment mean " + formatValue(v, chart.unit); }),
      hovertemplate: "%{text}<extra></extra>"
    };
  }

  /* The baseline: the band over the nights it was taken from (where a night is unremarkable), and its
     median carried on to the newest night, which is judged against it (under a drift, the trend's level
     at the newest night: drawn from the band's end only). */
  function bandTraces(chart) {
    var b = chart.band, from = b.trend ? b.end : b.start, label = esc(b.label);
    return [{
      type: "scatter", mode: "lines", name: "baseline band (its nights)", legendgroup: "band",
      x: [b.start, b.end, b.end, b.start, b.start], y: [b.low, b.low, b.high, b.high, b.low],
      fill: "toself", fillcolor: "rgba(242,184,75,0.25)", line: { width: 0, color: BAND },
      hoveron: "fills", text: label, hoverinfo: "text", meta: "band"
    }, {
      type: "scatter", mode: "lines", name: "baseline median", legendgroup: "band",
      x: [from, b.newest], y: [b.median, b.median], line: { color: BAND, dash: "dot", width: 1.5 },
      text: [label, label], hovertemplate: "%{text}<extra></extra>", meta: "baseline"
    }];
  }

  /* Findings: a step is a vertical line on its first night after the change, a drift or a transient a
     shaded span over its nights (layout shapes, which follow the zoom over the whole height); a triangle at
     the top of each carries its hover text. */
  function markers(chart) {
    var shapes = [], traces = {};
    chart.markers.forEach(function (m) {
      var kind = KINDS[m.kind] || { name: m.kind, colour: "#555555" };
      var x0 = new Date(m.start).getTime(), x1 = new Date(m.end).getTime();
      if (m.kind === "step") {
        shapes.push({ type: "line", xref: "x", yref: "paper", x0: x0, x1: x0, y0: 0, y1: 1, layer: "below",
          line: { color: kind.colour, width: 1.5 } });
      } else {
        shapes.push({ type: "rect", xref: "x", yref: "paper", x0: x0 - DAY_MS / 2, x1: x1 + DAY_MS / 2,
          y0: 0, y1: 1, layer: "below", fillcolor: kind.colour, opacity: 0.14, line: { width: 0 } });
      }
      var trace = traces[m.kind] || (traces[m.kind] = {
        type: "scatter", mode: "markers", name: esc(kind.name), yaxis: "y2", x: [], y: [], text: [],
        marker: { symbol: "triangle-down", size: 11, color: kind.colour }, legendgroup: m.kind,
        hovertemplate: "%{text}<extra></extra>", meta: "marker-" + m.kind
      });
      trace.x.push((x0 + x1) / 2);
      trace.y.push(0.97);
      trace.text.push("<b>" + esc(kind.name) + "</b><br>" + esc(m.start === m.end ? m.start :
        m.start + " to " + m.end) + "<br>" + esc(m.label));
    });
    return { shapes: shapes, traces: Object.keys(traces).map(function (k) { return traces[k]; }) };
  }

  /* A quantity per training step of one run (its loss, its step times), beside a reference level: the
     data's optimal loss, the run's median step time. */
  function drawSteps(div, chart) {
    var line = chart.lines[0], traces = [];
    traces.push({
      type: "scatter", mode: line.x.length > 300 ? "lines" : "lines+markers", name: esc(line.name),
      x: line.x, y: line.y, connectgaps: false, line: { color: LINES[0], width: 1.6 },
      marker: { size: 3, color: LINES[0] }, meta: "steps", hovertemplate: "%{text}<extra></extra>",
      text: line.y.map(function (v, i) {
        return "<b>" + esc(formatValue(v, chart.unit)) + "</b><br>step " + line.x[i];
      })
    });
    if (chart.reference) {
      var r = chart.reference, ends = [line.x[0], line.x[line.x.length - 1]];
      traces.push({
        type: "scatter", mode: "lines", name: esc(r.name), x: ends, y: [r.value, r.value], meta: "reference",
        line: { color: MEAN, width: 1.5, dash: "dash" }, hovertemplate: esc(r.name) + "<extra></extra>"
      });
    }
    var height = chart.height || 320, margin = { l: 72, r: 16, t: 16, b: 52 };
    Plotly.newPlot(div, traces, {
      height: height, margin: margin, hovermode: "closest", showlegend: true, font: { size: 11 },
      legend: { orientation: "h", x: 0, y: -60 / (height - margin.t - margin.b), yanchor: "top" },
      xaxis: { title: { text: "step" }, zeroline: false },
      yaxis: yAxis(chart)
    }, { responsive: true, displaylogo: false, modeBarButtonsToRemove: ["select2d", "lasso2d"] });
  }

  /* The value axis: titled with the unit; bytes in k, M, G (decimal, as format_value), where plotly's
     default would write a billion "B". */
  function yAxis(chart) {
    var percent = chart.unit === PERCENT;
    return { title: { text: percent ? "%" : esc(chart.unit) }, type: "linear", zeroline: false,
      exponentformat: chart.unit === "bytes" ? "SI" : "B", tickformat: percent ? ".2~%" : "" };
  }

  function draw(div, chart) {
    if (chart.kind === "steps") return drawSteps(div, chart);
    var found = markers(chart), traces = [];
    if (chart.band) traces = traces.concat(bandTraces(chart));
    if (chart.segments.length) traces.push(segmentTrace(chart));
    var lines = chart.lines.map(function (line, i) { return lineTraces(chart, line, i); });
    // The lines first, then their failed nights: the legend lists the variants together.
    lines.forEach(function (pair) { traces.push(pair[0]); });
    lines.forEach(function (pair) { traces = traces.concat(pair.slice(1)); });
    traces = traces.concat(found.traces);
    var height = chart.height || 400, margin = { l: 72, r: 16, t: 44, b: 36 };
    var layout = {
      height: height, margin: margin, hovermode: "closest", showlegend: true, font: { size: 11 },
      // Below the night axis' two rows of labels (about 40 px), whatever the plot's height.
      legend: { orientation: "h", x: 0, y: -40 / (height - margin.t - margin.b), yanchor: "top" },
      xaxis: {
        type: "date", rangeselector: { x: 0, y: 1.08, buttons: [
          { count: 30, label: "30 nights", step: "day", stepmode: "backward" },
          { count: 90, label: "90 nights", step: "day", stepmode: "backward" },
          { count: 1, label: "1 year", step: "year", stepmode: "backward" },
          { step: "all", label: "all" }] }
      },
      yaxis: yAxis(chart), yaxis2: OVERLAY, shapes: found.shapes
    };
    if (chart.yRange) { layout.yaxis.range = chart.yRange; }
    var config = { responsive: true, displaylogo: false, modeBarButtonsToRemove: ["select2d", "lasso2d"] };
    Plotly.newPlot(div, traces, layout, config);
    nightTicks(div);
    div.on("plotly_relayout", function () { nightTicks(div); });
    div.on("plotly_click", function (event) {
      var href = event.points.length ? event.points[0].customdata : null;
      if (typeof href === "string") window.location.href = href;
    });
  }

  /* One value a night: below a dozen nights on screen plotly would tick every few hours; one tick a night
     instead, and plotly's own choice again when zoomed out. */
  function nightTicks(div) {
    var range = div.layout.xaxis.range.map(function (r) { return Date.parse(String(r).replace(" ", "T")); });
    var daily = range[1] - range[0] < 12 * DAY_MS;
    if (daily === (div.layout.xaxis.dtick === DAY_MS)) return;
    Plotly.relayout(div, daily ? { "xaxis.dtick": DAY_MS, "xaxis.tickformat": "%b %-d" } :
      { "xaxis.dtick": null, "xaxis.tickformat": null });
  }

  /* A shared value range (the side-by-side variants) is kept on the log axis too, as plotly's log
     range is in decades; without a positive one the axis fits the data. */
  function setLogAxis(div, chart, on) {
    var update = { "yaxis.type": on ? "log" : "linear", "yaxis.autorange": true };
    var range = chart.yRange;
    if (range && (!on || range[0] > 0)) {
      update["yaxis.autorange"] = false;
      update["yaxis.range"] = on ? [Math.log10(range[0]), Math.log10(range[1])] : range;
    }
    Plotly.relayout(div, update);
  }

  var shown = {}; // chart id -> the data drawn there now

  document.querySelectorAll("div.chart[data-chart]").forEach(function (div) {
    var id = div.getAttribute("data-chart");
    shown[id] = JSON.parse(document.getElementById(id).textContent);
    draw(div, shown[id]);
    var toggle = document.querySelector("input.log-axis[data-chart='" + id + "']");
    if (toggle) toggle.addEventListener("change", function () { setLogAxis(div, shown[id], toggle.checked); });
  });

  /* A measurement's other metrics (its rates): a click draws one in the chart's place, on the same log or
     linear axis, and points "this metric's page" at it. */
  document.querySelectorAll(".metric-toggle[data-chart]").forEach(function (group) {
    var id = group.getAttribute("data-chart"), link = group.querySelector("a.metric-page");
    var div = document.querySelector("div.chart[data-chart='" + id + "']");
    var log = document.querySelector("input.log-axis[data-chart='" + id + "']");
    var buttons = group.querySelectorAll("button[data-source]");
    buttons.forEach(function (button) {
      button.addEventListener("click", function () {
        shown[id] = JSON.parse(document.getElementById(button.getAttribute("data-source")).textContent);
        draw(div, shown[id]);
        if (log && log.checked) setLogAxis(div, shown[id], true);
        buttons.forEach(function (b) { b.setAttribute("aria-pressed", String(b === button)); });
        if (link) link.href = button.getAttribute("data-href");
      });
    });
  });
})();
