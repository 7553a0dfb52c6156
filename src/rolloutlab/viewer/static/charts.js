// rolloutlab viewer: what every plotly chart of the viewer shares.  Plotly's autorange
// puts a flat series on an axis from −1 to 1 around it, so lr = 0.002 reads as a line at
// 0, and one step draws one dot in an empty square.  steady() gives such axes a range
// around the value instead (±25 % of it, ±0.5 around 0; ±1 step around a lone step).
(function () {
  "use strict";
  var finite = function (traces, key) {
    var out = [];
    traces.forEach(function (t) {
      (t[key] || []).forEach(function (v) {
        if (v !== null && v !== undefined && v !== "" && isFinite(Number(v))) { out.push(Number(v)); }
      });
    });
    return out;
  };
  var flat = function (vals) {
    if (!vals.length) { return false; }
    var lo = Math.min.apply(null, vals), hi = Math.max.apply(null, vals);
    return hi - lo <= 1e-12 * Math.max(1, Math.abs(hi));
  };
  var around = function (v, half) { return [v - half, v + half]; };
  window.rolloutlabCharts = {
    flat: flat,
    finite: finite,
    // Sets layout.yaxis.range (and layout.xaxis.range) where the data leave plotly's
    // autorange misleading; returns the layout.
    steady: function (traces, layout) {
      var ys = finite(traces, "y"), xs = finite(traces, "x");
      layout.yaxis = layout.yaxis || {};
      layout.xaxis = layout.xaxis || {};
      if (flat(ys) && layout.yaxis.type !== "log") {
        var v = ys[0];
        layout.yaxis.range = around(v, v === 0 ? 0.5 : Math.abs(v) * 0.25);
        layout.yaxis.autorange = false;
      }
      if (flat(xs) && typeof xs[0] === "number" && layout.xaxis.type !== "date") {
        layout.xaxis.range = around(xs[0], Math.max(1, Math.abs(xs[0]) * 0.05));
        layout.xaxis.autorange = false;
      }
      return layout;
    }
  };
})();
