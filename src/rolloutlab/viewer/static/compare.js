// rolloutlab viewer, compare page: each run's per-step curves overlaid (plotly); a click
// on a point shows that step of every run side by side.  Run names reach plotly with
// <, > and & as entities (shown literally) and the page through textContent only.
(function () {
  "use strict";
  var box = document.getElementById("compare-curves");
  if (!box) { return; }
  var COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];
  var data = JSON.parse(box.getAttribute("data-curves") || "{}");
  var runs = JSON.parse(box.getAttribute("data-runs") || "[]");
  var common = JSON.parse(box.getAttribute("data-common") || "[]");
  var split = box.getAttribute("data-split") || "";
  var plots = [];
  // Hide/show runs: the ticks of the runs table hide a run's curves and its side-by-side
  // column (and survive a reload of the same comparison).
  var HKEY = "rolloutlab.compare.hidden." + JSON.stringify(runs);
  var hidden = [];
  try { hidden = JSON.parse(window.sessionStorage.getItem(HKEY) || "[]") || []; } catch (e) { hidden = []; }
  var applyHidden = function () {
    document.querySelectorAll("#compare-runs tr[data-run]").forEach(function (tr) {
      var off = hidden.indexOf(tr.getAttribute("data-run")) >= 0;
      tr.classList.toggle("hidden-run", off);
      var cb = tr.querySelector("input.show-run");
      if (cb) { cb.checked = !off; }
    });
    document.querySelectorAll("#side-cols section.side-col[data-run]").forEach(function (sec) {
      sec.hidden = hidden.indexOf(sec.getAttribute("data-run")) >= 0;
    });
    var cols = document.getElementById("side-cols");
    if (cols) {
      var n = cols.querySelectorAll("section.side-col:not([hidden])").length;
      cols.style.gridTemplateColumns = "repeat(" + Math.max(1, n) + ", minmax(0, 1fr))";
    }
    if (window.Plotly) {
      var vis = data.curves ? data.curves.map(function (c) { return hidden.indexOf(c.run) >= 0 ? "legendonly" : true; }) : [];
      plots.forEach(function (div) { window.Plotly.restyle(div, {visible: vis}); });
    }
  };
  document.querySelectorAll("#compare-runs input.show-run").forEach(function (cb) {
    cb.addEventListener("change", function () {
      hidden = hidden.filter(function (r) { return r !== cb.value; });
      if (!cb.checked) { hidden.push(cb.value); }
      try { window.sessionStorage.setItem(HKEY, JSON.stringify(hidden)); } catch (e) { /* private mode */ }
      applyHidden();
    });
  });
  var splitSel = document.getElementById("compare-split");
  if (splitSel && splitSel.form) { splitSel.addEventListener("change", function () { splitSel.form.submit(); }); }
  var plotlyText = function (s) {
    return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  };
  var nearest = function (x) {
    var best = null, dist = Infinity;
    common.forEach(function (s) { var d = Math.abs(s - x); if (d < dist) { dist = d; best = s; } });
    return best;
  };
  if (!window.Plotly) {
    applyHidden();
    var p = document.createElement("p");
    p.className = "notice";
    p.textContent = "The curves need plotly: pip install 'rolloutlab[viewer]'.";
    box.appendChild(p);
    return;
  }
  Object.keys(data.titles).forEach(function (key) {
    var fig = document.createElement("figure");
    fig.id = "cmp-" + key;
    var cap = document.createElement("figcaption");
    cap.textContent = data.titles[key];
    var div = document.createElement("div");
    div.className = "fig";
    fig.appendChild(cap);
    fig.appendChild(div);
    box.appendChild(fig);
    var traces = data.curves.map(function (c, i) {
      var label = plotlyText(c.name) + (c.source === "logged metrics" ? " (logged)" : "");
      return {x: c.step, y: c[key], type: "scatter", mode: "lines+markers", name: label,
              line: {color: COLORS[i % COLORS.length], width: 1.6}, marker: {size: 5}};
    });
    window.Plotly.newPlot(div, traces, window.rolloutlabCharts.steady(traces, {
      height: 300, margin: {l: 52, r: 10, t: 28, b: 40}, showlegend: true,
      legend: {orientation: "h", x: 0, y: 1, yanchor: "bottom"},
      xaxis: {title: {text: "step"}}, yaxis: {automargin: true}
    }), {displaylogo: false, responsive: true, modeBarButtonsToRemove: ["sendDataToCloud"]});
    plots.push(div);
    div.on("plotly_click", function (ev) {
      if (!ev || !ev.points || !ev.points.length) { return; }
      var step = nearest(Number(ev.points[0].x));
      if (step === null) { return; }
      var q = runs.map(function (r) { return "run=" + encodeURIComponent(r); });
      q.push("split=" + encodeURIComponent(split), "step=" + encodeURIComponent(step));
      window.location.href = "/compare?" + q.join("&") + "#side";
    });
  });
  applyHidden();
  box.setAttribute("data-ready", "1");
})();
