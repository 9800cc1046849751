"""Reading the node page's HTML (as served, or as Chromium's DOM dump) back into what the tests check."""

from __future__ import annotations

from html.parser import HTMLParser

__all__ = ["NodePage", "parse"]


class NodePage(HTMLParser):
    """The verdict's attributes, the NPU rows (``tr id="npu-N-chip-C"``: attributes and text), the findings rows,
    the collectors and how many scripts the page has."""

    def __init__(self) -> None:
        super().__init__()
        self.verdict: dict[str, str | None] = {}
        self.rows: dict[str, dict[str, str | None]] = {}
        self.text: dict[str, str] = {}
        self.findings: list[dict[str, str | None]] = []
        self.collectors: dict[str, str | None] = {}
        self.scripts = 0
        self._row: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "script":
            self.scripts += 1
        if tag == "section" and found.get("id") == "verdict":
            self.verdict = found
        if found.get("data-collector"):
            self.collectors[str(found["data-collector"])] = found.get("data-state")
        if tag == "tr" and str(found.get("id", "")).startswith("npu-"):
            self._row = str(found["id"])
            self.rows[self._row], self.text[self._row] = found, ""
        elif tag == "tr" and found.get("data-kind"):
            self.findings.append(found)

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr":
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._row is not None:
            self.text[self._row] += data + " "


def parse(html: bytes | str) -> NodePage:
    page = NodePage()
    page.feed(html.decode("utf-8") if isinstance(html, bytes) else html)
    page.close()
    return page
