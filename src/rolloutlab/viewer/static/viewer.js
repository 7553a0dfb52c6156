// rolloutlab viewer: the little JavaScript the pages use (no inline script anywhere).
// - live pages poll their version URL and reload (or say so) when the store changed;
// - the dashboard draws the report's figures with plotly.js and opens a step on click.
(function () {
  "use strict";
  var body = document.body;

  var liveUrl = body.getAttribute("data-live-url");
  if (liveUrl) {
    var box = document.getElementById("live");
    var banner = document.getElementById("live-banner");
    var version = body.getAttribute("data-version") || "";
    var analysis = body.getAttribute("data-analysis") || "";
    var poll = function () {
      fetch(liveUrl, {cache: "no-store", credentials: "same-origin"})
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (d) {
          if (!d) { return; }
          var changed = d.version !== version || (analysis !== "" && d.analysis && d.analysis !== analysis);
          if (!changed) { return; }
          if (box && box.checked) { window.location.reload(); } else if (banner) { banner.hidden = false; }
        })
        .catch(function () { /* the server is gone or restarting: try again later */ });
    };
    window.setInterval(poll, Number(body.getAttribute("data-poll-ms") || 2000));
  }

  var grid = document.getElementById("figures");
  if (grid && window.Plotly) {
    var base = grid.getAttribute("data-step-base");
    var split = grid.getAttribute("data-split");
    var known = JSON.parse(grid.getAttribute("data-steps") || "[]");
    var nearest = function (x) {
      var best = null, dist = Infinity;
      known.forEach(function (s) { var d = Math.abs(s - x); if (d < dist) { dist = d; best = s; } });
      return best;
    };
    var config = {displaylogo: false, responsive: true, modeBarButtonsToRemove: ["sendDataToCloud"]};
    var C = window.rolloutlabCharts;
    var constants = [];
    // A figure whose every line holds one value throughout (turns always 1, nothing
    // ungraded) is a number, not a chart: it goes to one line of constants above the grid.
    var flatFigure = function (fig) {
      if (!C || !fig.data || !fig.data.length) { return null; }
      var vals = [];
      for (var i = 0; i < fig.data.length; i += 1) {
        var t = fig.data[i], ys = C.finite([t], "y");
        if (!ys.length) { continue; }
        if (!C.flat(ys)) { return null; }
        vals.push({name: t.name || "", value: ys[0]});
      }
      return vals.length ? vals : null;
    };
    var titleOf = function (fig, el) {
      var t = fig.layout && fig.layout.title;
      var text = t && (typeof t === "string" ? t : t.text);
      return String(text || el.getAttribute("data-name") || "").replace(/<[^>]*>/g, "");
    };
    grid.querySelectorAll("div.fig[data-fig]").forEach(function (el) {
      var fig = JSON.parse(el.getAttribute("data-fig"));
      var flat = flatFigure(fig);
      if (flat) {
        var seen = {};
        var vals = flat.filter(function (v) { var k = String(v.value); if (seen[k]) { return false; } seen[k] = 1; return true; });
        constants.push(titleOf(fig, el) + " = " + vals.map(function (v) {
          return String(Number(Number(v.value).toPrecision(6))) + (vals.length > 1 && v.name ? " (" + v.name + ")" : "");
        }).join(", "));
        el.parentNode.hidden = true;
        return;
      }
      var lay = window.rolloutlabCharts ? window.rolloutlabCharts.steady(fig.data, fig.layout || {}) : fig.layout;
      window.Plotly.newPlot(el, fig.data, lay, config);
      el.on("plotly_click", function (ev) {
        if (!ev || !ev.points || !ev.points.length) { return; }
        var pt = ev.points[0], meta = (pt.data && pt.data.meta) || {};
        var step = nearest(Number(meta.step !== undefined ? meta.step : pt.x));
        if (step === null || !isFinite(step)) { return; }
        window.location.href = base + encodeURIComponent(step) + "?split=" + encodeURIComponent(split);
      });
    });
    if (constants.length) {
      var line = document.createElement("p");
      line.className = "meta";
      line.id = "fig-constants";
      var lead = document.createElement("b");
      lead.textContent = "one value throughout: ";
      line.appendChild(lead);
      line.appendChild(document.createTextNode(constants.join(" · ")));
      grid.parentNode.insertBefore(line, grid);
    }
    grid.setAttribute("data-ready", "1");
  }
})();
