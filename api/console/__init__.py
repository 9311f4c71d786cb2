"""The web console at ``/console``: a small single-page app served by the admin service itself.

The page and its scripts and styles ship as package data (``api/console/static``); nothing is
loaded from anywhere else.  Every figure the console shows comes from the public REST API,
called by the browser with the user's own token: these routes serve files only, and are open to
anyone (``api.auth``), like ``/docs``.  Why a build-free SPA, and what each page shows:
docs/console.md.
"""
