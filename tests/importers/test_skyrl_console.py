"""SkyRL console logs, written here exactly as ``ConsoleLogger.log`` writes them:
``logger.info(f"Step {step}: \\n{pprint.pformat(stringify_floats(data))}")`` through
loguru's default format (``{time:YYYY-MM-DD HH:mm:ss.SSS} | {level: <8} |
{name}:{function}:{line} - {message}``), with Ray prefixes and noise in between."""

from __future__ import annotations

import gzip
import io
import random
import tarfile
from pathlib import Path
from typing import Any

import pytest

import rolloutlab
from rolloutlab.io import InputError
from rolloutlab.io.importers import detect_format
from rolloutlab.io.importers.skyrl_console import ParseIssues, iter_steps
from tests._skyrl_log import NOISE, console_record, loguru, ray


def metrics_for(step: int, rng: random.Random, n: int = 5) -> dict[str, Any]:
    return {
        "generate/avg_num_tokens": rng.uniform(100, 2000),
        "generate/max_num_tokens": rng.randint(100, 4000),
        f"reward/avg_pass_at_{n}": rng.random(),
        "reward/avg_raw_reward": min(1.0, 0.2 + 0.05 * step + rng.gauss(0, 0.02)),
        "reward/mean_positive_reward": rng.random(),
        "policy/policy_entropy": 1.5 * 0.9 ** step + rng.random() * 1e-3,
        "policy/policy_loss": rng.gauss(0, 0.1),
        "policy/grad_norm": rng.uniform(0.01, 3),
        "loss/avg_kl": rng.uniform(0, 0.01),
        "loss/avg_kl_max": rng.uniform(0, 0.5),
        "trainer/global_step": step,
        "timing/policy_train": rng.uniform(1, 60),
        "timing/generate": rng.uniform(1, 200),
        "trainer/epoch": 0,
    }


def write_log(path: Path, steps: dict[int, dict[str, Any]], *, noise: bool = True, ray_prefix: str = "",
              config: str | None = None, seed: int = 0) -> str:
    rng = random.Random(seed)
    out = io.StringIO()
    if config is not None:
        out.write(ray(ray_prefix, loguru(0, config, name="skyrl_train.entrypoints.main_base", fn="run", line=258))
                  if ray_prefix else loguru(0, config, name="skyrl_train.entrypoints.main_base", fn="run", line=258))
    for i, (step, data) in enumerate(steps.items(), 1):
        rec = console_record(step, data, i)
        out.write(ray(ray_prefix, rec) if ray_prefix else rec)
        if noise:
            out.writelines(rng.sample(NOISE, 3))
    text = out.getvalue()
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    elif path.name.endswith(".zst"):
        import zstandard

        path.write_bytes(zstandard.ZstdCompressor().compress(text.encode()))
    else:
        path.write_text(text)
    return text


def expected(steps: dict[int, dict[str, Any]]) -> dict[tuple[int, str], float]:
    """What the log holds: each float as its four-decimal string read back."""
    return {(s, k): (float(f"{v:.4f}") if isinstance(v, float) else float(v))
            for s, d in steps.items() for k, v in d.items()}


def stored(store: Path, run: str | None = None, split: str = "train") -> dict[tuple[int, str], float]:
    st = rolloutlab.open_store(store)
    q = "SELECT step, name, value FROM metrics WHERE split = ?" + (" AND run_id = ?" if run else "")
    rows = st.sql(q, params=[split, run] if run else [split]).fetchall()
    return {(s, n): v for s, n, v in rows}


CONFIG = """data:
  train_data:
  - gsm8k/train.parquet
trainer:
  algorithm:
    advantage_estimator: grpo
  policy:
    model:
      path: Qwen/Qwen2.5-1.5B-Instruct
  epochs: 1
generator:
  n_samples_per_prompt: 5"""


@pytest.mark.parametrize("suffix", [".log", ".log.gz", ".log.zst"])
def test_every_value_exact(tmp_path: Path, suffix: str) -> None:
    rng = random.Random(3)
    steps = {s: metrics_for(s, rng) for s in range(1, 13)}
    src = tmp_path / f"train{suffix}"
    write_log(src, steps, config=CONFIG)
    assert detect_format(src).name == "skyrl_console"
    rep = rolloutlab.ingest([src], tmp_path / "store")
    assert rep.sources[0].format == "skyrl_console"
    got = stored(tmp_path / "store")
    assert got == expected(steps)
    run = rolloutlab.open_store(tmp_path / "store").manifest["runs"]["train"]["run"]
    assert run["model"] == "Qwen/Qwen2.5-1.5B-Instruct"
    assert run["algorithm"] == "grpo"
    assert run["config"]["generator"]["n_samples_per_prompt"] == 5


def test_ray_prefixes_interleaved_per_process(tmp_path: Path) -> None:
    """Two processes' lines interleave line by line: each dict is read from its own."""
    rng = random.Random(5)
    a = {1: metrics_for(1, rng)}
    rec = console_record(1, a[1]).splitlines()
    other = [f"(RayWorker pid=9{i}) {{'x': 'bad', 'noise': [1, 2" for i in range(len(rec))]
    lines = []
    for mine, theirs in zip(rec, other, strict=True):
        lines += [f"(skyrl_entrypoint pid=77) {mine}", theirs]
    src = tmp_path / "driver.out"
    src.write_text("\n".join(lines) + "\n")
    rolloutlab.ingest([src], tmp_path / "store")
    assert stored(tmp_path / "store") == expected(a)


def test_colourised_records_under_ray(tmp_path: Path) -> None:
    """SkyRL's own logging set-up: loguru with ANSI colours, inside a Ray task."""
    rng = random.Random(8)
    steps = {s: metrics_for(s, rng) for s in range(1, 6)}
    prefix = "\x1b[36m(skyrl_entrypoint pid=1234, ip=10.0.0.7)\x1b[0m "
    text = "".join(ray(prefix, console_record(s, d, s, colour=True)) + NOISE[s] for s, d in steps.items())
    src = tmp_path / "ray.log"
    src.write_text(text)
    assert detect_format(src).name == "skyrl_console"
    rolloutlab.ingest([src], tmp_path / "store")
    assert stored(tmp_path / "store") == expected(steps)


def test_nested_eval_and_odd_values(tmp_path: Path) -> None:
    data = {"eval/gsm8k/avg_score": 0.61234, "eval/all/pass_at_5": 0.8, "trainer/global_step": 4,
            "nested": {"a": 1.5, "b": {"c": 2}}, "flag": True, "name": "run-7", "lst": [1.0, 2.0],
            "nan_metric": float("nan"), "none": None}
    src = tmp_path / "r.log"
    src.write_text(console_record(4, data))
    rep = rolloutlab.ingest([src], tmp_path / "store")
    assert stored(tmp_path / "store", split="eval") == {(4, "eval/gsm8k/avg_score"): 0.6123,
                                                        (4, "eval/all/pass_at_5"): 0.8}
    train = stored(tmp_path / "store")
    assert train[(4, "nested/a")] == 1.5 and train[(4, "nested/b/c")] == 2.0 and train[(4, "flag")] == 1.0
    assert train[(4, "nan_metric")] is None  # NaN kept as a null value
    assert (4, "name") not in train and (4, "lst") not in train
    assert any("2 non-numeric values skipped" in w for w in rep.sources[0].warnings)


def test_restart_keeps_later_value_and_says_so(tmp_path: Path) -> None:
    rng = random.Random(1)
    first = {s: metrics_for(s, rng) for s in range(1, 6)}
    again = {s: metrics_for(s, rng) for s in range(4, 9)}  # resumed from the step-3 checkpoint
    src = tmp_path / "run.log"
    text = io.StringIO()
    for i, (s, d) in enumerate(first.items()):
        text.write(console_record(s, d, i))
    text.write(loguru(50, "Loading checkpoint from global_step_3", name="skyrl_train.trainer", fn="load", line=10))
    for i, (s, d) in enumerate(again.items()):
        text.write(console_record(s, d, 60 + i))
    src.write_text(text.getvalue())
    rep = rolloutlab.ingest([src], tmp_path / "store")
    want = expected(first) | expected(again)
    assert stored(tmp_path / "store") == want
    assert any("2 steps logged twice" in w and "4, 5" in w for w in rep.sources[0].warnings)


def test_truncated_last_dict_is_pending_then_read(tmp_path: Path) -> None:
    rng = random.Random(2)
    steps = {s: metrics_for(s, rng) for s in range(1, 4)}
    text = "".join(console_record(s, d, s) for s, d in steps.items())
    cut = text[: text.rindex("'policy/grad_norm'")]
    src = tmp_path / "live.log"
    src.write_text(cut)
    rep = rolloutlab.ingest([src], tmp_path / "store")
    assert stored(tmp_path / "store") == expected({1: steps[1], 2: steps[2]})
    assert any("step 3's metrics dict is incomplete" in w for w in rep.sources[0].warnings)
    src.write_text(text)  # the trainer finished writing
    rolloutlab.ingest([src], tmp_path / "store")
    assert stored(tmp_path / "store") == expected(steps)


def test_dict_cut_by_a_new_record_is_dropped(tmp_path: Path) -> None:
    rng = random.Random(4)
    steps = {s: metrics_for(s, rng) for s in (1, 2)}
    r1 = console_record(1, steps[1], 1)
    r1 = r1[: r1.index("'policy/grad_norm'")]
    src = tmp_path / "crash.log"
    src.write_text(r1 + "\n" + console_record(2, steps[2], 2))
    rep = rolloutlab.ingest([src], tmp_path / "store")
    assert stored(tmp_path / "store") == expected({2: steps[2]})
    assert any("cut short" in w for w in rep.sources[0].warnings)


def test_unparseable_complete_dict_names_file_and_line(tmp_path: Path) -> None:
    src = tmp_path / "bad.log"
    src.write_text(loguru(1, "Step 1: \n{'a': '1.0000', 'b': <object at 0x1>}") + loguru(2, "Step 2: \n{'a': '2.0000'}"))
    with pytest.raises(InputError) as ei:
        rolloutlab.ingest([src], tmp_path / "store")
    assert "bad.log" in str(ei.value) and ":1" in str(ei.value) and "does not parse" in str(ei.value)
    rep = rolloutlab.ingest([src], tmp_path / "store2", on_error="skip")
    assert rep.sources[0].rejects == 1
    assert stored(tmp_path / "store2") == {(2, "a"): 2.0}


def test_directory_is_one_run_folder_of_dirs_one_run_each(tmp_path: Path) -> None:
    rng = random.Random(6)
    runs = tmp_path / "runs"
    want: dict[str, dict[tuple[int, str], float]] = {}
    for arm in ("s85", "s90"):
        d = runs / arm
        d.mkdir(parents=True)
        part1 = {s: metrics_for(s, rng) for s in range(1, 4)}
        part2 = {s: metrics_for(s, rng) for s in range(3, 7)}
        # the resumed log sorts first by name but was written later: order by timestamp
        write_log(d / "a_resumed.log.gz", part2, seed=1)
        text = write_log(d / "b_first.log", part1, seed=2)
        (d / "b_first.log").write_text(text.replace("2025-08-12", "2025-08-11"))
        (d / "notes.txt").write_text("nothing here\n")
        want[arm] = expected(part1) | expected(part2)
    assert detect_format(runs / "s85").name == "skyrl_console"
    rep = rolloutlab.ingest([runs / "s85"], tmp_path / "one")
    assert len(rep.sources) == 1 and stored(tmp_path / "one") == want["s85"]
    assert detect_format(runs).name == "skyrl_console"
    rep = rolloutlab.ingest([runs], tmp_path / "many")
    assert sorted(s.run_id for s in rep.sources) == ["s85", "s90"]
    for arm in want:
        assert stored(tmp_path / "many", arm) == want[arm]


def test_archived_run_folder(tmp_path: Path) -> None:
    rng = random.Random(7)
    steps = {s: metrics_for(s, rng) for s in range(1, 5)}
    d = tmp_path / "arm_a"
    d.mkdir()
    write_log(d / "train.log", steps)
    arc = tmp_path / "arm_a.tar.gz"
    with tarfile.open(arc, "w:gz") as tf:
        tf.add(d, arcname="arm_a")
    rep = rolloutlab.ingest([arc], tmp_path / "store")
    assert rep.sources[0].format == "skyrl_console"
    assert stored(tmp_path / "store") == expected(steps)


def test_archive_of_several_runs_one_run_each(tmp_path: Path) -> None:
    rng = random.Random(9)
    for arm in ("a", "b"):
        (tmp_path / "runs" / arm).mkdir(parents=True)
        write_log(tmp_path / "runs" / arm / "train.log", {1: metrics_for(1, rng)})
    arc = tmp_path / "runs.tar.gz"
    with tarfile.open(arc, "w:gz") as tf:
        for arm in ("a", "b"):
            tf.add(tmp_path / "runs" / arm, arcname=arm)
    rep = rolloutlab.ingest([arc], tmp_path / "store")
    assert sorted(s.run_id for s in rep.sources) == ["a", "b"]
    again = rolloutlab.ingest([arc], tmp_path / "store")  # the same runs, nothing read again
    assert sorted(s.run_id for s in again.sources) == ["a", "b"]
    assert all(s.parts_read == 0 and s.parts_unchanged == 1 for s in again.sources)
    assert sorted(rolloutlab.open_store(tmp_path / "store").manifest["runs"]) == ["a", "b"]


def test_iter_steps_header_with_noise_before_dict_and_numpy_scalars() -> None:
    lines = ["2025-08-12 12:48:21.123 | INFO     | x:log:1 - Step 7: ",
             "some other thread's line",
             "{'a': np.float32(0.5),",
             " 'b': '0.2500'}"]
    issues = ParseIssues()
    got = list(iter_steps(iter(enumerate(lines, 1)), issues))
    assert [(g.step, g.line, g.data) for g in got] == [(7, 1, {"a": 0.5, "b": "0.2500"})]


def test_not_detected_without_a_step_dict(tmp_path: Path) -> None:
    p = tmp_path / "x.log"
    p.write_text(loguru(1, "Step 3: done") + "nothing\n")
    assert detect_format(p, quiet=True) is None or detect_format(p, quiet=True).name != "skyrl_console"
    v = tmp_path / "verl.log"
    v.write_text("step:1 - actor/entropy:0.5 - critic/score/mean:0.1\n")
    assert detect_format(v).name == "verl"
