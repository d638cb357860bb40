"""Plotext plots of the detail screen: the worker-count interval plot and the score trend."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from textual_plotext import PlotextPlot

from flaketui.core.words import plural


class PivotPlot(PlotextPlot):
    """One Wilson interval per worker count, with the observed failure rate as a point."""

    def show(
        self, rows: Sequence[Any], dimension: str = "worker count", prefix: str = "n="
    ) -> None:
        """Draw pivot rows (key = the value, fail_rate, wilson_low, wilson_high)."""
        plt = self.plt
        plt.clear_figure()
        plt.title(f"failure rate by {dimension} (Wilson 95 %)")
        rows = [r for r in rows if getattr(r, "runs", 0) > 0]
        if not rows:
            self.refresh()
            return
        positions = [float(x) for x in range(1, len(rows) + 1)]
        top = min(1.0, max(0.1, max(r.wilson_high for r in rows) * 1.15))
        steps = max(2, self.size.height * 2)
        for x, row in zip(positions, rows, strict=True):
            # A vertical bar with caps: plotext has no asymmetric error bars.
            low, high = row.wilson_low, row.wilson_high
            ys = [low + (high - low) * i / (steps - 1) for i in range(steps)]
            plt.scatter([x] * steps, ys, marker="│", color="orange")
            plt.scatter([x, x], [low, high], marker="─", color="orange")
        plt.scatter(positions, [r.fail_rate for r in rows], color="red", marker="●")
        plt.xticks(positions, [f"{prefix}{r.key}"[:12] for r in rows])
        plt.xlim(0.5, len(rows) + 0.5)
        plt.ylim(0, top)
        ticks = [top * i / 4 for i in range(5)]
        plt.yticks(ticks, [f"{tick:.2f}" for tick in ticks])
        plt.ylabel("fail rate")
        self.refresh()


class TrendPlot(PlotextPlot):
    """The daily recency score over the last days, oldest first."""

    def show(self, scores: Sequence[float], *, threshold: float | None = None) -> None:
        """Draw the daily series and, when given, the quarantine threshold."""
        plt = self.plt
        plt.clear_figure()
        plt.title(f"recency score, last {plural(len(scores), 'day')}")
        if scores:
            days = [float(d) for d in range(-len(scores) + 1, 1)]
            plt.plot(days, list(scores), color="cyan", marker="braille")
            if threshold is not None:
                plt.hline(threshold, color="red")
            # Scale to what matters (the scores and the threshold), not to 1: a terminal plot
            # has few rows, and a 0.1 score on a 0-1 axis is indistinguishable from 0.
            top = max(0.5, max(scores) * 1.15, (threshold or 0.0) * 1.5)
            plt.ylim(0, top)
            # The threshold is labelled itself; a midpoint tick would share its terminal row.
            marks = [threshold] if threshold else [round(top / 2, 2)]
            ticks = sorted({0.0, round(top, 2), *marks})
            plt.yticks(ticks, [f"{t:.2f}" for t in ticks])
            marks = [float(d) for d in (-28, -21, -14, -7, 0) if d >= days[0]]
            plt.xticks(marks, [f"{d:.0f} d" if d else "now" for d in marks])
        self.refresh()
