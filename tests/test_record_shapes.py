"""One trajectory record, four shapes: they cannot drift apart.

The pydantic ``Trajectory``/``Turn`` (the run directory), the store's Arrow tables
(``trajectories``, ``turns``, ``texts``), and the sink importers write into
(``PartSink.add_trajectory``'s keywords and ``TurnData``) are kept by hand, because ingest
is a hot path (building a pydantic object per record costs more than parsing it; the sink
is the fast mirror).  These tests tie them: every field of the model has its column and its
sink argument, of a compatible type, and every column and argument has its field — but for
the exceptions declared below, each with its reason.  A field added on one side only fails
here, naming it (``test_a_field_added_on_one_side_only_is_caught`` shows it does).
"""

from __future__ import annotations

import inspect
import json
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import BaseModel

from rolloutlab.io._sink import PartSink, TurnData, anchor_hash
from rolloutlab.io.importers.rolloutlab import add_trajectory
from rolloutlab.schema import TEXTS, TRAJECTORIES, TURNS, ToolCall, Trajectory, Turn, TurnTokens

# -- the declared exceptions ------------------------------------------------------------

KEYS = ("run_id", "split", "step", "traj_id", "turn_idx")
"""Key columns of the ``texts`` table (and, but for ``turn_idx``, of ``turns``): which run,
trajectory and turn a row belongs to.  ``run_id`` is the run the ingest writes into, not a
field of the record; the others repeat the trajectory's own fields on its turn rows."""

TRAJECTORY_COLUMNS_NOT_FIELDS = {
    "run_id": "the run the ingest writes into; a record does not name it",
    "prompt_chars": "length of the prompt as stored in texts, so that numeric queries need not read texts",
    "response_chars": "length of the response as stored in texts, for the same reason",
}
TURN_COLUMNS_NOT_FIELDS = {
    "run_id": "the run the ingest writes into",
    "split": "the trajectory's split, repeated on each of its turn rows",
    "step": "the trajectory's step, repeated on each of its turn rows",
    "traj_id": "the trajectory's id, repeated on each of its turn rows",
    "num_tool_calls": "len(Turn.tool_calls); the calls themselves are JSON in texts.tool_calls",
    "anchor_hash": "hash of Turn.anchor_obs: GiGPO's step groups without reading texts",
}
FIELDS_NOT_COLUMNS = {
    ("Trajectory", "turns"): "one row per turn in the turns and texts tables (checked field by field as Turn)",
    ("Turn", "extras"): "annotations of the run directory (a process-reward label's details, the environment reward "
                        "it replaced); the store keeps the label's value as the turn's reward and the run's config "
                        "says how it was labelled",
}
FIELDS_NOT_SINK_ARGUMENTS = {
    ("Turn", "turn_idx"): "a TurnData's position in add_trajectory's turns is its turn_idx",
    ("Turn", "extras"): "not stored (see FIELDS_NOT_COLUMNS)",
}
AS_HANDED_TO_THE_SINK: dict[Any, Any] = {Turn: TurnData, ToolCall: dict[str, Any], TurnTokens: dict[str, Any]}
"""Records nested in a trajectory reach the sink as the sink's own light types."""

TABLES = {"trajectories": TRAJECTORIES, "turns": TURNS, "texts": TEXTS}
_SCALARS = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_()}


# -- types -----------------------------------------------------------------------------


def _members(t: Any) -> list[Any]:
    """The members of a union, ``None`` left out (a plain type is its own one member)."""
    if get_origin(t) in (Union, types.UnionType):
        return [a for a in get_args(t) if a is not type(None)]
    return [t]


def _optional(t: Any) -> bool:
    return t is Any or (get_origin(t) in (Union, types.UnionType) and type(None) in get_args(t))


def _accepts(sink_t: Any, model_t: Any) -> bool:
    """Every value of ``model_t`` (nested records as handed over) is a value of ``sink_t``."""
    if _optional(model_t) and not _optional(sink_t):
        return False
    return all(any(_accepts_one(s, m) for s in _members(sink_t)) for m in _members(model_t))


def _accepts_one(s: Any, m: Any) -> bool:
    if s is Any:
        return True
    m = AS_HANDED_TO_THE_SINK.get(m, m)
    if get_origin(m) is Literal:
        return isinstance(s, type) and all(isinstance(v, s) for v in get_args(m))
    so, mo = get_origin(s) or s, get_origin(m) or m
    if not (isinstance(so, type) and isinstance(mo, type) and issubclass(mo, so)):
        return False
    sa, ma = get_args(s), get_args(m)
    return not sa or (len(sa) == len(ma) and all(_accepts(x, y) for x, y in zip(sa, ma, strict=True)))


def _kind(model: type[BaseModel]) -> str:
    """Which record ``model`` is (the exceptions name the record, a test may grow a subclass)."""
    return "Trajectory" if issubclass(model, Trajectory) else "Turn"


def _arrow_type(t: Any) -> pa.DataType | None:
    """The Arrow type a numbers table stores ``t`` as; None for what only texts can hold."""
    ms = _members(t)
    if len(ms) != 1:
        return None  # text or chat messages: JSON in texts
    m = ms[0]
    if get_origin(m) is Literal:
        return pa.string() if all(isinstance(v, str) for v in get_args(m)) else None
    if m in _SCALARS:
        return _SCALARS[m]
    if get_origin(m) in (dict, Mapping):
        k, v = (_arrow_type(a) for a in get_args(m))
        return pa.map_(k, v) if k is not None and v is not None else None
    return None


# -- the checks (each returns what is wrong, so that a test can also show they catch it) --


def model_vs_store(trajectory: type[BaseModel] = Trajectory, turn: type[BaseModel] = Turn,
                   tables: Mapping[str, pa.Schema] = TABLES) -> list[str]:
    """Each field has its column of a compatible type, and each column its field."""
    problems: list[str] = []
    cols = {name: {f.name: f.type for f in schema} for name, schema in tables.items()}
    texts = {c: t for c, t in cols["texts"].items() if c not in KEYS}
    text_fields: set[str] = set()
    for model, numbers, not_fields in ((trajectory, "trajectories", TRAJECTORY_COLUMNS_NOT_FIELDS),
                                       (turn, "turns", TURN_COLUMNS_NOT_FIELDS)):
        fields = model.model_fields
        for name, info in fields.items():
            if (_kind(model), name) in FIELDS_NOT_COLUMNS:
                continue
            if name in cols[numbers]:
                want = _arrow_type(info.annotation)
                if want is None or cols[numbers][name] != want:
                    problems.append(f"{model.__name__}.{name} ({info.annotation}) is stored as "
                                    f"{numbers}.{name} of type {cols[numbers][name]}; expected {want}")
            elif name in texts:
                text_fields.add(name)
                if texts[name] != pa.string():
                    problems.append(f"texts.{name} must be a string column, is {texts[name]}")
            else:
                problems.append(f"{model.__name__}.{name} has no column in {numbers} or texts "
                                "(add one in schema/_arrow.py, or declare why in this test)")
        for name in cols[numbers]:
            if name not in fields and name not in not_fields:
                problems.append(f"{numbers}.{name} is no field of {model.__name__} "
                                "(add the field in schema/_records.py, or declare why in this test)")
    for name in texts.keys() - text_fields:
        problems.append(f"texts.{name} is no text field of Trajectory or Turn")
    return problems


def model_vs_sink(trajectory: type[BaseModel] = Trajectory, turn: type[BaseModel] = Turn,
                  add: Any = PartSink.add_trajectory, turn_data: type = TurnData) -> list[str]:
    """Each field is a sink argument that accepts its values, and each argument a field."""
    problems: list[str] = []
    params = [p for p in inspect.signature(add).parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    add_hints = typing.get_type_hints(add)
    shapes = (
        (trajectory, "PartSink.add_trajectory", {p.name: add_hints[p.name] for p in params}),
        (turn, "TurnData", typing.get_type_hints(turn_data)),
    )
    for model, where, args in shapes:
        for name, info in model.model_fields.items():
            if (_kind(model), name) in FIELDS_NOT_SINK_ARGUMENTS:
                continue
            if name not in args:
                problems.append(f"{model.__name__}.{name} is no argument of {where}")
            elif not _accepts(args[name], info.annotation):
                problems.append(f"{where}'s {name} ({args[name]}) does not take "
                                f"{model.__name__}.{name} ({info.annotation})")
        for name in args.keys() - model.model_fields.keys():
            problems.append(f"{where}'s {name} is no field of {model.__name__}")
    return problems


def test_every_field_has_its_column_and_every_column_its_field() -> None:
    assert model_vs_store() == []


def test_every_field_is_a_sink_argument_and_every_argument_a_field() -> None:
    assert model_vs_sink() == []


def test_the_batch_path_takes_fields_of_the_record_only(tmp_path: Path) -> None:
    assert PartSink.BATCH_COLUMNS - (Trajectory.model_fields.keys() - {"turns"}) == set()
    sink = PartSink("run-1", tmp_path, "part-0")
    with pytest.raises(ValueError, match=r"no column \['sucess'\]"):  # dropped silently before
        sink.add_trajectories([1], {"traj_id": ["t"], "step": [0], "reward": [1.0], "sucess": [True]})
    sink.add_trajectories([1], {"traj_id": ["t"], "step": [0], "reward": [1.0], "success": [True]})
    assert sink.counts["trajectories"] == 1  # the refused call kept nothing


def test_a_field_added_on_one_side_only_is_caught() -> None:
    class GrownTrajectory(Trajectory):
        difficulty: float | None = None

    class GrownTurn(Turn):
        latency_s: float | None = None

    assert model_vs_store(trajectory=GrownTrajectory) == [
        "GrownTrajectory.difficulty has no column in trajectories or texts "
        "(add one in schema/_arrow.py, or declare why in this test)"]
    assert model_vs_sink(turn=GrownTurn) == ["GrownTurn.latency_s is no argument of TurnData"]
    grown = {**TABLES, "turns": TURNS.append(pa.field("latency_s", pa.float64()))}
    assert model_vs_store(tables=grown) == [
        "turns.latency_s is no field of Turn (add the field in schema/_records.py, or declare why in this test)"]
    narrowed = {**TABLES, "trajectories": TRAJECTORIES.set(TRAJECTORIES.get_field_index("reward"),
                                                            pa.field("reward", pa.string()))}
    assert model_vs_store(tables=narrowed) == [
        "Trajectory.reward (float | None) is stored as trajectories.reward of type string; expected double"]

    def add(self: PartSink, *, traj_id: str, step: int, difficulty: float | None = None) -> None: ...

    assert "PartSink.add_trajectory's difficulty is no field of Trajectory" in model_vs_sink(add=add)
    assert "Trajectory.reward is no argument of PartSink.add_trajectory" in model_vs_sink(add=add)


# -- and the values survive: a record with every field set, written and read back --------

FULL = Trajectory(
    traj_id="t1", step=3, split="val", group_id="g1", sample_idx=1, task_id="task-7", data_source="env-v0",
    model="m", prompt=[{"role": "user", "content": "guess"}], response="4", reward=0.75,
    reward_components={"format": 0.25}, success=True, graded=True, termination="max_turns", error="slow grader",
    num_turns=2, prompt_tokens=11, response_tokens=5, tool_calls=1, invalid_actions=1,
    turns=[
        Turn(turn_idx=0, observation="guess", anchor_obs="start", thought="hm", action="call f", parsed_action="f(1)",
             tool_calls=[ToolCall(name="f", arguments='{"x": 1}', id="c0", result="ok")], action_valid=False,
             reward=0.25, done=False, tokens=3, entropy=0.5, finish_reason="tool_calls", extras={"env_reward": 0.0},
             token_data=TurnTokens(ids=[7, 8, 2, 5], text=["call", " f", "", "ok"], loss_mask=[1, 1, 1, 0],
                                   logprobs=[-0.5, -1.25, -0.0625, 0.0], trainer_logprobs=[-0.5, -1.5, -0.125, 0.0],
                                   advantages=[0.5, 0.5, 0.5, 0.0], entropies=[1.0, 0.75, 0.25, 0.0])),
        Turn(turn_idx=1, observation="ok", anchor_obs="after f", thought="so", action="4", parsed_action="4",
             tool_calls=[ToolCall(name="g", arguments="{}", id="c1", result="done")], action_valid=True,
             reward=0.5, done=True, tokens=2, entropy=0.25, finish_reason="stop",
             extras={"label": {"method": "mc", "value": 0.5}},
             token_data=TurnTokens(ids=[4, 2], text=["4", ""], loss_mask=[1, 1], logprobs=[-0.25, -0.5],
                                   trainer_logprobs=[-0.25, -0.5], advantages=[0.5, 0.5], entropies=[0.5, 0.5])),
    ],
    extras={"env_seed": 5},
)


@pytest.mark.parametrize("record", [FULL, *FULL.turns, *FULL.turns[0].tool_calls, FULL.turns[0].token_data],
                         ids=["Trajectory", "Turn 0", "Turn 1", "ToolCall", "TurnTokens"])
def test_the_sample_record_sets_every_field(record: BaseModel) -> None:
    unset = [name for name in type(record).model_fields if getattr(record, name) in (None, [], {})]
    assert unset == [], f"set these fields of FULL in this test, so that the round trip covers them: {unset}"


def _stored(value: Any, column_type: pa.DataType) -> Any:
    """``value`` as a column of ``column_type`` reads back with ``to_pylist``."""
    if isinstance(value, BaseModel):
        value = value.model_dump(exclude_none=True)
    if isinstance(value, list) and value and isinstance(value[0], BaseModel):
        value = [v.model_dump(exclude_none=True) for v in value]
    if pa.types.is_map(column_type):
        return list(value.items())
    if pa.types.is_string(column_type) and not isinstance(value, str):
        return json.dumps(value)
    return value


def test_every_field_survives_the_sink(tmp_path: Path) -> None:
    sink = PartSink("run-1", tmp_path, "part-0")
    add_trajectory(sink, FULL)
    sink.close()
    rows = {t: pq.read_table(tmp_path / sink.files[t]).to_pylist() for t in TABLES}
    (traj,) = rows["trajectories"]
    texts = {r["turn_idx"]: r for r in rows["texts"]}
    turns = rows["turns"]
    assert sorted(texts) == [-1, 0, 1] and [r["turn_idx"] for r in turns] == [0, 1]

    def check(record: BaseModel, numbers: dict[str, Any], text: dict[str, Any], schema: pa.Schema) -> None:
        for name in type(record).model_fields:
            if (_kind(type(record)), name) in FIELDS_NOT_COLUMNS:
                continue
            value = getattr(record, name)
            if name in numbers:
                assert numbers[name] == _stored(value, schema.field(name).type), name
            elif isinstance(value, str):
                assert text[name] == value, name
            else:  # structured: JSON (its spacing is the sink's)
                assert json.loads(text[name]) == json.loads(_stored(value, pa.string())), name

    check(FULL, traj, texts[-1], TRAJECTORIES)
    assert traj["run_id"] == "run-1"
    assert traj["prompt_chars"] == len(texts[-1]["prompt"]) and traj["response_chars"] == len(FULL.response or "")
    for turn, row in zip(FULL.turns, turns, strict=True):
        check(turn, row, texts[turn.turn_idx], TURNS)
        key = {k: row[k] for k in KEYS if k != "turn_idx"}
        assert key == {"run_id": "run-1", "split": FULL.split, "step": FULL.step, "traj_id": FULL.traj_id}
        assert {k: texts[turn.turn_idx][k] for k in key} == key
        assert row["num_tool_calls"] == len(turn.tool_calls)
        assert row["anchor_hash"] == anchor_hash(turn.anchor_obs)
