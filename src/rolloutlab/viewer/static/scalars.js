// rolloutlab viewer: the scalar panel (every logged metric of one or more runs).
// The names come from /api/scalars/index; a group's charts are fetched from /api/scalars
// when the group is opened, and each chart is drawn when it scrolls into view, so a run
// with hundreds of metrics costs what its open groups cost (plotly.js itself is loaded
// only then, when the page has not loaded it already).  Names are data: they reach
// the page through textContent only, and plotly (which reads a little HTML in trace
// names) gets them with <, > and & escaped as entities, so they show literally.
(function () {
  "use strict";
  var COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];
  var X_TITLE = {step: "step", time: "wall time (s)", tokens: "tokens"};
  var X_NAME = {step: "step", time: "wall time", tokens: "tokens"};

  var plotlyText = function (s) {
    return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  };
  var el = function (tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined) { e.textContent = text; }
    return e;
  };
  var waiting = null;  // callbacks waiting for plotly.js, once it is being loaded
  var withPlotly = function (src, fn) {
    if (window.Plotly) { fn(); return; }
    if (!src) { return; }
    if (waiting === null) {
      waiting = [];
      var s = document.createElement("script");
      s.src = src;
      s.onload = function () { var w = waiting; waiting = []; w.forEach(function (f) { f(); }); };
      document.head.appendChild(s);
    }
    waiting.push(fn);
  };
  var query = function (params) {
    return params.map(function (kv) { return encodeURIComponent(kv[0]) + "=" + encodeURIComponent(kv[1]); }).join("&");
  };

  var init = function (sec) {
    var runs = JSON.parse(sec.getAttribute("data-runs") || "[]");
    var plotlySrc = sec.getAttribute("data-plotly") ? "/static/plotly.min.js" : "";
    var search = sec.querySelector(".scalar-search");
    var smooth = sec.querySelector(".scalar-smooth");
    var smoothOut = sec.querySelector(".scalar-smooth-value");
    var logy = sec.querySelector(".scalar-logy");
    var xSel = sec.querySelector(".scalar-x");
    var splitBox = sec.querySelector(".scalar-split-box");
    var splitSel = sec.querySelector(".scalar-split");
    var count = sec.querySelector(".scalar-count");
    var notes = sec.querySelector(".scalar-notes");
    var box = sec.querySelector(".scalar-groups");
    var groups = [];   // {group, names, details, grid, loaded, charts: [{name, fig, div, drawn, data}]}
    var runNames = {};
    var split = "";
    var prefer = sec.getAttribute("data-split") || "";  // the page's split, when the runs logged scalars in it
    // What the reader set (open groups, search, smoothing, axes) survives a live reload.
    var KEY = "rolloutlab.scalars." + JSON.stringify(runs);
    var saved = {};
    try { saved = JSON.parse(window.sessionStorage.getItem(KEY) || "{}") || {}; } catch (e) { saved = {}; }
    var save = function () {
      var open = groups.filter(function (g) { return g.details.open; }).map(function (g) { return g.group; });
      var st = {q: search.value, smooth: smooth.value, logy: logy.checked, x: xSel.value, split: split, open: open};
      try { window.sessionStorage.setItem(KEY, JSON.stringify(st)); } catch (e) { /* private mode */ }
    };
    if (typeof saved.q === "string") { search.value = saved.q; }
    if (saved.smooth !== undefined) { smooth.value = saved.smooth; smoothOut.textContent = Number(smooth.value).toFixed(2); }
    if (saved.logy) { logy.checked = true; }
    if (saved.x) { xSel.value = saved.x; }
    if (saved.split) { split = saved.split; }
    var observer = "IntersectionObserver" in window ? new IntersectionObserver(function (entries) {
      entries.forEach(function (e) { if (e.isIntersecting) { draw(e.target.__chart); } });
    }, {rootMargin: "200px"}) : null;

    var runParams = function () { return runs.map(function (r) { return ["run", r]; }); };
    var matches = function (name) {
      var q = search.value.trim().toLowerCase();
      return !q || name.toLowerCase().indexOf(q) >= 0;
    };

    var applySearch = function () {
      var total = 0, hit = 0;
      groups.forEach(function (g) {
        var n = g.names.filter(matches).length;
        total += g.names.length;
        hit += n;
        g.details.hidden = n === 0;
        g.countEl.textContent = n === g.names.length ? " (" + n + ")" : " (" + n + " of " + g.names.length + ")";
        g.charts.forEach(function (c) { c.fig.hidden = !matches(c.name); if (!c.fig.hidden) { draw(c, true); } });
        g.grid.querySelectorAll(".scalar-constant").forEach(function (sp) { sp.hidden = !matches(sp.getAttribute("data-name")); });
      });
      count.textContent = search.value.trim() ? hit + " of " + total + " metrics match" : total + " metrics";
    };

    var traces = function (c) {
      var k = Number(smooth.value), out = [];
      c.data.series.forEach(function (s) {
        var i = runs.indexOf(s.run), color = COLORS[(i < 0 ? 0 : i) % COLORS.length];
        var name = plotlyText(runNames[s.run] || s.run);
        var text = s.step.map(function (st) { return "step " + st; });
        if (k > 0) {
          out.push({x: s.x, y: s.y, text: text, type: "scatter", mode: "lines", name: name, legendgroup: s.run,
                    showlegend: false, hoverinfo: "skip", line: {color: color, width: 1}, opacity: 0.25});
        }
        out.push({x: s.x, y: k > 0 ? s.smoothed : s.y, text: text, type: "scatter", mode: s.x.length > 1 ? "lines" : "markers",
                  name: name, legendgroup: s.run, line: {color: color, width: 1.6}, marker: {color: color},
                  hovertemplate: "%{text}: %{y:.4g}"});
      });
      return out;
    };
    var layout = function (tr) {
      // One legend for the panel (above the groups), none per chart: a chart keeps its height.
      var lay = {height: 230, margin: {l: 52, r: 10, t: 8, b: 36}, showlegend: false, xaxis: {title: {text: X_TITLE[xSel.value]}, automargin: true},
                 yaxis: {type: logy.checked ? "log" : "linear", automargin: true}};
      return window.rolloutlabCharts ? window.rolloutlabCharts.steady(tr, lay) : lay;
    };
    // A metric whose every run logged one value throughout (tool calls always 0, a fixed
    // lr, or a run of one step) is a number, not a chart: the group lists those on one line.
    var constantOf = function (m) {
      var C = window.rolloutlabCharts, out = [];
      if (!C || !m.series.length) { return null; }
      for (var i = 0; i < m.series.length; i += 1) {
        var ys = C.finite([{y: m.series[i].y}], "y");
        if (!ys.length || !C.flat(ys)) { return null; }
        out.push({run: m.series[i].run, value: ys[0], n: ys.length});
      }
      return out;
    };
    var constantsLine = function (items) {
      var p = el("p", "meta scalar-constants");
      p.appendChild(el("b", "", "one value throughout: "));
      items.forEach(function (it, k) {
        var span = el("span", "scalar-constant mono");
        span.setAttribute("data-name", it.name);
        span.hidden = !matches(it.name);
        var vals = it.values.map(function (v) {
          var txt = String(Number(Number(v.value).toPrecision(6)));
          return runs.length > 1 ? txt + " (" + (runNames[v.run] || v.run) + ")" : txt;
        });
        var steps = Math.max.apply(null, it.values.map(function (v) { return v.n; }));
        span.textContent = it.name + " = " + vals.join(", ");
        span.title = steps === 1 ? "one value logged" : "the same value at all " + steps + " points";
        if (k) { p.appendChild(document.createTextNode(" · ")); }
        p.appendChild(span);
      });
      return p;
    };
    var draw = function (c, onlyIfVisible) {
      if (!c || c.drawn || c.fig.hidden) { return; }
      if (onlyIfVisible && observer) { return; }  // the observer draws it when it shows
      c.drawn = true;
      withPlotly(plotlySrc, function () {
        var tr = traces(c);
        window.Plotly.newPlot(c.div, tr, layout(tr), {displaylogo: false, responsive: true,
                                                      modeBarButtonsToRemove: ["sendDataToCloud"]});
        c.fig.setAttribute("data-drawn", "1");
      });
    };

    var load = function (g) {
      g.loaded = true;
      g.grid.textContent = "";
      g.grid.appendChild(el("p", "muted", "loading…"));
      var params = runParams().concat([["group", g.group], ["x", xSel.value], ["smooth", smooth.value], ["split", split]]);
      fetch("/api/scalars?" + query(params), {credentials: "same-origin"})
        .then(function (r) { return r.ok ? r.json() : r.text().then(function (t) { throw new Error(t.slice(0, 200)); }); })
        .then(function (d) {
          g.grid.textContent = "";
          g.charts.forEach(function (c) { if (c.drawn && window.Plotly) { window.Plotly.purge(c.div); } });
          g.charts = [];
          if (d.notes.length) { g.grid.appendChild(el("p", "meta group-notes", d.notes.join(" · "))); }
          if (!d.metrics.length) { g.grid.appendChild(el("p", "muted", "nothing to draw on this x axis")); }
          var constants = [];
          var curves = d.metrics.filter(function (m) {
            var c = constantOf(m);
            if (c) { constants.push({name: m.name, values: c}); }
            return !c;
          });
          if (constants.length) { g.grid.appendChild(constantsLine(constants)); }
          curves.forEach(function (m) {
            var fig = el("figure", "scalar");
            fig.setAttribute("data-name", m.name);
            var cap = el("figcaption", "mono", m.name);
            cap.title = m.name;
            var div = el("div", "scalar-plot");
            fig.appendChild(cap);
            fig.appendChild(div);
            g.grid.appendChild(fig);
            var c = {name: m.name, fig: fig, div: div, drawn: false, data: m};
            div.__chart = c;
            g.charts.push(c);
            fig.hidden = !matches(m.name);
            if (observer) { observer.observe(div); } else { draw(c); }
          });
          g.details.setAttribute("data-loaded", "1");
        })
        .catch(function (e) {
          g.grid.textContent = "";
          g.grid.appendChild(el("p", "error", "could not load this group: " + e.message));
        });
    };
    var reloadOpen = function () {
      groups.forEach(function (g) { if (g.details.open) { load(g); } else { g.loaded = false; } });
    };

    var build = function (idx) {
      box.textContent = "";
      groups = [];
      idx.runs.forEach(function (r) { runNames[r.run] = r.name; });
      // Which x axes the runs have: an axis no run has is disabled, and the notes say why.
      Array.prototype.forEach.call(xSel.options, function (opt) {
        var have = idx.runs.filter(function (r) { return r.axes[opt.value].available; });
        opt.disabled = have.length === 0;
        opt.title = have.length ? "" : "no run has this axis";
      });
      if (xSel.selectedOptions[0] && xSel.selectedOptions[0].disabled) { xSel.value = "step"; }
      notes.textContent = "";
      idx.runs.forEach(function (r, i) {
        if (idx.runs.length > 1) {
          var key = el("span", "run-key");
          key.appendChild(el("span", "swatch swatch-" + (i % COLORS.length)));
          key.appendChild(document.createTextNode(" " + r.name));
          notes.appendChild(key);
        }
        var line = el("span", "axis-note", (idx.runs.length > 1 ? "" : r.name + " — ") + ["time", "tokens"].map(function (k) {
          var a = r.axes[k];
          return X_NAME[k] + ": " + (a.available ? a.source : "not available (" + a.source + ")");
        }).join(" · "));
        notes.appendChild(line);
      });
      if (idx.splits.length > 1) {
        splitBox.hidden = false;
        splitSel.textContent = "";
        idx.splits.forEach(function (s) { var o = el("option", "", s); o.value = s; splitSel.appendChild(o); });
        splitSel.value = idx.split;
      }
      var controls = sec.querySelector(".scalar-controls");
      controls.hidden = !idx.splits.length;  // nothing logged at all: no toolbar that does nothing
      if (!idx.splits.length) {
        notes.textContent = "";
        box.appendChild(el("p", "muted scalar-empty", "No scalars logged by " + (runs.length > 1 ? "these runs" : "this run") + "."));
      } else if (!idx.groups.length) {
        box.appendChild(el("p", "muted scalar-empty", "No scalars logged in split " + idx.split + "."));
      }
      idx.groups.forEach(function (gr) {
        var d = el("details", "scalar-group");
        d.setAttribute("data-group", gr.group);
        var sum = el("summary");
        sum.appendChild(el("span", "group-name", gr.group === "" ? "(ungrouped)" : gr.group));
        var cnt = el("span", "muted");
        sum.appendChild(cnt);
        d.appendChild(sum);
        var grid = el("div", "scalar-grid");
        d.appendChild(grid);
        box.appendChild(d);
        var g = {group: gr.group, names: gr.metrics.map(function (m) { return m.name; }), details: d, grid: grid,
                 countEl: cnt, loaded: false, charts: []};
        d.addEventListener("toggle", function () { if (d.open && !g.loaded) { load(g); } save(); });
        groups.push(g);
      });
      applySearch();
      groups.forEach(function (g) {
        if ((saved.open || []).indexOf(g.group) >= 0 && !g.details.hidden) { g.details.open = true; }
      });
      if (!window.Plotly && !plotlySrc && idx.groups.length) {
        box.insertBefore(el("p", "notice", "The charts need plotly: pip install 'rolloutlab[viewer]'."), box.firstChild);
      }
      sec.setAttribute("data-ready", "1");
    };

    var fetchIndex = function () {
      var params = runParams();
      if (split) { params.push(["split", split]); } else if (prefer) { params.push(["prefer", prefer]); }
      fetch("/api/scalars/index?" + query(params), {credentials: "same-origin"})
        .then(function (r) { return r.ok ? r.json() : r.text().then(function (t) { throw new Error(t.slice(0, 200)); }); })
        .then(function (idx) { split = idx.split; build(idx); })
        .catch(function (e) {
          if (split) { split = ""; fetchIndex(); return; }  // a remembered split the runs no longer have
          box.textContent = "";
          box.appendChild(el("p", "error", "could not list the metrics: " + e.message));
        });
    };

    var timer = null;
    search.addEventListener("input", function () { applySearch(); save(); });
    smooth.addEventListener("input", function () {
      smoothOut.textContent = Number(smooth.value).toFixed(2);
      window.clearTimeout(timer);
      timer = window.setTimeout(function () { reloadOpen(); save(); }, 250);
    });
    xSel.addEventListener("change", function () { reloadOpen(); save(); });
    splitSel.addEventListener("change", function () { split = splitSel.value; save(); fetchIndex(); });
    logy.addEventListener("change", function () {
      save();
      groups.forEach(function (g) {
        g.charts.forEach(function (c) {
          if (c.fig.getAttribute("data-drawn") === "1") { window.Plotly.relayout(c.div, {"yaxis.type": logy.checked ? "log" : "linear"}); }
        });
      });
    });
    fetchIndex();
  };

  document.querySelectorAll("section.scalars[data-runs]").forEach(init);
})();
