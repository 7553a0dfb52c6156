"""Built-in environments, offline and CPU-only.  Importing this package registers them."""

from rolloutlab.envs.builtin import (
    babyai,  # noqa: F401
    code_search,  # noqa: F401
    guess_number,  # noqa: F401
    household,  # noqa: F401
    scienceworld,  # noqa: F401
    search_qa,  # noqa: F401
    shopping,  # noqa: F401
    textcraft,  # noqa: F401
)
