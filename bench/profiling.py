"""Reading a py-spy profile (`py-spy record --format raw`: one collapsed stack a line,
frames separated by ';', then the sample count) into where the worker's time goes."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

OWN_PACKAGES = ("council", "workflows", "activities")
_FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^():]+)(?::(?P<line>\d+))?\)$")


def _split(frame: str) -> tuple[str, str]:
    match = _FRAME.match(frame.strip())
    if not match:
        return frame.strip(), ""
    return match["function"], match["file"]


def _own(path: str) -> bool:
    parts = Path(path).parts
    return "site-packages" not in parts and len(parts) >= 2 and parts[-2] in OWN_PACKAGES


def _short(path: str) -> str:
    """A path without the machine's prefix: from the package (or site-packages) down."""
    parts = Path(path).parts
    if not Path(path).is_absolute():
        return path  # py-spy already shortened it to the import path
    if "site-packages" in parts:
        return "/".join(parts[len(parts) - parts[::-1].index("site-packages") :])
    for i, part in enumerate(parts):
        if part in OWN_PACKAGES:
            return "/".join(parts[i:])
        if re.fullmatch(r"python3\.\d+", part):
            return "/".join(parts[i + 1 :])
    return "/".join(parts[-2:])


def read_profile(path: Path) -> tuple[int, Counter[str], Counter[str], Counter[str]]:
    """Total samples; own-code functions by inclusive samples; all frames by self samples;
    top-level packages by inclusive samples."""
    total = 0
    own_inclusive: Counter[str] = Counter()
    self_samples: Counter[str] = Counter()
    packages: Counter[str] = Counter()
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        samples = int(count)
        total += samples
        frames = [_split(f) for f in stack.split(";")]
        seen: set[str] = set()
        seen_packages: set[str] = set()
        for function, file in frames:
            if not file:
                continue
            name = f"{function} ({_short(file)})"
            if _own(file) and name not in seen:
                seen.add(name)
                own_inclusive[name] += samples
            package = _short(file).split("/")[0]
            if package not in seen_packages:
                seen_packages.add(package)
                packages[package] += samples
        function, file = frames[-1]
        self_samples[f"{function} ({_short(file)})" if file else function] += samples
    return total, own_inclusive, self_samples, packages


def summarize(path: Path, top: int = 12) -> str:
    total, own, self_samples, packages = read_profile(path)
    if not total:
        return f"{path.name}: no samples"

    def pct(samples: int) -> str:
        return f"{samples / total * 100:5.1f}%"

    lines = [f"{path.name}: {total} samples of the worker's active threads"]
    lines.append("own code (council/, workflows/, activities/), inclusive:")
    lines += [f"  {pct(n)}  {name}" for name, n in own.most_common(top)]
    lines.append("by top-level package or file, inclusive:")
    lines += [f"  {pct(n)}  {name}" for name, n in packages.most_common(top)]
    lines.append("frames by self time:")
    lines += [f"  {pct(n)}  {name}" for name, n in self_samples.most_common(top)]
    return "\n".join(lines)


def summary_note(path: Path) -> str:
    """One line for the results; the full summary goes beside the profile."""
    if not path.exists():
        return "py-spy wrote nothing (is it installed, and may it attach to processes?)"
    text = summarize(path)
    summary_path = path.with_suffix(".summary.txt")
    summary_path.write_text(text + "\n")
    total, own, _, _ = read_profile(path)
    top = ", ".join(f"{name} {n / total * 100:.1f}%" for name, n in own.most_common(3))
    return f"top own code (inclusive) {top or 'none'}; details in bench/out/{summary_path.name}"
