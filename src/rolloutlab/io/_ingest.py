"""``ingest``: any supported artifacts → the store, incrementally and all-or-nothing.

For each source: find its importer (auto-detected, or forced), list its parts, skip parts
whose fingerprint is already in the store, read the others into staged Parquet files,
and commit everything at the end in one manifest swap.  An error anywhere leaves the
store as it was; ``on_error="skip"`` quarantines bad records into ``rejects`` instead.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rolloutlab.io._errors import IncompleteTail, InputError, RolloutlabError
from rolloutlab.io._files import extract_archive, fingerprint, is_archive, remove_tree
from rolloutlab.io._sink import PartSink
from rolloutlab.io._store import Store, slug
from rolloutlab.io.importers import REGISTRY, Importer, Part, ReadContext, detect_format
from rolloutlab.schema import FORMAT_VERSION, REJECTS


@dataclass
class SourceReport:
    source: str
    format: str
    run_id: str
    parts_read: int = 0
    parts_unchanged: int = 0
    parts_pending: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: {"trajectories": 0, "turns": 0, "metrics": 0})
    rejects: int = 0
    warnings: list[str] = field(default_factory=list)


@dataclass
class IngestReport:
    store: str
    sources: list[SourceReport] = field(default_factory=list)

    @property
    def rejects(self) -> int:
        return sum(s.rejects for s in self.sources)


ProgressFn = Callable[[str, int, int], None]


def ingest(
    sources: Sequence[str | Path],
    store: str | Path,
    *,
    name: str | None = None,
    labels: dict[str, str] | None = None,
    format: str | None = None,
    mapping: dict[str, str] | None = None,
    split: str | None = None,
    on_error: str = "fail",
    progress: ProgressFn | None = None,
) -> IngestReport:
    """Ingest ``sources`` into ``store``.  With ``name``, all sources form one run."""
    st = Store(Path(store))
    report = IngestReport(store=str(st.path))
    with st.lock():
        st.manifest = st._read_manifest()
        manifest: dict[str, Any] = {"format_version": FORMAT_VERSION, "runs": {k: dict(v, parts=dict(v["parts"])) for k, v in st.manifest["runs"].items()}}
        staging = st.path / "_staging" / uuid.uuid4().hex[:12]
        staging.mkdir(parents=True)
        try:
            for src in sources:
                report.sources.append(
                    _ingest_source(Path(src), st, manifest, staging, name=name, labels=labels or {},
                                   format=format, mapping=mapping, split=split, on_error=on_error, progress=progress)
                )
            _check_duplicate_steps(manifest)
            for entry in manifest["runs"].values():
                _refresh_run(entry)
            st.commit(manifest, staging)
        except BaseException:
            remove_tree(staging)
            raise
    return report


def _ingest_source(
    src: Path,
    st: Store,
    manifest: dict[str, Any],
    staging: Path,
    *,
    name: str | None,
    labels: dict[str, str],
    format: str | None,
    mapping: dict[str, str] | None,
    split: str | None,
    on_error: str,
    progress: ProgressFn | None,
) -> SourceReport:
    if not src.exists():
        raise InputError("no such file or folder", path=src)
    root_key = str(src.resolve())
    tmp_root: Path | None = None
    if is_archive(src) and not (format or "").startswith("inspect"):
        probe = detect_format(src, format=format, mapping=mapping, quiet=True)
        if probe is None:
            tmp_root, src = extract_archive(src)
    try:
        importer = detect_format(src, format=format, mapping=mapping, split=split)
        assert importer is not None
        info = importer.run_info(src)
        run_id = _choose_run_id(manifest, name or info.name, root_key, explicit=name is not None)
        entry = manifest["runs"].setdefault(run_id, {"run": {}, "sources": [], "parts": {}})
        run = entry["run"]
        run.update({k: v for k, v in {
            "name": name or run.get("name") or info.name,
            "source": run.get("source") if run.get("source") not in (None, importer.name) else importer.name,
            "model": info.model or run.get("model"),
            "algorithm": info.algorithm or run.get("algorithm"),
            "env": info.env or run.get("env"),
            "status": info.status if info.status != "unknown" else run.get("status", "unknown"),
            "created_at": run.get("created_at") or info.created_at or datetime.now(UTC).isoformat(),
        }.items()})
        if run.get("source") != importer.name:
            run["source"] = "mixed"
        run["config"] = {**run.get("config", {}), **info.config}
        run["labels"] = {**run.get("labels", {}), **labels}
        if root_key not in entry["sources"]:
            entry["sources"].append(root_key)

        rep = SourceReport(source=str(src), format=importer.name, run_id=run_id)
        ctx = ReadContext(on_error)
        parts = importer.parts(src)
        if not parts:
            ctx.warn(f"{src}: no {importer.name} files found")
        src_tag = hashlib.blake2b(root_key.encode(), digest_size=4).hexdigest()
        for i, part in enumerate(parts):
            if progress:
                progress(f"{importer.name}: {part.key}", i, len(parts))
            uid = f"{src_tag}:{part.key}"
            fp = _part_fingerprint(part)
            old = entry["parts"].get(uid)
            if old is not None and old["fingerprint"] == fp:
                rep.parts_unchanged += 1
                continue
            stem = f"run_id={run_id}/{slug(part.key)}-{src_tag}-{fp[:10]}"
            sink = PartSink(run_id, staging, stem)
            n_rejects = len(ctx.rejects)
            try:
                importer.read(part, sink, ctx)
                sink.close()
            except IncompleteTail as e:
                sink.abort()
                if run.get("status") == "finished":
                    raise InputError("last line is truncated but the run says it finished: the file is corrupt",
                                     path=e.path, line=e.line) from None
                rep.parts_pending.append(part.key)
                ctx.warn(f"{e.path}:{e.line}: last line incomplete — step not yet complete, left for the next ingest")
                ctx.rejects = ctx.rejects[:n_rejects]
                continue
            except BaseException:
                sink.abort()
                raise
            files = dict(sink.files)
            new_rejects = ctx.rejects[n_rejects:]
            if new_rejects:
                files["rejects"] = _write_rejects(staging, stem, run_id, new_rejects)
            entry["parts"][uid] = {
                "key": part.key,
                "fingerprint": fp,
                "files": files,
                "counts": dict(sink.counts),
                "steps": sorted([list(s) for s in sink.steps]) if part.exclusive_steps else [],
                "max_step": {sp: max(s for p, s in sink.steps if p == sp) for sp, _ in sink.steps},
                "exclusive_steps": part.exclusive_steps,
                "rejects": len(new_rejects),
            }
            rep.parts_read += 1
            for k in rep.counts:
                rep.counts[k] += sink.counts[k]
        if progress:
            progress(f"{importer.name}: done", len(parts), len(parts))
        rep.rejects = len(ctx.rejects)
        rep.warnings = ctx.warnings
        return rep
    finally:
        if tmp_root is not None:
            remove_tree(tmp_root)


def _part_fingerprint(part: Part) -> str:
    h = hashlib.blake2b(digest_size=10)
    for p in part.paths:
        h.update(os.fsencode(p.name))
        h.update(fingerprint(p).encode())
    return h.hexdigest()


def _choose_run_id(manifest: dict[str, Any], name: str, root_key: str, *, explicit: bool) -> str:
    """Same source again → same run; a new source with a taken name gets a suffix,
    unless the name was given explicitly (then the sources are merged into one run)."""
    base = slug(name)
    runs = manifest["runs"]
    if explicit or base not in runs or root_key in runs[base]["sources"]:
        return base
    for rid, entry in runs.items():
        if root_key in entry["sources"] and rid.startswith(base):
            return rid
    i = 2
    while f"{base}-{i}" in runs:
        i += 1
    return f"{base}-{i}"


def _write_rejects(staging: Path, stem: str, run_id: str, rejects: list[Any]) -> str:
    rel = f"rejects/{stem}.parquet"
    path = staging / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pydict(
        {
            "run_id": [run_id] * len(rejects),
            "source": [r.source for r in rejects],
            "line": [r.line for r in rejects],
            "column": [r.column for r in rejects],
            "error": [r.error for r in rejects],
            "snippet": [r.snippet for r in rejects],
        },
        schema=REJECTS,
    )
    pq.write_table(table, path)
    return rel


def _check_duplicate_steps(manifest: dict[str, Any]) -> None:
    for rid, entry in manifest["runs"].items():
        seen: dict[tuple[str, int], str] = {}
        for part in entry["parts"].values():
            for sp, step in part.get("steps", []):
                other = seen.get((sp, step))
                if other is not None and other != part["key"]:
                    raise RolloutlabError(
                        f"run {rid!r}: duplicate step files for {sp} step {step}: {other!r} and {part['key']!r} "
                        "(remove one, or ingest them as separate runs with --name)"
                    )
                seen[(sp, step)] = part["key"]


def _refresh_run(entry: dict[str, Any]) -> None:
    steps = [s for p in entry["parts"].values() for sp, s in p.get("max_step", {}).items() if sp == "train"]
    if steps:
        entry["run"]["last_step"] = max(steps)
    entry["run"]["run_id"] = entry["run"].get("run_id")


def supported_formats() -> list[Importer]:
    return list(REGISTRY.values())
