"""What the Experiments page of `mastrace serve` reads: the experiments of the store and one
experiment's comparison, as the JSON `mastrace experiments --format json` and `mastrace compare
--format json` print (the same functions of `mastrace.analysis` make both).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..analysis import TraceStore

__all__ = ["CompareAsk", "comparison_json", "experiments_json"]


@dataclass(frozen=True)
class CompareAsk:
    """What the page asks `compare` for (the CLI's `--experiment`, `--by`, `--baseline`, `--seed`)."""

    experiment: str | None = None
    by: str | None = None
    baseline: str | None = None
    seed: int = 0

    @classmethod
    def from_query(cls, params: dict[str, str]) -> CompareAsk:
        """From a request's query parameters; an empty value is no value.

        Raises:
            ValueError: `seed` is not a whole number.
        """

        def text(name: str) -> str | None:
            value = params.get(name, "").strip()
            return value or None

        seed = params.get("seed", "").strip() or "0"
        try:
            number = int(seed)
        except ValueError:
            raise ValueError("seed must be a whole number") from None
        return cls(text("experiment"), text("by"), text("baseline"), number)


def experiments_json(traces: TraceStore | None) -> str:
    """`mastrace experiments --format json` over `traces` (None: a store with nothing in it yet)."""
    from ..analysis import Gathered, gather, list_experiments, render_experiments

    gathered = gather(traces) if traces is not None else Gathered([], set(), {})
    return render_experiments(list_experiments(gathered), "json")


def comparison_json(traces: TraceStore | None, ask: CompareAsk) -> str:
    """`mastrace compare --format json` with what `ask` says, over `traces` (None: nothing yet).

    Raises:
        ValueError: `ask.baseline` names no configuration of the experiment, or several.
    """
    from ..analysis import Gathered, compare, gather, render_comparison

    gathered = (
        gather(traces, experiment=ask.experiment, by=ask.by)
        if traces is not None
        else Gathered([], set(), {})
    )
    result = compare(gathered, experiment=ask.experiment, by=ask.by, baseline=ask.baseline, seed=ask.seed)
    return render_comparison(result, "json")
