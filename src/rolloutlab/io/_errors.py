"""Errors that name the file, line, column and value, so bad input is found in seconds."""

from __future__ import annotations

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
