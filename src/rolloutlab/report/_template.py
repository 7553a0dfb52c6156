"""The report page: one Jinja template (autoescaped), its stylesheet and its script.

Kept as Python strings so they ship inside the package whatever the packaging.  Every
value from the data goes through autoescape; the only ``|safe`` values are the CSS, the
script, plotly.js (all ours or bundled) and the figure JSON, which ``_html.script_json``
escaped for a ``<script>`` block.  The script never writes data into the page as HTML: the
sampled trajectories are rendered by the template and the script only shows and hides
them (``hidden``), so escaping happens in one place.
"""

CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data: blob:; "
       "font-src data:; connect-src 'none'; media-src 'none'; object-src 'none'; frame-src 'none'; "
       "worker-src 'none'; base-uri 'none'; form-action 'none'")
"""No request of any kind leaves the page: everything it needs is inline."""

CSS = """
:root { --fg:#1d1d1f; --muted:#666; --line:#ddd; --bg:#fafafa; --good:#2ca02c; --bad:#d62728; --mixed:#1f77b4; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); margin: 0; background: #fff; }
main { max-width: 1400px; margin: 0 auto; padding: 16px 24px 64px; }
h1 { font-size: 22px; margin: 8px 0 2px; } h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 15px; margin: 16px 0 6px; }
.meta, .hint, .missing, .note { color: var(--muted); font-size: 13px; }
.headline { font-size: 15px; border-left: 4px solid var(--mixed); background: var(--bg); padding: 6px 12px; margin: 10px 0; }
.headline p { margin: 2px 0; } .headline details { font-size: 13px; color: var(--muted); }
ol.findings { list-style: none; padding-left: 0; margin: 6px 0; } ol.findings li { margin: 6px 0; }
.sev { display: inline-block; min-width: 68px; font-size: 11px; text-transform: uppercase; letter-spacing: .04em; color: #fff;
       background: #888; border-radius: 3px; padding: 0 5px; margin-right: 6px; text-align: center; }
.sev-critical { background: #b33; } .sev-warning { background: #b7791f; } .sev-info { background: #37a; }
details.stats { margin: 2px 0 0 78px; color: var(--muted); font-size: 13px; } details.stats summary { cursor: pointer; }
details.stats p { margin: 2px 0; }
.verdict { background: var(--bg); border-left: 3px solid var(--mixed); padding: 6px 10px; margin: 8px 0; }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0 12px; }
th, td { border-bottom: 1px solid var(--line); padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: var(--bg); font-weight: 600; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.sig-up { color: var(--good); font-weight: 600; } .sig-down { color: var(--bad); font-weight: 600; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 12px; }
figure.fig { margin: 0; border: 1px solid var(--line); border-radius: 4px; padding: 4px; background: #fff; }
figure.fig figcaption { font-size: 12px; color: var(--muted); padding: 0 6px 4px; }
.plot { width: 100%; min-height: 300px; }
.nav { display: flex; gap: 8px; align-items: center; margin: 8px 0; flex-wrap: wrap; }
.nav button, .nav select { font: inherit; padding: 2px 8px; }
.group { border: 1px solid var(--line); border-radius: 4px; margin: 10px 0; padding: 6px 10px; background: var(--bg); }
.group > header { font-weight: 600; margin-bottom: 4px; }
.group .g-kind { font-weight: normal; color: var(--muted); }
details.traj { background: #fff; border: 1px solid var(--line); border-radius: 3px; margin: 6px 0; padding: 2px 8px; }
details.traj > summary { cursor: pointer; padding: 2px 0; }
.pick { display: inline-block; min-width: 62px; font-weight: 600; }
.pick-best { color: var(--good); } .pick-worst { color: var(--bad); } .pick-ungraded { color: #a60; }
.turn { border-top: 1px dashed var(--line); padding: 4px 0; } .turn-head { font-size: 12px; color: var(--muted); }
.field-name { font-size: 11px; color: var(--mixed); text-transform: uppercase; letter-spacing: .03em; }
pre { white-space: pre-wrap; word-break: break-word; margin: 2px 0 6px; font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace;
      background: #f4f4f4; padding: 4px 6px; border-radius: 3px; max-height: 420px; overflow: auto; }
.cut { color: #a60; font-size: 12px; font-style: italic; margin: 0 0 6px; }
.error pre { background: #fdeaea; }
"""

SCRIPT = r"""
(function () {
  "use strict";
  var figures = JSON.parse(document.getElementById("report-figures").textContent);
  var config = {displaylogo: false, responsive: true, modeBarButtonsToRemove: ["sendDataToCloud"]};

  function stepsOf(run) {
    return Array.prototype.slice.call(document.querySelectorAll(".step[data-run='" + run + "']"));
  }
  function show(run, step, scroll) {
    var els = stepsOf(run);
    if (!els.length) { return; }
    var best = els[0], dist = Infinity;
    els.forEach(function (el) {
      var d = Math.abs(Number(el.getAttribute("data-step")) - Number(step));
      if (d < dist) { dist = d; best = el; }
    });
    els.forEach(function (el) { el.hidden = el !== best; });
    var sel = document.querySelector("select.step-select[data-run='" + run + "']");
    if (sel) { sel.value = best.getAttribute("data-step"); }
    if (scroll) { best.parentNode.scrollIntoView({behavior: "smooth", block: "start"}); }
  }
  function move(run, delta) {
    var els = stepsOf(run), i = 0;
    els.forEach(function (el, j) { if (!el.hidden) { i = j; } });
    var j = Math.min(Math.max(i + delta, 0), els.length - 1);
    show(run, els[j].getAttribute("data-step"), false);
  }
  document.querySelectorAll("select.step-select").forEach(function (sel) {
    sel.addEventListener("change", function () { show(sel.getAttribute("data-run"), sel.value, false); });
  });
  document.querySelectorAll("button.step-move").forEach(function (b) {
    b.addEventListener("click", function () { move(b.getAttribute("data-run"), Number(b.getAttribute("data-delta"))); });
  });
  figures.forEach(function (f) {
    var holder = document.getElementById("fig-" + f.name);
    if (!holder) { return; }
    var el = holder.querySelector(".plot");
    Plotly.newPlot(el, f.figure.data, f.figure.layout, config);
    el.on("plotly_click", function (ev) {
      if (!ev || !ev.points || !ev.points.length) { return; }
      var pt = ev.points[0], meta = (pt.data && pt.data.meta) || {};
      if (meta.run === undefined) { return; }
      show(String(meta.run), meta.step !== undefined ? meta.step : pt.x, true);
    });
  });
  document.documentElement.setAttribute("data-report-ready", "1");
})();
"""

TEMPLATE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{{ csp }}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="rolloutlab {{ version }}">
<title>{{ title }}</title>
<style>{{ css|safe }}</style>
</head>
<body>
<main>
<header>
<h1>{{ title }}</h1>
<p class="meta">{{ runs|length }} run{{ "s" if runs|length > 1 }} · generated {{ generated }} by rolloutlab {{ version }} ·
works offline (everything is in this file)</p>
</header>

<section id="headline">
{% for r in runs %}
<div class="headline" id="headline-{{ loop.index0 }}">
{% for sentence in r.headline.sentences %}<p>{{ sentence }}</p>{% endfor %}
{% if r.headline.basis %}<details><summary>how these were computed</summary><ul>{% for b in r.headline.basis %}<li>{{ b }}</li>{% endfor %}</ul></details>{% endif %}
</div>
{% endfor %}
</section>

<section id="findings">
<h2>Findings</h2>
<p class="hint">Most severe first; the statistics behind each are one click away.</p>
{% for r in runs %}
{% if runs|length > 1 %}<h3>{{ r.name }}</h3>{% endif %}
<ol class="findings">
{% for f in r.headline.findings %}
<li class="finding" data-kind="{{ f.kind }}"><span class="sev sev-{{ f.severity }}">{{ f.severity }}</span><b>{{ f.title }}</b>{% if f.in_headline %} <span class="meta">(in the headline)</span>{% endif %}{% if f.text %}: {{ f.text }}{% endif %}{% if f.steps %} <span class="meta">({% if f.steps[0] == f.steps[1] %}step {{ f.steps[0] }}{% else %}steps {{ f.steps[0] }}–{{ f.steps[1] }}{% endif %})</span>{% endif %}
{% if f.stats or f.actions|length > 1 %}<details class="stats"><summary>statistics</summary>{% if f.stats %}<p>{{ f.stats }}</p>{% endif %}
{% if f.actions|length > 1 %}<p>Also worth trying:</p><ul>{% for act in f.actions[1:] %}<li>{{ act }}</li>{% endfor %}</ul>{% endif %}</details>{% endif %}
</li>
{% else %}
<li class="finding">No findings: nothing in this run crossed a threshold.</li>
{% endfor %}
</ol>
{% if r.verdict.verdict not in r.headline.findings|map(attribute="kind")|list %}<p class="verdict"><b>pass@k vs mean: {{ r.verdict.verdict }}</b> — {{ r.verdict.explanation }}</p>{% endif %}
{% endfor %}
</section>

<section id="runs">
<h2>Run{{ "s" if runs|length > 1 }}</h2>
<table>
<tr><th>run</th><th>source</th><th>split</th><th>steps</th><th>trajectories</th><th>mean reward, last {{ late_label }}</th><th>all rollouts</th><th>success</th><th>pass@K early → late</th><th>success rule</th></tr>
{% for r in runs %}
<tr><td>{{ r.name }}{% if r.label %}<br><span class="meta">name: {{ r.label }}</span>{% endif %}{% for k, v in r.labels.items() %}<br><span class="meta">{{ k }}={{ v }}</span>{% endfor %}</td><td>{{ r.source }}</td><td>{{ r.split }}</td><td class="num">{{ r.summary.steps }}</td><td class="num">{{ r.summary.trajectories }}</td>
<td class="num">{{ r.summary.reward }}</td><td class="num">{{ r.summary.reward_all }}</td><td class="num">{{ r.summary.success }}</td>
<td class="num">{{ r.summary.passk }}</td><td>{{ r.success_rule }}</td></tr>
{% endfor %}
</table>
{% for r in runs %}{% for what, why in r.skipped.items() %}
<p class="note">{{ r.name }}: {{ what }} not computed — {{ why }}</p>
{% endfor %}{% endfor %}
</section>

{% if runs|length > 1 %}
<section id="comparison">
<h2>Comparison with {{ runs[0].name }}</h2>
{% if comparison %}
<p class="note">Each run minus the baseline ({{ runs[0].name }}) on the steps every run has ({{ comparison.steps }}); {{ comparison.level }} bootstrap intervals, paired by task where the tasks match, else resampling whole groups, widened for small samples (expanded percentile: a step has few tasks, and with ~16 plain percentile intervals cover only 91–93&nbsp;% at a nominal 95&nbsp;%). Bold: the interval excludes 0.</p>
<table>
<tr><th>run</th><th>window</th><th>steps</th><th>metric</th><th>difference</th><th>interval</th><th>paired</th><th>units (run / base)</th></tr>
{% for row in comparison.rows %}
<tr><td>{{ row.arm }}</td><td>{{ row.window }}</td><td>{{ row.steps }}</td><td>{{ row.metric }}</td>
<td class="num {{ row.sig }}">{{ row.estimate }}</td><td class="num">{{ row.interval }}</td><td>{{ row.paired }}</td><td class="num">{{ row.units }}</td></tr>
{% endfor %}
</table>
{% else %}
<p class="note">No comparison: {{ comparison_note }}</p>
{% endif %}
</section>
{% endif %}

<section id="metrics">
<h2>Metrics</h2>
<p class="hint">Click a point on any curve to show that step's sampled trajectories below. Dotted lines are the two-segment saturation fits; ◆ marks their breakpoint.</p>
<div class="grid">
{% for f in figures %}
<figure class="fig" id="fig-{{ f.name }}" data-figure="{{ f.name }}"><div class="plot"></div><figcaption>{{ f.caption }}</figcaption></figure>
{% endfor %}
</div>
{% if missing %}<p class="missing">Not shown: {% for name, why in missing.items() %}{{ name }} ({{ why }}){{ "; " if not loop.last }}{% endfor %}.</p>{% endif %}
</section>

<section id="samples">
<h2>Sampled trajectories</h2>
<p class="hint">Per step, up to {{ groups_per_step }} groups (mixed outcomes first), and of each its best, median and worst sample. Texts longer than {{ max_chars }} characters are cut, with a note.</p>
{% for r in runs %}
{% set ri = loop.index0 %}
<div class="run-samples" data-run="{{ ri }}">
{% if runs|length > 1 %}<h3>{{ r.name }}</h3>{% endif %}
{% if r.samples|length < r.steps_total %}<p class="cut">Samples of {{ r.samples|length }} of {{ r.steps_total }} steps (evenly spaced, the last included): all of them would make the page too large to open (raise --max-sample-chars).</p>{% endif %}
{% if r.samples %}
<div class="nav"><button type="button" class="step-move" data-run="{{ ri }}" data-delta="-1">◀ previous</button>
<label>step <select class="step-select" data-run="{{ ri }}">{% for s in r.samples %}<option value="{{ s.step }}"{% if loop.last %} selected{% endif %}>{{ s.step }}</option>{% endfor %}</select></label>
<button type="button" class="step-move" data-run="{{ ri }}" data-delta="1">next ▶</button></div>
{% for s in r.samples %}
<div class="step" data-run="{{ ri }}" data-step="{{ s.step }}"{% if not loop.last %} hidden{% endif %}>
<h3>{{ r.name }} · step {{ s.step }}</h3>
{% for g in s.groups %}
<article class="group">
<header>{% if g.group_id is not none %}group {{ g.group_id }}{% else %}all trajectories of the step{% endif %}{% if g.task_id %} · task {{ g.task_id }}{% endif %}
<span class="g-kind">· {{ g.kind }} · {{ g.graded }}/{{ g.members }} graded{% if g.reward_min is not none %} · reward {{ "%.3g"|format(g.reward_min) }}–{{ "%.3g"|format(g.reward_max) }}{% endif %}</span></header>
{% if g.prompt %}<details><summary>prompt</summary>{{ text(g.prompt) }}</details>{% endif %}
{% for p in g.picks %}
<details class="traj"{% if loop.first %} open{% endif %}>
<summary><span class="pick pick-{{ p.label }}">{{ p.label }}</span> {{ p.traj_id }} · {% if p.graded %}reward {{ "%.4g"|format(p.reward) }}{% else %}ungraded{% endif %}{% if p.success is not none %} · {{ "success" if p.success else "failure" }}{% endif %}{% if p.termination %} · {{ p.termination }}{% endif %}{% if p.num_turns is not none %} · {{ p.num_turns }} turns{% endif %}{% if p.tool_calls is not none %} · {{ p.tool_calls }} tool calls{% endif %}</summary>
{% for t in p.head %}{{ turn(t) }}{% endfor %}
{% if p.omitted_turns %}<p class="cut">… {{ p.omitted_turns }} turns not shown …</p>{% endif %}
{% for t in p.tail %}{{ turn(t) }}{% endfor %}
{% if not p.head and not p.tail and p.response %}<div class="field"><span class="field-name">response</span>{{ text(p.response) }}</div>{% endif %}
{% if p.error %}<div class="field error"><span class="field-name">error</span>{{ text(p.error) }}</div>{% endif %}
</details>
{% endfor %}
</article>
{% else %}
<p class="note">No trajectories at this step.</p>
{% endfor %}
</div>
{% endfor %}
{% else %}
<p class="note">No trajectories.</p>
{% endif %}
</div>
{% endfor %}
</section>
</main>
<script type="application/json" id="report-figures">{{ figure_json|safe }}</script>
<script>{{ plotly_js|safe }}</script>
<script>{{ script|safe }}</script>
</body>
</html>
"""

MACROS = """
{% macro text(t) %}<pre>{{ t.text }}</pre>{% if t.cut %}<p class="cut">… cut: {{ "{:,}".format(t.cut) }} more characters not shown</p>{% endif %}{% endmacro %}
{% macro turn(t) %}<div class="turn"><div class="turn-head">turn {{ t.turn_idx }}{% if t.reward is not none %} · reward {{ "%.4g"|format(t.reward) }}{% endif %}{% if t.action_valid is not none %} · {{ "valid" if t.action_valid else "INVALID" }} action{% endif %}</div>
{% for name, x in t.fields %}<div class="field"><span class="field-name">{{ name }}</span>{{ text(x) }}</div>{% endfor %}</div>{% endmacro %}
"""
