"""A sentiment explanation as a page: the text kit's HTML view (clients/kits/text.py),
`python -m clients explain sentiment --html out.html`."""

from clients.kits.text import AWAY, TOWARD, render_html

__all__ = ["AWAY", "TOWARD", "render_html"]
