"""The web page: start, watch live, stop and read deliberations.

    python -m web [--host H] [--port N]        (or `make web`)

web.app holds the routes, web.views what the pages show, templates/ and static/ the page
itself (plain HTML, CSS and a small script; nothing is loaded from elsewhere).
"""
