"""The trajectory page's token view, the token page and the diff of two samples (issue 22 §1).

One hand-built run: a group of three samples (rewards 1, 0, 0.5) whose turns record their
tokens (hostile pieces, template tokens with mask 0, one turn longer than the page shows),
and one sample in a group of its own.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator

import pytest

pytest.importorskip("fastapi")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

import rolloutlab
from rolloutlab.io import RunWriter
from rolloutlab.schema import Run, Trajectory, Turn, TurnTokens
from rolloutlab.viewer import create_app
from rolloutlab.viewer._tokens import TOKEN_PAGE, TOKEN_PREVIEW

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx`:DeprecationWarning")

HOSTILE = "<script>window.__xss=1</script>"
LONG = TOKEN_PREVIEW + TOKEN_PAGE + 10  # three pages: the preview, one full token page, the rest


def _tokens(pieces: list[str], mask: list[int], adv: float, gap: float = 0.0) -> TurnTokens:
    n = len(pieces)
    lps = [-0.5 if m else 0.0 for m in mask]
    return TurnTokens(ids=list(range(10, 10 + n)), text=pieces, loss_mask=mask, logprobs=lps,
                      trainer_logprobs=[x - gap if m else 0.0 for x, m in zip(lps, mask, strict=True)],
                      advantages=[adv if m else 0.0 for m in mask], entropies=[1.0 if m else 0.0 for m in mask])


def _traj(i: int, reward: float, adv: float, *, group: str = "g0", long: bool = False) -> Trajectory:
    first = _tokens([HOSTILE, " ok", "", "\nobs"], [1, 1, 0, 0], adv, gap=0.25)
    second = (_tokens(["x"] * LONG, [1] * LONG, adv) if long else _tokens(["4", ""], [1, 1], adv))
    return Trajectory(
        traj_id=f"t{i}", step=1, group_id=group, sample_idx=i, task_id="task", reward=reward, num_turns=2,
        turns=[Turn(turn_idx=0, observation="start", action=HOSTILE + " ok", reward=0.0, finish_reason="stop",
                    token_data=first),
               Turn(turn_idx=1, observation="obs", action="4", reward=reward, finish_reason="length",
                    token_data=second)],
    )


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    root = tmp_path_factory.mktemp("tokens")
    with RunWriter(root / "run", Run(run_id="tok", name="tok", algorithm="grpo")) as w:
        w.write_step(1, [_traj(0, 1.0, 1.0), _traj(1, 0.0, -1.0, long=True), _traj(2, 0.5, 0.0),
                         _traj(3, 1.0, 0.0, group="alone")])
    rolloutlab.ingest([root / "run"], root / "store")
    with TestClient(create_app(root / "store"), base_url="http://127.0.0.1:8000",
                    client=("127.0.0.1", 50000)) as c:
        yield c


def _page(client: TestClient, path: str, **params: object) -> str:
    r = client.get(path, params=params or None)
    assert r.status_code == 200, r.text[:500]
    return r.text


def test_the_trajectory_page_shows_each_turns_tokens(client: TestClient) -> None:
    html = _page(client, "/runs/tok/traj", id="t0")
    assert html.count('class="tokens"') == 2 and 'id="tok-switch"' in html
    # the sampled tokens are coloured (advantage +1: green), the template tokens greyed, uncoloured
    assert re.search(r'<span class="tok" style="background: rgba\(22, 163, 74, 0\.72\)" title="#1 · id 11', html)
    assert '<span class="tok masked special" title="#2 · id 12 · not trained (mask 0)">⟨12⟩</span>' in html
    assert '<span class="tok masked" title="#3 · id 13 · not trained (mask 0)">\nobs</span>' in html
    # per-turn finish reason, reward, advantage and the sampler/trainer gap in the headers
    assert [m for m in re.findall(r'finish <b class="finish">(\w+)</b>', html)] == ["stop", "length"]
    assert "log-prob gap max <b>0.2500</b>" in html
    assert "4 tokens, 2 trained · advantage <b>1.0000</b> · mean sampler log-prob <b>-0.500</b>" in html


def test_hostile_tokens_are_escaped(client: TestClient) -> None:
    html = _page(client, "/runs/tok/traj", id="t0")
    assert HOSTILE not in html
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in html


def test_the_page_states_the_samples_advantage_under_the_runs_estimator(client: TestClient) -> None:
    # GRPO over the group's rewards 1, 0, 0.5: mean 0.5, unbiased std 0.5 (verl's torch.std),
    # so sample 0 gets (1 - 0.5) / (0.5 + 1e-6) = +1.000 and sample 1 gets -1.000
    html = _page(client, "/runs/tok/traj", id="t0")
    adv = re.search(r'<p class="meta" id="traj-adv">(.*?)</p>', html, re.S)
    assert adv and "adv <b>+1.000</b>" in adv.group(1) and "under <b>grpo</b> (default: the run" in adv.group(1)
    assert 'data-adv="0.999998' in adv.group(1)
    html = _page(client, "/runs/tok/traj", id="t1", adv="rloo")  # RLOO: 0 - mean(1, 0.5) = -0.75
    assert "adv <b>-0.750</b>" in html and "under <b>rloo</b>" in html


def test_the_colour_switch(client: TestClient) -> None:
    html = _page(client, "/runs/tok/traj", id="t0", color="gap")
    assert '<b class="tok-color on">gap</b>' in html
    assert 'style="background: rgba(147, 51, 234, 0.75)"' in html  # the largest gap: full depth
    html = _page(client, "/runs/tok/traj", id="t0", color="logprob")  # 1 - exp(-0.5) = 0.393
    assert f'style="background: rgba(234, 88, 12, {0.05 + 0.7 * 0.3935:.2f})"' in html
    r = client.get("/runs/tok/traj", params={"id": "t0", "color": "<b>"})
    assert r.status_code == 400 and "color must be one of" in r.text and "<b>" not in r.text


def test_long_turns_are_capped_and_paged(client: TestClient) -> None:
    html = _page(client, "/runs/tok/traj", id="t1")
    turn1 = html[html.index('id="turn-1"'):]
    assert turn1.count('<span class="tok"') == TOKEN_PREVIEW
    more = re.search(r'<a class="tok-more" href="([^"]+)">show more</a>', turn1)
    assert more and f"showing tokens 0–{TOKEN_PREVIEW:,} of {LONG:,}" in turn1
    page = _page(client, more.group(1).replace("&amp;", "&"))
    assert page.count('<span class="tok"') == TOKEN_PAGE and f'title="#{TOKEN_PREVIEW} · id' in page
    nxt = re.search(r'<a id="tok-next" href="([^"]+)"', page)
    assert nxt
    last = _page(client, nxt.group(1).replace("&amp;", "&"))
    assert last.count('<span class="tok"') == 10 and 'id="tok-next"' not in last
    r = client.get("/runs/tok/tokens", params={"id": "t1", "turn": 7})
    assert r.status_code == 404 and "turns with tokens: 0, 1" in r.text


def test_diff_shows_best_against_worst_by_default(client: TestClient) -> None:
    html = _page(client, "/runs/tok/diff", id="t2")
    heads = re.findall(r'<th>\s*<a href="[^"]*id=(t\d)', html)
    assert heads == ["t0", "t1"]  # reward 1 (best) left, reward 0 (worst) right
    assert html.count('class="diff-turn"') == 2 and html.count('class="tokens"') == 4
    assert HOSTILE not in html
    html = _page(client, "/runs/tok/diff", id="t2", a="t2", b="t0")
    assert re.findall(r'<th>\s*<a href="[^"]*id=(t\d)', html) == ["t2", "t0"]
    r = client.get("/runs/tok/diff", params={"id": "t2", "a": "t3"})
    assert r.status_code == 400 and "a must be a sample of this group" in r.text
    r = client.get("/runs/tok/diff", params={"id": "t3"})
    assert r.status_code == 404 and "a group of one" in r.text
    assert 'id="diff-link"' in _page(client, "/runs/tok/traj", id="t0")


# -- the figures of a turn, by hand -------------------------------------------------------


def test_turn_figures_by_hand() -> None:
    from rolloutlab.viewer._tokens import parse, scales, turn_view

    d = parse({"ids": [1, 2, 3], "loss_mask": [1, 1, 0], "logprobs": [-1.0, -2.0, 0.0],
               "trainer_logprobs": [-1.5, -2.25, 0.0], "advantages": [1.0, 2.0, 0.0], "entropies": [0.5, 3.0, 9.0]})
    assert d is not None
    sc = scales([d])
    assert sc == {"advantage": 2.0, "entropy": 3.0, "gap": 0.5}  # the mask-0 token's entropy 9 is left out
    v = turn_view(d, "gap", sc)
    assert (v.total, v.trained, v.mean_logprob, v.gap_mean, v.gap_max) == (3, 2, -1.5, 0.375, 0.5)
    assert v.advantage is None  # two different values: no one turn advantage
    assert v.has == {"advantage", "logprob", "entropy", "gap"}
    assert [t.style for t in v.tokens] == ["background: rgba(147, 51, 234, 0.75)",
                                           "background: rgba(147, 51, 234, 0.40)", ""]
    # no mask recorded: every token counts as trained; only ids: nothing to colour by
    bare = parse({"ids": [7, 8]})
    assert bare is not None and turn_view(bare, "advantage", scales([bare])).trained == 2
    assert turn_view(bare, "advantage", scales([bare])).has == set()


def test_token_data_another_tool_wrote_badly_is_not_shown() -> None:
    from rolloutlab.viewer._tokens import parse

    assert parse({"ids": [1, 2], "loss_mask": [1]}) is None  # misaligned
    assert parse({"loss_mask": [1]}) is None  # neither ids nor text
    assert parse([1, 2]) is None
