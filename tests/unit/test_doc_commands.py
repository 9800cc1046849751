"""The manual's shell blocks as tests/e2e/test_doc_commands.py runs them: every command either runs or is
skipped by a marker in its page that says why, and a marker can only skip what it names."""

from __future__ import annotations

import pytest

from tests.support.doc_commands import PAGES, MarkerError, blocks, page_blocks


def test_every_command_of_the_manual_runs_or_its_page_says_why_not() -> None:
    commands = [command for block in page_blocks() for command in block.commands]
    assert {page.name for page in PAGES} >= {"troubleshooting.md", "demo.md", "check.md"}
    assert all(command.skipped is None or command.skipped.strip() for command in commands)
    ran = [command for command in commands if command.skipped is None]
    assert len(ran) >= 25, [command.where for command in ran]
    # what a user pastes on the first day runs: the demo's faults, the job gate, the alert questions
    texts = {command.text for command in ran}
    assert {"npuwatch demo set link_down --npu 3", "npuwatch check --demo", "npuwatch demo clear all",
            "promtool check rules /etc/prometheus/npuwatch/*.rules.yml"} <= texts
    # nothing that needs root or systemd is left to run
    assert not [command.where for command in ran if command.text.startswith(("sudo ", "systemctl", "journalctl"))]


def test_a_block_reads_as_a_shell_does() -> None:
    page = """intro

```sh
# a comment line
npuwatch demo show            # trailing comment
curl -s 'AGENT/x#y' | grep -c a   # a hash inside a word stays
scontrol update nodename=n \\
    state=drain
```

```text
npuwatch not-shell
```
"""
    (block,) = blocks(page, "p.md")
    assert block.line == 3
    assert [(c.line, c.text, c.exit, c.skipped) for c in block.commands] == [
        (5, "npuwatch demo show", 0, None),
        (6, "curl -s 'AGENT/x#y' | grep -c a", 0, None),
        (7, "scontrol update nodename=n state=drain", 0, None),
    ]


def test_markers_skip_a_block_or_one_command_and_set_an_exit_status() -> None:
    page = """<!-- shell-test: skip (needs root (sudo) and systemd) -->
```sh
sudo systemctl restart npuwatch
```
<!-- shell-test: skip `journalctl -u npuwatch` (needs systemd) -->
<!-- shell-test: exit 2 `npuwatch check --demo` (the link down fails it) -->
```sh
npuwatch check --demo
journalctl -u npuwatch
npuwatch check --demo --only tools
```
"""
    first, second = blocks(page, "p.md")
    assert [c.skipped for c in first.commands] == ["needs root (sudo) and systemd"]
    assert first.run == ()
    assert [(c.text, c.exit, c.skipped) for c in second.commands] == [
        ("npuwatch check --demo", 2, None),
        ("journalctl -u npuwatch", 0, "needs systemd"),
        ("npuwatch check --demo --only tools", 0, None),  # a marker names a whole command, not a start
    ]


@pytest.mark.parametrize(("page", "says"), [
    ("<!-- shell-test: skip -->\n```sh\nls\n```\n", "not a shell-test marker"),  # no reason
    ("<!-- shell-test: ignore (x) -->\n```sh\nls\n```\n", "not a shell-test marker"),
    ("<!-- shell-test: exit 2 (x) -->\n```sh\nls\n```\n", "needs the command"),
    ("<!-- shell-test: skip (x) -->\n\ntext\n```sh\nls\n```\n", "right above a sh block"),
    ("```sh\nls\n```\n<!-- shell-test: skip (x) -->\n", "right above a sh block"),
    ("<!-- shell-test: skip `ls -l` (x) -->\n```sh\nls\n```\n", "has no command 'ls -l'"),
])
def test_a_marker_that_skips_nothing_it_names_is_an_error(page: str, says: str) -> None:
    with pytest.raises(MarkerError, match=says):
        blocks(page, "p.md")
