"""The one exception the CQL compiler raises, positioned like a compiler
diagnostic (``file:line:column: message``) so editors can jump to it."""

from __future__ import annotations

from semiactive.errors import UserError


class CqlError(UserError):
    """A syntax or semantic error in a CQL program. ``line`` and ``column``
    are 1-based and point at the offending token."""

    def __init__(self, message: str, line: int, column: int, file: str = "<query>") -> None:
        super().__init__(message, line, column, file)
        self.message = message
        self.line = line
        self.column = column
        self.file = file

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.message}"

    def __repr__(self) -> str:
        return f"CqlError({self.message!r}, {self.line}, {self.column}, {self.file!r})"
