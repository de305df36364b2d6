"""``{% module_preloads "approvals/dashboard.js" %}``: one ``<link rel="modulepreload">`` per module it imports."""

from django import template
from django.templatetags.static import static
from django.utils.html import format_html_join

from approvals.web.module_graph import imported_modules

register = template.Library()


@register.simple_tag
def module_preloads(*entries: str) -> str:
    """Preload links for what each entry module imports (each module once), to put in the page's head."""
    modules: list[str] = []
    for entry in entries:
        modules += [path for path in [entry, *imported_modules(entry)] if path not in modules]
    return format_html_join("\n  ", '<link rel="modulepreload" href="{}">', ((static(path),) for path in modules))
