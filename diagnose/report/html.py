"""The HTML report: the Markdown report as one self-contained page, pictures inline, that prints well.

The page is the Markdown report converted by markdown-it (CommonMark with
tables) with raw HTML turned off: a dump's file names and log lines are shown
as text, never run as markup. Pictures are PNG data URIs; nothing is fetched.
"""

from __future__ import annotations

import base64
import html

from diagnose.report.markdown import render_markdown
from diagnose.report.model import Report

_STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1a1a1a;
       max-width: 62rem; margin: 2rem auto; padding: 0 1.5rem; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.25rem; margin-top: 2rem; border-bottom: 1px solid #ddd; }
h3 { font-size: 1.05rem; margin-top: 1.5rem; }
table { border-collapse: collapse; margin: 0.8rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
code { font-size: 0.88em; background: #f5f5f5; padding: 0 0.2em; }
img { max-width: 100%; height: auto; }
@media print {
  body { margin: 0; max-width: none; }
  h2, h3 { break-after: avoid; }
  img, table { break-inside: avoid; }
}
"""


def render_html(report: Report, pictures: list[tuple[str, bytes, str]] | None = None) -> str:
    """``pictures``: (title, PNG bytes, alt text), shown after the summary as in the Markdown report."""
    return page(f"diagnose report: {report.dump}", render_markdown(report, inline(pictures or [])))


def inline(pictures: list[tuple[str, bytes, str]]) -> list[tuple[str, str, str]]:
    """(title, PNG bytes, alt) -> (title, data URI, alt): a picture that travels inside the page."""
    return [
        (t, "data:image/png;base64," + base64.b64encode(png).decode("ascii"), a) for t, png, a in pictures
    ]


def page(title: str, markdown: str) -> str:
    """One self-contained HTML page of a Markdown text: raw HTML in it is shown, never run."""
    from markdown_it import MarkdownIt  # only an HTML report needs it: not on every start

    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(markdown)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n{body}</body>\n</html>\n"
    )
