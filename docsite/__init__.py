"""The documentation site's generated reference pages (the command line, the settings, the events)
and the MkDocs hook that adds them to the site at build time (``mkdocs.yml``: ``hooks``).

Not shipped in the wheel: the site is built from a checkout (``make docs``).
"""
