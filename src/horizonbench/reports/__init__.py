"""The self-contained HTML report: figures as inline SVG, one Jinja2 template.

Nothing here reads or writes files; the flow passes tables in and writes the page out.
"""

from horizonbench.reports.html import render_report

__all__ = ["render_report"]
