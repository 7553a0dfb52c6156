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
    grid.querySelectorAll("div.fig[data-fig]").forEach(function (el) {
      var fig = JSON.parse(el.getAttribute("data-fig"));
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
    grid.setAttribute("data-ready", "1");
  }
})();
