"""Typed errors of the package, mapped in one place.

Every non-2xx answer of the control plane carries ``{error: {code, message, details?}}``; the
client turns it into a :class:`PolarError` subclass chosen by ``code`` first and HTTP status
second (:func:`error_from_response`), so a trainer can ``except NotFound`` or ``except Conflict``
instead of parsing strings. Errors that are not HTTP answers (a fence that did not drain, a
scheduler that cannot go on) have their own classes below.

Example::

    try:
        client.status("nope")
    except NotFound as e:
        print(e.code, e.message)   # not_found batch 'nope' does not exist
"""

from __future__ import annotations

from typing import Any, Optional


class PolarError(Exception):
    """A failed call to the control plane.

    Attributes:
        status: the HTTP status (0 when the server could not be reached).
        code: ``error.code`` of the body (``validation_failed``, ``not_found``, ``conflict``, ...), or
            ``unreachable`` / ``bad_response`` / ``http_error`` when there was no error body.
        message: ``error.message`` (the control plane names the offending field or limit).
        details: ``error.details`` (field issues for a 400), or None.
        retry_after: seconds from a ``Retry-After`` header, or None.

    Example::

        except PolarError as e:
            log.warning("polar %s (%d): %s", e.code, e.status, e.message)
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: Any = None,
        retry_after: Optional[float] = None,
    ) -> None:
        super().__init__(f"{code} ({status}): {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.retry_after = retry_after

    @property
    def transient(self) -> bool:
        """True when the same request may succeed later (unreachable, 429, 502, 503 but not
        ``not_configured``, 504).

        Example::

            if e.transient: time.sleep(e.retry_after or 1)
        """
        return isinstance(self, (Unreachable, RateLimited, ServerUnavailable))


class BadRequest(PolarError):
    """400: the body or a parameter is invalid; ``message`` names the field (``details`` lists them)."""


class Unauthorized(PolarError):
    """401: missing or wrong token, or a token of another role."""


class Forbidden(PolarError):
    """403: a valid token that may not use this route."""


class NotFound(PolarError):
    """404: no such batch, session or route."""


class Conflict(PolarError):
    """409: the batch id exists with another body, was cancelled, or a result is not ready yet."""


class PayloadTooLarge(PolarError):
    """413: the body or a part of it is over a limit (``message`` names the limit)."""


class RateLimited(PolarError):
    """429: the queue is full; ``retry_after`` says when to try again."""


class ServerError(PolarError):
    """5xx the client does not retry (500, or 503 ``not_configured`` with a secret missing)."""


class NotConfigured(ServerError):
    """503 ``not_configured``: the deployment lacks a secret (the message names it)."""


class ServerUnavailable(PolarError):
    """502, 503 (other than ``not_configured``) or 504: worth retrying."""


class Unreachable(PolarError):
    """No HTTP answer at all (connection refused, DNS, timeout): ``status`` is 0."""


class BadResponse(PolarError):
    """A 2xx answer that is not the JSON the route promises."""


_BY_CODE = {
    "not_configured": NotConfigured,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "conflict": Conflict,
    "payload_too_large": PayloadTooLarge,
}

_BY_STATUS = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    429: RateLimited,
    502: ServerUnavailable,
    503: ServerUnavailable,
    504: ServerUnavailable,
}


def error_from_response(
    status: int, body: Any, text: str = "", retry_after: Optional[float] = None
) -> PolarError:
    """The :class:`PolarError` subclass for a non-2xx answer.

    Args:
        status: the HTTP status.
        body: the decoded JSON body (anything; an ``{error: {code, message}}`` object is read).
        text: the raw body, quoted in the message when it is not an error body.
        retry_after: the parsed ``Retry-After`` header.

    Example::

        err = error_from_response(404, {"error": {"code": "not_found", "message": "no"}})
        assert isinstance(err, NotFound)
    """
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict) and isinstance(err.get("code"), str):
        code, message, details = err["code"], str(err.get("message", "")), err.get("details")
    else:
        code, message, details = "http_error", text[:500], None
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else PolarError
    return cls(status, code, message, details, retry_after)


class FenceError(Exception):
    """A weight-update fence that did not hold: the gateways did not all pause in time, or the
    update function failed. The pause has been undone (resumed) unless ``still_paused`` is True.

    Attributes:
        queue: the queue that was fenced.
        reason: ``not_drained`` (pause answered ``ok: false``), ``update_failed`` (the update
            function raised; the original exception is ``__cause__``) or ``resume_failed``.
        result: the fence route's last answer (a :class:`~polar_trainer.fence.FenceResult`), if any.
        still_paused: True when the queue may still be paused (the undo itself failed).

    Example::

        try:
            client.weight_update("default", 3, push_weights)
        except FenceError as e:
            print(e.reason, [n.node_id for n in e.result.nodes if not n.ok])
    """

    def __init__(self, queue: str, reason: str, message: str, result: Any = None, still_paused: bool = False):
        super().__init__(f"fence on queue '{queue}': {reason}: {message}")
        self.queue = queue
        self.reason = reason
        self.result = result
        self.still_paused = still_paused


class SchedulerError(Exception):
    """The group scheduler cannot go on: a submit was refused for good (a 400 naming the field, a
    409 for a batch id reused with another body), a worker thread failed, or its state file
    belongs to another run. Raised in the trainer's thread by the next scheduler call.

    Example::

        try:
            batch = scheduler.next_batch()
        except SchedulerError as e:
            raise SystemExit(str(e))
    """


class StateError(SchedulerError):
    """The scheduler's state folder cannot be used (another ``run_id``, a corrupt file)."""


class EngineError(Exception):
    """An engine refused or failed a call (SGLang answered non-2xx or ``success: false``, or could
    not be reached: ``status`` 0).

    Example::

        except EngineError as e:
            print(e.url, e.status, e.message)
    """

    def __init__(self, url: str, status: int, message: str) -> None:
        super().__init__(f"engine {url}: {status or 'unreachable'}: {message}")
        self.url = url
        self.status = status
        self.message = message
