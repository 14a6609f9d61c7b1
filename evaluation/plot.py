"""accuracy.png: each model's accuracy at stage 1 and after each refinement round, the
majority vote, and the chairman's final answer. Drawn with matplotlib's Agg backend (no
display needed); matplotlib is imported only when a plot is drawn.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evaluation.report import EvalReport


def _percent(cell) -> float:
    return float("nan") if cell.accuracy is None else cell.accuracy * 100


def plot_accuracy(report: EvalReport, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    stages = report.stages
    x = list(range(len(stages)))
    figure = Figure(figsize=(8, 4.8), dpi=110)
    axes = figure.subplots()
    # The vote goes underneath, wide and grey, so a model with the same accuracy stays visible.
    axes.plot(
        x,
        [_percent(report.accuracy.majority_vote[s]) for s in stages],
        marker="s",
        markersize=11,
        linestyle="--",
        color="0.55",
        linewidth=4,
        alpha=0.7,
        zorder=1,
        label="majority vote",
    )
    for model, cells in report.accuracy.models.items():
        axes.plot(
            x,
            [_percent(cells[s]) for s in stages],
            marker="o",
            linewidth=1.5,
            zorder=3,
            label=model,
        )
    chairman = _percent(report.accuracy.chairman)
    axes.scatter(
        [len(stages)], [chairman], marker="*", s=260, color="crimson", zorder=5, label="chairman"
    )
    if chairman == chairman:  # not NaN
        axes.annotate(
            f"{chairman:.0f}%",
            (len(stages), chairman),
            textcoords="offset points",
            xytext=(0, 10),
            ha="center",
        )
    axes.set_xticks(x + [len(stages)], stages + ["chairman"])
    axes.set_xlim(-0.4, len(stages) + 0.4)
    axes.set_ylim(0, 110)
    axes.set_ylabel("accuracy (%)")
    axes.grid(alpha=0.3)
    simulated = " · simulated models" if report.run.simulated else ""
    axes.set_title(
        f"{report.dataset.name}: accuracy by stage ({report.completed} problems{simulated})"
    )
    axes.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png")
    return path
