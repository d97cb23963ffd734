"""`mastrace compare` and `mastrace experiments`: the configurations of an experiment side by side."""

from __future__ import annotations

import argparse
from typing import TextIO

from ..exceptions import MastraceError
from ._commands import open_store
from ._output import progress, write_output

__all__ = ["cmd_compare", "cmd_experiments"]


def cmd_compare(args: argparse.Namespace, out: TextIO) -> int:
    """Compare an experiment's configurations: scores with intervals, failures, tokens, cost, time."""
    from ..analysis import compare, gather, render_comparison

    if args.resamples < 100:
        raise MastraceError(f"--resamples {args.resamples}: give at least 100")
    with open_store(args) as store, progress("comparing"):
        gathered = gather(store, experiment=args.experiment, by=args.by)
    if args.experiment is not None and not gathered.runs:
        raise MastraceError(f"no runs of experiment {args.experiment!r} (see `mastrace experiments`)")
    try:
        result = compare(
            gathered,
            experiment=args.experiment,
            by=args.by,
            baseline=args.baseline,
            seed=args.seed,
            resamples=args.resamples,
        )
    except ValueError as exc:
        raise MastraceError(str(exc)) from None
    text = render_comparison(result, args.format, tasks=args.tasks)
    write_output(text, args.output, None, out)
    return 0


def cmd_experiments(args: argparse.Namespace, out: TextIO) -> int:
    """List the experiments of the store: runs, configurations, tasks, failures, scores."""
    from ..analysis import gather, list_experiments, render_experiments

    with open_store(args) as store, progress("reading experiments"):
        gathered = gather(store)
    out.write(render_experiments(list_experiments(gathered), args.format))
    return 0
