"""Paper 004 Fig. 11 from evaluation records: (top) mean overhead per generated token against
context size, checked-unconstrained (one ``ast.parse`` of the file per step) beside the
constraint (per decoding step, the finish search apart), with the break-even context size;
(bottom) the one-time overhead of building the constraint.  PNG at 300 dpi, SVG and PDF.

The break-even size is where straight-line fits of the two per-step costs cross (``ast.parse``
grows with the file, the constraint's step does not, §VII-D); past it, the build is repaid after
``build(x) / (parse(x) - step(x))`` tokens.
"""

from __future__ import annotations

from pathlib import Path

from .modes import CONSTRAINED, MODE_NOTES

FORMATS = ("png", "svg", "pdf")
DPI = 300


def line_fit(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """(intercept, slope) of the least-squares line through ``points`` (None under two sizes)."""
    import numpy as np

    if len({x for x, _ in points}) < 2:
        return None
    slope, intercept = np.polyfit([x for x, _ in points], [y for _, y in points], 1)
    return float(intercept), float(slope)


def break_even(
    parse: tuple[float, float], step: tuple[float, float], build: tuple[float, float] | None, at: float
) -> dict:
    """Where the per-step fits cross, and the tokens that repay the build at context size ``at``."""
    (a_p, b_p), (a_s, b_s) = parse, step
    if b_p <= b_s:
        chars = None if a_p <= a_s else 0.0
    else:
        chars = max(0.0, (a_s - a_p) / (b_p - b_s))
    saved = (a_p + b_p * at) - (a_s + b_s * at)
    tokens = None
    if build is not None and saved > 0:
        tokens = (build[0] + build[1] * at) / saved
    return {"break_even_chars": chars, "at_chars": at, "tokens_to_repay_build": tokens}


def fig11_series(groups: dict[str, list[dict]]) -> list[dict]:
    """Per label: the checked points, each constrained mode's points, and the build points."""
    out = []
    for label, records in groups.items():
        timed = [r for r in records if r.get("steps", 0) > 0]
        checked = [(r["context_chars"], r["parse_ms_per_step"]) for r in timed if r["mode"] == "checked"]
        modes = {
            m: [(r["context_chars"], r["constraint_ms_per_step"]) for r in timed if r["mode"] == m]
            for m in CONSTRAINED
        }
        build_mode = next((m for m in ("paper", "constrained-nofinish", "constrained") if modes.get(m)), None)
        build = [(r["context_chars"], 1000 * r["setup_seconds"]) for r in records if r["mode"] == build_mode]
        out.append(
            {
                "label": label,
                "checked": checked,
                "modes": {m: p for m, p in modes.items() if p},
                "build_mode": build_mode,
                "build": build,
            }
        )
    return out


def draw_fig11(groups: dict[str, list[dict]], out_dir: Path) -> tuple[list[Path], dict]:
    """Draw Fig. 11 for every label into ``out_dir``; returns the files written (none when no
    record has timed steps) and the fits and break-even sizes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = [s for s in fig11_series(groups) if s["checked"] or s["modes"]]
    if not series:
        return [], {}
    prefix = len(series) > 1
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 7.5))
    facts: dict = {}
    for s in series:
        name = f"{s['label']}: " if prefix else ""
        sizes = [x for x, _ in s["checked"]] + [x for p in s["modes"].values() for x, _ in p]
        xs = [0.0, max(sizes)]
        parse_fit = line_fit(s["checked"])
        build_fit = line_fit(s["build"])
        facts[s["label"]] = {"checked_fit_ms": parse_fit, "build_fit_ms": build_fit, "modes": {}}
        if s["checked"]:
            dots = top.scatter(
                *zip(*s["checked"]), s=10, alpha=0.5, label=f"{name}checked uncons.: ast.parse per step"
            )
            if parse_fit:
                top.plot(
                    xs, [parse_fit[0] + parse_fit[1] * x for x in xs], color=dots.get_facecolor()[0], alpha=1
                )
        for mode, points in s["modes"].items():
            dots = top.scatter(
                *zip(*points),
                s=10,
                alpha=0.5,
                label=f"{name}{mode} ({MODE_NOTES[mode]}): constraint per step",
            )
            fit = line_fit(points)
            facts[s["label"]]["modes"][mode] = {"fit_ms": fit}
            if fit:
                top.plot(xs, [fit[0] + fit[1] * x for x in xs], color=dots.get_facecolor()[0], alpha=1)
            if fit and parse_fit:
                even = break_even(parse_fit, fit, build_fit, max(sizes))
                facts[s["label"]]["modes"][mode].update(even)
                if even["break_even_chars"]:
                    top.axvline(
                        even["break_even_chars"],
                        color=dots.get_facecolor()[0],
                        linestyle=":",
                        alpha=1,
                        label=f"{name}break-even {mode}: {even['break_even_chars']:,.0f} chars",
                    )
        if s["build"]:
            dots = bottom.scatter(
                *zip(*s["build"]), s=10, alpha=0.6, label=f"{name}{s['build_mode']}: building the constraint"
            )
            if build_fit:
                bottom.plot(
                    xs, [build_fit[0] + build_fit[1] * x for x in xs], color=dots.get_facecolor()[0], alpha=1
                )
    top.set(
        xlabel="context size (characters of prefix + suffix)",
        ylabel="ms per generated token",
        title="Mean overhead per generated token",
    )
    bottom.set(
        xlabel="context size (characters of prefix + suffix)",
        ylabel="ms (once per generation)",
        title="One-time overhead for constrained generation",
    )
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
        if ax.has_data():
            ax.legend(fontsize=7)
    fig.tight_layout()
    written = []
    for fmt in FORMATS:
        path = out_dir / f"fig11.{fmt}"
        fig.savefig(path, dpi=DPI)
        written.append(path)
    plt.close(fig)
    return written, facts
