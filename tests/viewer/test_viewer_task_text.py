"""Cards and the task page show what the task is (its last user turn) and the END of the
response, where the final answer is (issue 10 § 3)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import rolloutlab
from rolloutlab.viewer._queries import SNIPPET, USER_SHOWN, user_turn
from tests._verl import verl_line
from tests.viewer.test_viewer import client_for

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx`:DeprecationWarning")

SYSTEM = "You are a careful solver. " * 40  # a long system prompt: the start of the prompt says nothing
XSS = '<img src=x onerror="window.__xss=1">'


@pytest.mark.parametrize(("prompt", "want"), [
    ("<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nWhat is 6*7?<|im_end|>\n<|im_start|>assistant\n",
     "What is 6*7?"),
    ("<|start_header_id|>system<|end_header_id|>\n\nx<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nhi there"
     "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", "hi there"),
    ("<s>[INST] name a prime [/INST]", "name a prime"),
    ("system\nbe brief\nuser\nquestion 3\nassistant\n", "question 3"),  # verl: specials stripped
    ("system\ns\nuser\nfirst\nassistant\nok\nuser\nsecond turn\nassistant\n", "second turn"),  # the last one
    ("no template here", None),
    ("", None),
])
def test_user_turn(prompt: str, want: str | None) -> None:
    assert user_turn(prompt) == want


@pytest.fixture
def store(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    long_answer = "step " * 400 + "so the final ANSWER: 42"
    lines = [verl_line(1, f"system\n{SYSTEM}\nuser\nHow many legs do 21 birds have? {XSS}\nassistant\n", s,
                       output=long_answer if i == 0 else f"short {XSS}", acc=bool(s)) for i, s in enumerate([1, 0])]
    lines += [verl_line(1, "no template at all " * 100 + "TAIL-OF-PROMPT", 0, output="x") for _ in range(2)]
    (src / "1.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    rolloutlab.ingest([src], tmp_path / "store", name="r")
    return tmp_path / "store"


def test_groups_show_the_user_turn_and_cards_the_end_of_the_response(store: Path) -> None:
    with client_for(store) as c:
        page = c.get("/runs/r/steps/1").text
    texts = re.findall(r'<p class="task-text"[^>]*>(.*?)</p>', page, flags=re.S)
    assert len(texts) == 2
    user = next(t for t in texts if "How many legs do 21 birds have?" in t)
    assert "careful solver" not in user and "user:" in user
    end = next(t for t in texts if "prompt end:" in t)
    assert end.endswith("TAIL-OF-PROMPT") and "…" in end  # no template: the prompt's end, cut at its start
    assert len(re.sub(r"<[^>]+>", "", end)) < USER_SHOWN + 20
    snippets = re.findall(r'<div class="snippet end"><span>(.*?)</span></div>', page, flags=re.S)
    assert any(s.startswith("…") and s.endswith("so the final ANSWER: 42") and len(s) <= SNIPPET + 1
               for s in snippets)
    assert XSS not in page and "&lt;img src=x" in page  # hostile text is text


def test_task_page_shows_the_task_and_each_response_end(store: Path) -> None:
    with client_for(store) as c:
        step = c.get("/runs/r/steps/1").text
        group = next(g for g in step.split('<section class="group') if "How many legs" in g)
        # one step: the group offers no "task across training" (issue 22 § 4); the trajectory does
        assert "/runs/r/task?" not in group
        card = re.search(r'href="(/runs/r/traj\?[^"]+)"', group)
        assert card is not None
        traj = c.get(card.group(1).replace("&amp;", "&")).text
        href = re.search(r'id="task-link" href="(/runs/r/task\?[^"]+)"', traj)
        assert href is not None
        page = c.get(href.group(1).replace("&amp;", "&")).text
    task = re.search(r'<p class="task-text" id="task-text">(.*?)</p>', page, flags=re.S)
    assert task is not None and "How many legs do 21 birds have?" in task.group(1)
    ends = re.findall(r'<div class="snippet response-end">(.*?)</div>', page, flags=re.S)
    assert any("so the final ANSWER: 42" in e for e in ends)
    assert XSS not in page
