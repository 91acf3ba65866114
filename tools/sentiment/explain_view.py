"""A sentiment explanation as a page: the text kit's HTML view (handlers/kits/text/view.py),
`python -m clients explain sentiment --html out.html`."""

from handlers.kits.text.view import AWAY, TOWARD, render_html

__all__ = ["AWAY", "TOWARD", "render_html"]
