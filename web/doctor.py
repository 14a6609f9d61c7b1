"""GET /doctor: the setup checks of `starter.py doctor` as a page, run by the same code
(the doctor package) in the web server's process, with its environment. The notice that
no provider answers links here.

The checks call each provider once or twice, so when the server has an access token
(COUNCIL_WEB_TOKEN) the page needs it, as a start does; the Host allowlist applies as on
every route. The checks' texts carry no secret (doctor.checks) and the template escapes
them.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

import doctor
from web.guard import Guard, TooManyFailures, too_many
from web.settings import WebSettings


class DoctorPage:
    def __init__(self, settings: WebSettings, guard: Guard, templates: Jinja2Templates) -> None:
        self.settings = settings
        self.guard = guard
        self.templates = templates

    def routes(self) -> list[Route]:
        return [Route("/doctor", self.show, methods=["GET"])]

    async def show(self, request: Request) -> Response:
        try:
            signed_in = self.guard.token_given(request)
        except TooManyFailures as refused:
            return too_many(refused)
        if not signed_in:
            return PlainTextResponse(
                "this server needs its access token to run the setup checks: /login",
                status_code=403,
            )
        checks = await doctor.diagnose()
        return self.templates.TemplateResponse(
            request,
            "doctor.html",
            {
                "checks": checks,
                "marks": doctor.MARKS,
                "healthy": doctor.healthy(checks),
                "token_required": self.guard.token_required,
                "simulated": self.settings.simulated,
            },
        )
