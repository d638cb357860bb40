"""The detail screen's likely causes: the suspects list, and the messages its workers post."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.message import Message
from textual.widgets import Static

from flaketui.core.output.text import visible


class CausesLoaded(Message):
    """A test's or family's cause analysis (flaketui.core.scoring.causes) is ready."""

    def __init__(self, key: str, analysis: Any) -> None:
        self.key = key
        self.analysis = analysis
        super().__init__()


class DiagnoseProgress(Message):
    """A diagnose session started or ended (done of planned sessions so far)."""

    def __init__(self, done: int, planned: int, what: str) -> None:
        self.done = done
        self.planned = planned
        self.what = what
        super().__init__()


class DiagnoseDone(Message):
    """Diagnose finished (or was cancelled): its Diagnosis, or a one-line problem."""

    def __init__(self, diagnosis: Any | None, problem: str | None = None) -> None:
        self.diagnosis = diagnosis
        self.problem = problem
        super().__init__()


def suspects_text(analysis: Any, dimension: str) -> Text:
    """One line per suspect, strongest first, and which dimension the pivot shows."""
    text = Text()
    if not analysis.suspects:
        text.append("none: no recorded value makes it fail significantly more", "dim")
    for number, suspect in enumerate(analysis.suspects):
        if number:
            text.append("\n")
        text.append(visible(suspect.label), "bold")
        text.append(
            f"  {suspect.bad}/{suspect.runs} bad ({suspect.rate:.0%}) against "
            f"{suspect.rest_rate:.0%} elsewhere, p = {suspect.p_value:.2g}",
            "dim",
        )
    text.append(f"\npivot by {dimension}", "italic")
    text.append("   d: next dimension", "dim")
    return text


def diagnosis_text(diagnosis: Any) -> Text:
    """The latest diagnosis: its label, summary and reproduction command."""
    text = Text()
    text.append(visible(diagnosis.label), "bold")
    text.append(f"  {visible(diagnosis.summary)}")
    for experiment in diagnosis.experiments:
        text.append(f"\n  {experiment.name}: {experiment.counts()}", "dim")
    text.append("\n  reproduce: ")
    text.append(visible(" ".join(diagnosis.command)), "bold")
    replay = getattr(diagnosis, "replay", None)
    if replay and replay != diagnosis.command:
        text.append(f"\n  replay the order of run {visible(diagnosis.replay_run)}: ", "dim")
        text.append(visible(" ".join(replay)))
    return text


class SuspectsPanel(Static):
    """The suspects of the test shown, strongest first."""
