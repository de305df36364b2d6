"""Static URLs as pages link them (collected, hashed names) read back as the source files they came from."""

from django.conf import settings
from django.contrib.staticfiles.storage import staticfiles_storage


def source_name(url):
    """``/static/approvals/x.<hash>.js`` -> ``approvals/x.js``, by the manifest collectstatic wrote; fails for a
    name it did not collect (a page must link nothing else)."""
    hashed = url.removeprefix(settings.STATIC_URL)
    sources = {name: source for source, name in staticfiles_storage.hashed_files.items()}
    assert hashed in sources, f"{url} is not a collected, hashed static file"
    return sources[hashed]
