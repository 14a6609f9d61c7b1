"""What a benchmark reports: tables of figures and ratios, headline ratios against their
goals, and the line that describes the machine they were measured on."""

from __future__ import annotations

import os
import platform
import subprocess
from dataclasses import dataclass, field
from importlib import metadata

from harness.processes import temporal_binary


@dataclass
class Headline:
    """One ratio that has a goal, for the summary at the top."""

    name: str
    value: float | None
    goal: str
    met: bool | None
    detail: str = ""
    unit: str = ""  # a value that is not a ratio: "ms"


@dataclass
class Table:
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)

    def add(self, *cells: object) -> None:
        self.rows.append([str(c) for c in cells])

    def markdown(self) -> str:
        lines = [
            "| " + " | ".join(self.columns) + " |",
            "|" + "|".join(" --- " for _ in self.columns) + "|",
        ]
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        return "\n".join(lines)


@dataclass
class Section:
    title: str
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    headlines: list[Headline] = field(default_factory=list)

    def markdown(self) -> str:
        parts = [f"## {self.title}"]
        parts += [table.markdown() for table in self.tables]
        if self.notes:
            parts.append("\n".join(f"- {note}" for note in self.notes))
        return "\n\n".join(parts)


def seconds(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f} s"


def ratio(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def megabytes(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f} MB"


def kilobytes(value: float | None) -> str:
    return "n/a" if value is None else f"{value / 1024:,.0f} KB"


def summary(sections: list[Section]) -> Table:
    table = Table(["figure", "value", "goal", "met", "measured"])
    for section in sections:
        for h in section.headlines:
            met = "n/a" if h.met is None else ("yes" if h.met else "NO")
            value = f"{h.value:.1f} {h.unit}" if h.unit and h.value is not None else ratio(h.value)
            table.add(h.name, value, h.goal, met, h.detail)
    return table


# ---- the machine ------------------------------------------------------------------------


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_gib() -> float | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        return None


def _temporal_cli_version() -> str:
    try:
        out = subprocess.run(
            [temporal_binary(), "--version"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        ).stdout.strip()
    except (OSError, RuntimeError, subprocess.SubprocessError):
        return "unknown"
    return out.removeprefix("temporal version ")


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def load_average() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def describe_machine() -> str:
    ram = _ram_gib()
    return (
        f"{_cpu_model()}, {os.cpu_count()} cores, "
        f"{'n/a' if ram is None else f'{ram:.1f} GiB'} RAM, "
        f"{platform.system()} {platform.release()}; "
        f"Python {platform.python_version()}, temporalio {_version('temporalio')}, "
        f"temporal CLI {_temporal_cli_version()}"
    )
