// rolloutlab viewer, runs page: sort by a column, filter by text, pick runs to compare.
// Sort, filter and picks survive a live reload (sessionStorage).  Only textContent is
// read or written: run names are data, never markup.
(function () {
  "use strict";
  var table = document.getElementById("runs");
  if (!table) { return; }
  var tbody = table.tBodies[0];
  var rows = Array.prototype.slice.call(tbody.rows);
  var filter = document.getElementById("runs-filter");
  var shown = document.getElementById("runs-shown");
  var button = document.getElementById("compare-selected");
  var form = document.getElementById("compare-form");
  var KEY = "rolloutlab.runs";
  var state = {sort: null, desc: false, q: "", picked: []};
  try { state = Object.assign(state, JSON.parse(window.sessionStorage.getItem(KEY) || "{}")); } catch (e) { /* fresh */ }
  var save = function () {
    try { window.sessionStorage.setItem(KEY, JSON.stringify(state)); } catch (e) { /* private mode */ }
  };

  var natural = new Intl.Collator(undefined, {numeric: true, sensitivity: "base"});
  var headers = Array.prototype.slice.call(table.tHead.rows[0].cells);
  var cellValue = function (row, col, kind) {
    var td = row.cells[col];
    if (kind === "num") {
      var raw = td.getAttribute("data-v");
      return raw === null || raw === "" ? null : Number(raw);
    }
    var v = td.getAttribute("data-v");
    return (v !== null ? v : td.textContent).trim().toLowerCase();
  };
  var sortRows = function () {
    headers.forEach(function (th, i) {
      var mark = th.querySelector(".sort-mark");
      if (mark) { mark.textContent = i === state.sort ? (state.desc ? " ▼" : " ▲") : ""; }
    });
    if (state.sort === null || !headers[state.sort]) { return; }
    var col = state.sort, kind = headers[col].getAttribute("data-sort"), sign = state.desc ? -1 : 1;
    var sorted = rows.slice().sort(function (a, b) {
      var x = cellValue(a, col, kind), y = cellValue(b, col, kind);
      if (x === y) { return 0; }
      if (x === null || x === "") { return 1; }  // missing values last, either way
      if (y === null || y === "") { return -1; }
      if (kind === "num") { return (x < y ? -1 : 1) * sign; }
      return natural.compare(x, y) * sign;  // ids in natural order: g2 before g10
    });
    sorted.forEach(function (r) { tbody.appendChild(r); });
  };
  headers.forEach(function (th, i) {
    if (!th.hasAttribute("data-sort")) { return; }
    var mark = document.createElement("span");
    mark.className = "sort-mark";
    th.appendChild(mark);
    th.classList.add("sorter");
    th.addEventListener("click", function () {
      state.desc = state.sort === i ? !state.desc : false;
      state.sort = i;
      save();
      sortRows();
    });
  });

  var applyFilter = function () {
    var q = state.q.trim().toLowerCase(), n = 0;
    rows.forEach(function (r) {
      var hit = !q || r.textContent.toLowerCase().indexOf(q) >= 0 ||
        Array.prototype.some.call(r.querySelectorAll("[title]"), function (el) {
          return el.getAttribute("title").toLowerCase().indexOf(q) >= 0;
        });
      r.hidden = !hit;
      if (hit) { n += 1; }
    });
    if (shown) { shown.textContent = q ? n + " of " + rows.length + " shown" : ""; }
  };
  if (filter) {
    filter.value = state.q;
    filter.addEventListener("input", function () { state.q = filter.value; save(); applyFilter(); });
  }

  var boxes = Array.prototype.slice.call(table.querySelectorAll("input.pick"));
  var updatePicked = function () {
    if (button) { button.disabled = state.picked.length < 2; }
  };
  boxes.forEach(function (b) {
    b.checked = state.picked.indexOf(b.value) >= 0;
    b.addEventListener("change", function () {
      state.picked = state.picked.filter(function (v) { return v !== b.value; });
      if (b.checked) { state.picked.push(b.value); }
      save();
      updatePicked();
    });
  });
  var present = boxes.map(function (b) { return b.value; });
  state.picked = state.picked.filter(function (v) { return present.indexOf(v) >= 0; });
  if (form) {
    form.addEventListener("submit", function (ev) {
      // In the order ticked: the first is the baseline.
      ev.preventDefault();
      var q = state.picked.map(function (v) { return "run=" + encodeURIComponent(v); }).join("&");
      window.location.href = "/compare?" + q;
    });
  }
  sortRows();
  applyFilter();
  updatePicked();

  // The configuration table: filter its keys by text (key or any value), or keep only the
  // keys whose values differ between the runs.
  var cfg = document.getElementById("config");
  var cfgFilter = document.getElementById("config-filter");
  var cfgDiffers = document.getElementById("config-differs");
  var cfgShown = document.getElementById("config-shown");
  if (cfg && cfgFilter && cfgDiffers) {
    var cfgRows = Array.prototype.slice.call(cfg.tBodies[0].rows);
    var applyConfig = function () {
      var q = cfgFilter.value.trim().toLowerCase(), n = 0;
      cfgRows.forEach(function (r) {
        var text = r.textContent.toLowerCase() + " " + Array.prototype.map.call(r.cells, function (c) {
          return (c.getAttribute("title") || "").toLowerCase();
        }).join(" ");
        var hit = (!q || text.indexOf(q) >= 0) && (!cfgDiffers.checked || r.getAttribute("data-differs") === "1");
        r.hidden = !hit;
        if (hit) { n += 1; }
      });
      if (cfgShown) { cfgShown.textContent = n + " of " + cfgRows.length + " keys shown"; }
    };
    cfgFilter.addEventListener("input", applyConfig);
    cfgDiffers.addEventListener("change", applyConfig);
  }
})();
