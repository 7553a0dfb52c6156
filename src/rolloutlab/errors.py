"""The project's errors, on the ground floor (every package may raise them; the environment
contract does not depend on the store for them).  They name the file, line, column and value,
so bad input is found in seconds."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


class RolloutlabError(Exception):
    """Base of every error rolloutlab raises on purpose (the CLI prints it without a trace)."""


class InputError(RolloutlabError):
    """Bad input at a known place: ``file:line:column: message`` plus a short snippet."""

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        column: int | None = None,
        snippet: str | None = None,
    ) -> None:
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        self.column = column
        self.snippet = snippet
        super().__init__(self._render())

    def __reduce__(self) -> tuple[object, ...]:  # keep the fields across processes
        return (_rebuild_input_error, (type(self), self.message, self.path, self.line, self.column, self.snippet))

    def where(self) -> str:
        parts = [self.path or "<input>"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    def _render(self) -> str:
        text = f"{self.where()}: {self.message}"
        if self.snippet:
            text += f"\n    {self.snippet}"
        return text

    def located(
        self, *, path: str | Path | None = None, line: int | None = None, snippet: str | None = None
    ) -> InputError:
        """The same error with the place filled in where it was not known yet."""
        return InputError(
            self.message,
            path=self.path or (str(path) if path is not None else None),
            line=self.line if self.line is not None else line,
            column=self.column,
            snippet=self.snippet or snippet,
        )


def _rebuild_input_error(
    cls: type[InputError], message: str, path: str | None, line: int | None, column: int | None, snippet: str | None
) -> InputError:
    return cls(message, path=path, line=line, column=column, snippet=snippet)


class UnknownTask(InputError):
    """``reset`` was given a task id the environment does not have (``env serve`` answers 422)."""

    def _render(self) -> str:
        return super()._render() if self.path is not None else self.message


class RecordError(InputError):
    """A record parsed but a field is wrong (missing, wrong type, NaN reward...)."""


class IncompleteTail(RolloutlabError):
    """The last line of a file has no newline and does not parse: still being written."""

    def __init__(self, path: str | Path, line: int) -> None:
        self.path = str(path)
        self.line = line
        super().__init__(f"{path}:{line}: last line is incomplete (file still being written?)")

    def __reduce__(self) -> tuple[object, ...]:
        return (IncompleteTail, (self.path, self.line))


def snippet_of(raw: bytes | str, column: int | None = None, width: int = 60) -> str:
    """A short, printable excerpt of ``raw`` around ``column`` (1-based)."""
    text = raw.decode("utf-8", errors="backslashreplace") if isinstance(raw, bytes) else raw
    text = text.rstrip("\r\n")
    if column is None or len(text) <= width:
        out = text[:width] + ("…" if len(text) > width else "")
    else:
        start = max(0, column - 1 - width // 2)
        out = ("…" if start else "") + text[start : start + width] + ("…" if start + width < len(text) else "")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in out)


def spans(steps: Sequence[int]) -> str:
    """Sorted step numbers as runs, for messages: ``[4, 5, 6, 9]`` -> ``"4-6, 9"``."""
    out: list[str] = []
    for s in steps:
        if out and out[-1].split("-")[-1] == str(s - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{s}"
        else:
            out.append(str(s))
    return ", ".join(out)


class StoreDamaged(RolloutlabError):
    """A file the manifest lists is missing or unreadable; names it and the repair command."""

    def __init__(self, store: str | Path, file: str | Path, why: str) -> None:
        self.store = str(store)
        self.file = str(file)
        self.why = why
        super().__init__(
            f"store {store} is damaged: {file} {why}; run `rolloutlab check-store --repair --store {store}`, "
            "then ingest the sources again"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (StoreDamaged, (self.store, self.file, self.why))


class DiskFull(RolloutlabError):
    """No space left (or quota exceeded) while writing under ``folder``; the store is unchanged."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = str(folder)
        super().__init__(f"no space left on the disk holding {folder}; the store is unchanged")

    def __reduce__(self) -> tuple[object, ...]:
        return (DiskFull, (self.folder,))


_DISK_FULL = (28, 122)  # ENOSPC, EDQUOT (Linux numbering, also used by the BSDs for ENOSPC)


def is_disk_full(e: BaseException) -> bool:
    """True for ENOSPC / EDQUOT, also when Arrow wraps the OS error in its own message."""
    import errno

    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", 122)):
        return True
    text = str(e)
    return "No space left on device" in text or "Disk quota exceeded" in text


def unexpected(e: BaseException, *, path: str | Path | None, line: int | None = None,
               importer: str | None = None) -> InputError:
    """A located :class:`InputError` for an exception nobody foresaw while reading ``path``.

    Compressed data that does not decompress and files that cannot be read are input
    faults; anything else is a bug in rolloutlab, and the message says so — still with the
    file and record, so ``--on-error skip`` can quarantine the record and go on.
    """
    import zlib

    kind = type(e).__name__
    detail = str(e)[:200] or kind
    if isinstance(e, zlib.error | EOFError) or type(e).__module__.startswith(("gzip", "zstandard", "zipfile", "tarfile", "lzma")):
        return InputError(f"corrupt compressed data ({kind}: {detail})", path=path, line=line)
    if isinstance(e, UnicodeError):
        return InputError(f"not valid UTF-8 ({detail})", path=path, line=line)
    if isinstance(e, MemoryError):
        return InputError("ran out of memory reading this record (a length or count in it is absurd?)", path=path, line=line)
    if isinstance(e, OSError) and not is_disk_full(e):
        return InputError(f"cannot read: {e.strerror or detail}", path=path, line=line)
    who = f"the {importer} importer" if importer else "rolloutlab"
    return InputError(
        f"unexpected {kind} in {who}: {detail} — this is a bug, please report it "
        "(with this message) at the rolloutlab issue tracker",
        path=path, line=line,
    )


class PromptTooLong(RolloutlabError):
    """A prompt does not fit the model's context: the conversation (the environment's
    observations and the replies so far) has outgrown it.  Not retried: the same prompt
    would fail again; only the episode that asked becomes ungraded."""


class StoreWarning(UserWarning):
    """Something about the store a reader should know (the CLI prints it as one line)."""


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived (the CLI's handlers raise it; a BaseException, so that no
    ``except Exception`` swallows it).  ``committed``: it arrived during a commit, which
    was finished first, so the store holds the new state."""

    def __init__(self, signum: int, *, committed: bool = False) -> None:
        self.signum = signum
        self.committed = committed
        super().__init__(signum)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum
