"""Action parsers: each format, and replies they cannot read (an error, never a crash)."""

from __future__ import annotations

import pytest

from rolloutlab.agent import Generation, format_action, parse_action
from rolloutlab.envs import ToolInvocation


def _g(text: str, calls: tuple[ToolInvocation, ...] = ()) -> Generation:
    return Generation(text=text, token_ids=None, logprobs=None, finish_reason="stop", tool_calls=calls)


def test_xml() -> None:
    p = parse_action("xml", _g("<think>go up</think>\n<action> north </action>"))
    assert p.valid and p.actions == ("north",) and p.thought == "go up"
    assert parse_action("xml", _g("<action>a</action> then <action>b</action>")).actions == ("b",)
    bad = parse_action("xml", _g("<think>hmm</think> north"))
    assert not bad.valid and "no <action>" in (bad.error or "") and bad.thought == "hmm"
    assert not parse_action("xml", _g("<action>  </action>")).valid


def test_react() -> None:
    p = parse_action("react", _g("Thought: it is hot\nAction: open fridge\nObservation: (none)"))
    assert p.actions == ("open fridge",) and p.thought == "it is hot"
    assert parse_action("react", _g("Thought:\nx\n\nAction:\ngo to desk 1")).actions == ("go to desk 1",)
    assert not parse_action("react", _g("I will open the fridge")).valid


def test_search_r1_first_tag_wins_and_keeps_its_tag() -> None:
    p = parse_action("search_r1", _g("<think>need facts</think><search> capital of France </search><answer>x</answer>"))
    assert p.actions == ("<search>capital of France</search>",) and p.thought == "need facts"
    assert parse_action("search_r1", _g("<answer>Paris</answer>")).actions == ("<answer>Paris</answer>",)
    assert not parse_action("search_r1", _g("Paris")).valid


def test_tool_call_and_hermes() -> None:
    call = ToolInvocation(name="grep", arguments={"pattern": "def"}, id="c1")
    assert parse_action("tool_call", _g("", (call,))).actions == (call,)
    assert not parse_action("tool_call", _g("grep def")).valid
    p = parse_action("hermes", _g('<tool_call>{"name": "ls", "arguments": {"path": "."}}</tool_call>'
                                  '<tool_call>{"name": "cat", "arguments": "{\\"path\\": \\"a.py\\"}"}</tool_call>'))
    assert [(a.name, dict(a.arguments)) for a in p.actions if isinstance(a, ToolInvocation)] == [
        ("ls", {"path": "."}), ("cat", {"path": "a.py"})]
    for bad, why in [("<tool_call>{not json</tool_call>", "not valid JSON"),
                     ('<tool_call>{"arguments": {}}</tool_call>', '"name"'),
                     ('<tool_call>{"name": "ls", "arguments": [1]}</tool_call>', "must be a JSON object"),
                     ("ls .", "no <tool_call>")]:
        r = parse_action("hermes", _g(bad))
        assert not r.valid and why in (r.error or "")


def test_text_strips_think_and_refuses_empty() -> None:
    assert parse_action("text", _g("<think>x</think> 5 ")).actions == ("5",)
    assert not parse_action("text", _g("   ")).valid
    assert not parse_action("text", _g("<think>only thinking")).valid


@pytest.mark.parametrize("name", ["text", "xml", "react", "search_r1"])
def test_format_action_round_trips(name: str) -> None:
    action = "<answer>go</answer>" if name == "search_r1" else "go"
    assert parse_action(name, _g(format_action(name, "go"))).actions == (action,)


@pytest.mark.parametrize("name", ["text", "xml", "react", "search_r1", "tool_call", "hermes"])
def test_hostile_text_never_crashes(name: str) -> None:
    for text in ["\x00" * 10, "<action>" * 1000, "<tool_call>" + "{" * 5000, "\udcff", "A" * 100_000]:
        parse_action(name, _g(text))
