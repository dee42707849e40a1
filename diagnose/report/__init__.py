"""Reports: one data structure, rendered as terminal text, Markdown, HTML or JSON."""

from diagnose.report.build import REPORT_FORMAT, build_report
from diagnose.report.html import render_html
from diagnose.report.json_report import render_json
from diagnose.report.markdown import render_markdown
from diagnose.report.model import Report
from diagnose.report.text import render_text

__all__ = [
    "REPORT_FORMAT",
    "Report",
    "build_report",
    "render_html",
    "render_json",
    "render_markdown",
    "render_text",
]
