"""The `mastrace` command: inspect the local trace store.

Subcommands: `runs`, `tree`, `query`, `analyze`, `view`, `diff`, `export`, `push`, `prune`, `serve`,
`mcp`, `run`; `mastrace --help` lists them. Errors print one line on stderr and exit with status 2.

Example:
    ```console
    $ mastrace runs
    $ mastrace analyze latest -o ANALYSIS_REPORT.md
    ```
"""

from __future__ import annotations

import sys
from importlib import import_module

from ..exceptions import MastraceError
from ._parser import build_parser
from ._terminal import SafeStream, escape_control

TYPE_CHECKING = False  # not `typing`'s: `mastrace --help` does not import it
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, TextIO

__all__ = ["main"]

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None) -> int:
    """Run the `mastrace` command line.

    Args:
        argv: The arguments after the program name; default `sys.argv[1:]`.
        stdout: Where results go; default `sys.stdout`.

    Returns:
        The exit status: 0 on success, 2 for a usage error, an empty store, an unknown trace or bad SQL.
    """
    # Whatever a store holds, control characters reach the terminal escaped (see `_terminal`).
    out = SafeStream(stdout if stdout is not None else sys.stdout)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(_handler(args.handler)(args, out))
    except MastraceError as exc:
        print(escape_control(f"mastrace {args.command}: error: {exc}"), file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (e.g. `mastrace query ... | head`): not an error worth a traceback.
        sys.stderr.close()
        return 0


def _handler(target: str) -> Callable[[Any, Any], int]:
    """The function named `"module:function"`, imported now (the parser imports no command)."""
    module, _, function = target.partition(":")
    handler: Callable[[Any, Any], int] = getattr(import_module(module), function)
    return handler
