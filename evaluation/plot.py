"""accuracy.png: each model's accuracy at stage 1 and after each refinement round, the
majority vote, and the chairman's final answer. agreement.png: the chairman's and the
majority vote's accuracy for each agreement level of the final review, with the number of
problems at that level. arms.png: each arm's accuracy, with its 95 % interval, against its
tokens per problem (a log scale): what each way of answering costs. Drawn with matplotlib's
Agg backend (no display needed); matplotlib is imported only when a plot is drawn.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from evaluation.report import Cell, EvalReport


def _percent(cell: Cell) -> float:
    return float("nan") if cell.accuracy is None else cell.accuracy * 100


def _figure(width: float, height: float) -> Figure:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=110)


def _title(report: EvalReport, what: str) -> str:
    simulated = " · simulated models" if report.run.simulated else ""
    return f"{report.dataset.name}: {what} ({report.scored} problems{simulated})"


def _save(figure: Figure, path: Path) -> Path:
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png")
    return path


def plot_accuracy(report: EvalReport, path: Path) -> Path:
    stages = report.stages
    x = list(range(len(stages)))
    figure = _figure(8, 4.8)
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
    axes.set_title(_title(report, "accuracy by stage"))
    axes.legend(loc="lower right", fontsize=8)
    return _save(figure, path)


def plot_agreement(report: EvalReport, path: Path) -> Path:
    """A pair of bars per agreement level (chairman, majority vote of the final answers),
    each level labelled with its number of problems; a level without problems has no bars."""
    levels = list(report.by_agreement)
    figure = _figure(7, 4.2)
    axes = figure.subplots()
    width = 0.38
    last = report.stages[-1]
    rows = [report.by_agreement[level] for level in levels]
    for offset, name, color, cells in (
        (-width / 2, "chairman", "crimson", [row.chairman for row in rows]),
        (width / 2, f"majority vote ({last})", "0.55", [row.majority_vote for row in rows]),
    ):
        heights = [_percent(cell) for cell in cells]
        bars = axes.bar(
            [i + offset for i in range(len(levels))], heights, width, color=color, label=name
        )
        axes.bar_label(
            bars, labels=["" if h != h else f"{h:.0f}%" for h in heights], padding=2, fontsize=8
        )
    counts = [report.by_agreement[level].problems for level in levels]
    axes.set_xticks(
        range(len(levels)),
        [
            f"{level}\n{n} problem{'' if n == 1 else 's'}"
            for level, n in zip(levels, counts, strict=True)
        ],
    )
    axes.set_xlabel("agreement level of the final review")
    axes.set_ylim(0, 125)
    axes.set_yticks(range(0, 101, 20))
    axes.set_ylabel("accuracy (%)")
    axes.grid(axis="y", alpha=0.3)
    axes.set_title(_title(report, "accuracy by agreement level"))
    axes.legend(loc="upper center", ncols=2, fontsize=8)
    return _save(figure, path)


ARM_MARKERS = {
    "member": "o",
    "vote": "s",
    "round": "D",
    "chairman": "*",
    "self-consistency": "^",
    "auto": "P",
}


def plot_arms(report: EvalReport, path: Path) -> Path | None:
    """Accuracy against tokens per problem, one point per arm with its interval (named in
    the legend); None (nothing drawn) when no problem completed."""
    arms = [a for a in report.arms if a.accuracy is not None and a.tokens_per_problem]
    if not arms:
        return None
    figure = _figure(9, 5)
    axes = figure.subplots()
    colors = [f"C{i % 10}" for i in range(len(arms))]
    lowest = 100.0
    for arm, color in zip(arms, colors, strict=True):
        accuracy = (arm.accuracy or 0) * 100
        low, high = (x * 100 for x in (arm.ci95 or (arm.accuracy or 0, arm.accuracy or 0)))
        lowest = min(lowest, low)
        axes.errorbar(
            [arm.tokens_per_problem or 0],
            [accuracy],
            yerr=[[accuracy - low], [high - accuracy]],
            fmt=ARM_MARKERS[arm.kind],
            color="crimson" if arm.kind == "chairman" else color,
            markersize=15 if arm.kind == "chairman" else 8,
            capsize=3,
            alpha=0.85,
            zorder=3,
            label=f"{arm.name}: {accuracy:.0f}%",
        )
    axes.set_xscale("log")
    axes.set_xlabel("tokens per problem (log scale)")
    axes.set_ylim(max(0, lowest // 10 * 10 - 5), 102)
    axes.set_ylabel("accuracy (%), with its 95 % interval")
    axes.grid(alpha=0.3, which="both")
    axes.set_title(_title(report, "accuracy and tokens of each arm"), fontsize=10)
    axes.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=7, frameon=False)
    return _save(figure, path)
