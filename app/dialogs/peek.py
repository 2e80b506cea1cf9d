"""A closer look at one dataset: its data quality (`d`), its last answers (`v`), its run's log
(`L`).

Each is a screen of its own over the dashboard (80x24 has no room beside the panels). What
they show is read off the UI's loop: the quality figures come with the panel's snapshot
(the dashboard refreshes them), the answers and the log through the source's
:class:`Peek` in thread workers, since a record file may be 10 GB behind an SSH link and a
tokenizer takes seconds to load. Text from files and servers is drawn as plain `Text`, after
`untrusted.clean`: never markup, never an escape sequence. `v` and `L` search (`/`, `n`,
`N`), their matches marked with styles on that `Text`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Input, Label, Static

from gen_tui.backends.progress.snapshot import DatasetSnapshot
from gen_tui.backends.store.prompt_heads import PromptHeads
from gen_tui.backends.store.samples import DEFAULT_SAMPLES, Sample, parse_samples
from gen_tui.backends.store.tails import Peek, Tail
from gen_tui.backends.untrusted import one_line
from gen_tui.widgets.found_text import Finder
from gen_tui.widgets.key_line import KeyLine
from gen_tui.widgets.quality_view import quality_text, seconds

REFRESH_S = 0.5
LOG_POLL_S = 1.0
LOG_LINES = 200


def _close(keys: str) -> Binding:
    return Binding(keys, "close", "Panels", tooltip="Back to the dataset panels")


class PeekScreen(Screen[None]):
    """A title line, a scrolling body, the key line; Escape goes back."""

    title_text = ""

    def __init__(self, dataset: str) -> None:
        super().__init__()
        self.dataset = dataset

    def compose(self) -> ComposeResult:
        yield Label(self.title_text, id="peek-title", markup=False)
        with VerticalScroll(id="peek-scroll"):
            yield Static("", id="peek-body", markup=False)
        yield KeyLine()

    def on_mount(self) -> None:
        self.query_one("#peek-scroll").focus()

    def show(self, body: Text | str) -> None:
        self.query_one("#peek-body", Static).update(body)

    def action_close(self) -> None:
        self.dismiss(None)


class SearchedScreen(PeekScreen):
    """A peek screen whose text searches: `/` opens a line to type in, every match is
    highlighted as it is typed and the view goes to the first; Enter goes back to scrolling
    with the matches kept (a line says which of how many is shown), `n`/`N` go to the next
    and previous one, round the end; Escape in the line clears the search. ↑ ↓,
    PageUp/PageDown, Home/End scroll (the view has the focus).

    Answers and log lines are other people's text: searched and highlighted as plain
    characters, never as markup or a pattern (issue 31, request 2)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "search", "Search", key_display="/", tooltip="Find text in this view"),
        Binding("n", "step(1)", "Next", tooltip="The next match of the search"),
        Binding("N", "step(-1)", "Previous", show=False, tooltip="The previous match"),
    ]

    def __init__(self, dataset: str) -> None:
        super().__init__(dataset)
        self.finder = Finder()
        self.text = Text()
        """What the view shows, unmarked: searched again whenever it changes."""

    def compose(self) -> ComposeResult:
        yield from super().compose()
        search = Input(placeholder="search (Enter: back to scrolling, Escape: clear)",
                       id="peek-search")  # fmt: skip
        search.display = False
        yield search
        found = Label("", id="peek-found", markup=False)
        found.display = False
        yield found

    def show(self, body: Text | str) -> None:
        self.text = body if isinstance(body, Text) else Text(body)
        if self.finder.needle:
            self.finder.search(self.text, self.finder.needle)
            self._said()
        super().show(self.finder.marked(self.text))

    def action_search(self) -> None:
        search = self.query_one("#peek-search", Input)
        search.display = True
        search.focus()

    def action_step(self, by: int) -> None:
        if self.finder.step(by) >= 0:
            self._mark(go=True)

    def action_close(self) -> None:
        """Escape in the search line clears the search; elsewhere it closes the view."""
        search = self.query_one("#peek-search", Input)
        if search.has_focus:
            search.value = ""
            search.display = False
            self.query_one("#peek-scroll").focus()
            return
        super().action_close()

    @on(Input.Changed, "#peek-search")
    def _typed(self, event: Input.Changed) -> None:
        self.finder.current = -1  # a new needle starts from the first match
        self.finder.search(self.text, event.value)
        self._mark(go=True)

    @on(Input.Submitted, "#peek-search")
    def _submitted(self) -> None:
        self.query_one("#peek-search", Input).display = False  # the line below says it
        self.query_one("#peek-scroll").focus()

    def _mark(self, go: bool) -> None:
        super().show(self.finder.marked(self.text))
        self._said()
        if go:
            self.call_after_refresh(self._go)

    def _said(self) -> None:
        found = self.query_one("#peek-found", Label)
        found.update(self.finder.status())
        found.display = bool(self.finder.needle)

    def _go(self) -> None:
        """Scroll the current match into view, a third of the way down."""
        body = self.query_one("#peek-body", Static)
        row = self.finder.row(body.size.width)
        if row is not None:
            scroll = self.query_one("#peek-scroll", VerticalScroll)
            scroll.scroll_to(y=max(0, row - scroll.size.height // 3), animate=False)


class QualityScreen(PeekScreen):
    """The data quality of one dataset, live: it follows the panel's snapshots."""

    BINDINGS: ClassVar[list[BindingType]] = [_close("escape,d")]

    def __init__(self, dataset: str, snapshot: Callable[[], DatasetSnapshot | None]) -> None:
        super().__init__(dataset)
        self.snapshot = snapshot
        self.title_text = f"{dataset} · data quality (this run's answers)"
        self._shown: DatasetSnapshot | None = None

    def on_mount(self) -> None:
        super().on_mount()
        self.refresh_view()
        self.set_interval(REFRESH_S, self.refresh_view, name="quality-refresh")

    def refresh_view(self) -> None:
        snap = self.snapshot()
        if snap is self._shown and snap is not None:
            return
        self._shown = snap
        self.show(quality_text(snap, max(40, self.size.width - 2)))


@functools.lru_cache(maxsize=2)
def _tokenizer(source: str) -> Any:
    """A run's tokenizer, loaded once per app (seconds the first time: a worker's)."""
    from gen_tui.backends.tokenizer import load_tokenizer

    return load_tokenizer(source)


def sample_text(samples: Sequence[Sample], tail: Tail, prompts: PromptHeads | None = None) -> Text:
    """The answers, newest first, each with its figures on a heading line and the head of
    the prompt it answers (looked up in the prompt file)."""
    if tail.error:
        return Text(f"Cannot read the answers: {one_line(tail.error)}")
    if not samples:
        return Text("No answer written yet." if not tail.cut else "The last answer is too big.")
    out = Text()
    for sample in samples:
        tokens = f"{sample.tokens:,} tokens" if sample.tokens is not None else "? tokens"
        prompt = f"prompt {sample.prompt_tokens:,}" if sample.prompt_tokens is not None else ""
        latency = seconds(sample.latency_s) if sample.latency_s is not None else ""
        turn = f"turn {sample.turn[0]} of {sample.turn[1]}" if sample.turn else ""
        head = " · ".join(
            p
            for p in (f"#{sample.sample_id}", turn, sample.finish_reason, tokens, prompt, latency)
            if p
        )
        cut = sample.finish_reason == "length"
        out.append(f" {head} \n", style="bold black on yellow" if cut else "bold reverse")
        if prompts is not None:
            prompt_head = prompts.heads.get(sample.sample_id)
            out.append("prompt", style="bold cyan")
            if sample.turn and prompt_head is not None:  # the head is the line's last turn
                out.append(" (the conversation's last turn)", style="italic cyan")
            if prompt_head is not None:
                out.append("\n" + prompt_head + "\n", style="cyan")
            else:
                out.append(f" (not shown: {prompts.missing})\n", style="italic")
        if sample.reasoning:
            out.append("reasoning\n", style="bold dim")
            out.append(sample.reasoning.strip() + "\n", style="dim")
        out.append("answer\n", style="bold")
        if sample.answer:
            out.append(sample.answer.strip() + "\n")
        else:
            out.append("(ids only, and no tokenizer to decode them)\n", style="italic")
        out.append("\n")
    return out


def answers_title(dataset: str, count: int) -> str:
    """The `v` screen's title for the answers read: their real count, not the count asked
    (one answer written is "the last answer", not "the last 20 answers")."""
    if count == 0:
        return f"{dataset} · no answers written yet"
    if count == 1:
        return f"{dataset} · its one answer so far"
    return f"{dataset} · the last {count} answers, newest first"


class SampleScreen(SearchedScreen):
    """The last answers of one dataset, read from the end of its record file."""

    BINDINGS: ClassVar[list[BindingType]] = [
        _close("escape,v"),
        Binding("R", "reload", "Reload", tooltip="Read the newest answers again"),
    ]

    def __init__(self, dataset: str, peek: Peek, count: int = DEFAULT_SAMPLES) -> None:
        super().__init__(dataset)
        self.peek = peek
        self.count = count
        self.title_text = f"{dataset} · the last answers, newest first (up to {count})"
        self.samples: list[Sample] = []
        self.prompts: PromptHeads | None = None

    def on_mount(self) -> None:
        super().on_mount()
        self.action_reload()

    def action_reload(self) -> None:
        self.show("reading the end of the record file…")
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False, group="samples")
    def load(self) -> None:
        try:
            tail = self.peek.records(self.count)
        except Exception as exc:  # a link down, a timeout: said on the screen
            tail = Tail(error=str(exc) or type(exc).__name__)
        tokenizer = None
        if self.peek.tokenizer and any('"text":' not in line for line in tail.lines):
            try:
                tokenizer = _tokenizer(self.peek.tokenizer)
            except Exception:  # without it, the ids stay undecoded and the screen says so
                tokenizer = None
        samples = parse_samples(tail.lines, tokenizer)
        keys = [sample.sample_id for sample in samples]
        prompts = None
        if keys:
            try:
                prompts = self.peek.prompt_heads(keys)
            except Exception as exc:  # a link down, a timeout: said in place of the heads
                prompts = PromptHeads(missing=str(exc) or type(exc).__name__)
        self.app.call_from_thread(self._loaded, samples, tail, prompts)

    def _loaded(self, samples: list[Sample], tail: Tail, prompts: PromptHeads | None) -> None:
        self.samples = samples
        self.prompts = prompts
        if samples or not tail.error:  # a failed read says so in the body; the title waits
            self.title_text = answers_title(self.dataset, len(samples))
            self.query_one("#peek-title", Label).update(self.title_text)
        self.show(sample_text(samples, tail, prompts))


class LogScreen(SearchedScreen):
    """The end of the log of the run writing one dataset, followed once a second."""

    BINDINGS: ClassVar[list[BindingType]] = [_close("escape,L")]

    def __init__(
        self, dataset: str, peek: Peek | None, events: Callable[[], Sequence[str]]
    ) -> None:
        super().__init__(dataset)
        self.peek = peek
        self.events = events
        self.title_text = (
            f"{dataset} · its run's log (following)"
            if peek is not None and peek.log is not None
            else f"{dataset} · this process's events (its run is in this process)"
        )
        self.lines: tuple[str, ...] = ()

    def on_mount(self) -> None:
        super().on_mount()
        self.show("reading the log…")
        self.poll()
        self.set_interval(LOG_POLL_S, self.poll, name="log-poll")

    def poll(self) -> None:
        if self.peek is None or self.peek.log is None:
            self._show_lines(tuple(self.events()), None)
        else:
            self.read()

    @work(thread=True, exclusive=True, exit_on_error=False, group="log")
    def read(self) -> None:
        assert self.peek is not None and self.peek.log is not None
        try:
            tail = self.peek.log(LOG_LINES)
        except Exception as exc:  # a link down, a timeout: said on the screen
            tail = Tail(error=str(exc) or type(exc).__name__)
        self.app.call_from_thread(self._show_lines, tail.lines, tail)

    def _show_lines(self, lines: Sequence[str], tail: Tail | None) -> None:
        lines = tuple(one_line(line, 1000) for line in lines[-LOG_LINES:])
        if tail is not None and tail.error:
            self.show(f"No log to show: {one_line(tail.error)}")
            return
        if lines == self.lines and self.lines:
            return
        scroll = self.query_one("#peek-scroll", VerticalScroll)
        at_end = scroll.scroll_y >= scroll.max_scroll_y - 1
        self.lines = lines
        # the path is the run's stdout as /proc names it: another user chose that name
        head = f"{one_line(tail.path)}\n" if tail is not None and tail.path else ""
        self.show(Text(head, style="dim") + Text("\n".join(lines) or "(empty so far)"))
        if at_end:
            scroll.call_after_refresh(scroll.scroll_end, animate=False)
