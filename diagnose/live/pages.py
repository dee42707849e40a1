"""The pages the live view opens over itself: a hypothesis, the rules not fired, a verification, the help."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Markdown


class DocumentScreen(ModalScreen[None]):
    """A scrollable Markdown page over the view: a hypothesis, the rules not fired, the help."""

    BINDINGS = [Binding("escape,q", "dismiss", "Back")]
    DEFAULT_CSS = """
    DocumentScreen { align: center middle; }
    DocumentScreen > VerticalScroll { width: 90%; height: 90%; border: round $accent; background: $surface; }
    """

    def __init__(self, markdown: str, id: str | None = None) -> None:
        super().__init__(id=id)
        self.markdown = markdown

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Markdown(self.markdown)
        yield Footer()


HELP = """\
# diagnose live

Observe, hypothesise, verify: the charts show the evidence, the list ranks the
hypotheses the rules drew from it, and each hypothesis says how to verify it.

| key | what it does |
|---|---|
| `enter` or click | open the highlighted hypothesis: evidence, how to verify, remedy, pitfalls |
| `o` | the rules that did not fire: ruled out (and why) or not checked (and what evidence was missing) |
| `p` | pause / resume (a paused live view keeps sampling and recording) |
| `w` | change the window: 1 min, 5 min, 15 min, 1 h, everything |
| `tab` | move between panels |
| `m` | write the Markdown report of the current window to a file |
| `v` | verify: the likely hypotheses' read-only checks, run on this host now (ten seconds) |
| `?` | this help |
| `q` or Ctrl-C | quit |

Red marks under a chart are *episodes*: intervals where that signal left its
baseline and came back; bright ones stand out from the signal's others, dim
ones are its routine (at least 8 alike). Marks at the same places on two
charts are spikes that move together; the report's alignment table says how
likely that is by chance.

A score of 0.5 or more is *likely*; a healthy service shows no likely finding.
"""
