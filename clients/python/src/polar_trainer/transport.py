"""HTTP to the control plane with the standard library: one JSON request, retried when that is safe.

A request is retried only when it is idempotent (GET, DELETE, the fence routes, a submit that names
its ``batch_id``) and the failure is transient (no answer, 429, 502/503/504), waiting
``Retry-After`` when the server gives one and an exponential backoff otherwise. Everything else
raises at once as the typed error of :mod:`polar_trainer.errors`.

Example::

    t = Transport("http://127.0.0.1:8787", token)
    body = t.request("GET", "/v1/batches/b1")
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Dict, Optional

from .errors import BadResponse, PolarError, Unreachable, error_from_response

#: Seconds a retry waits at most, whatever ``Retry-After`` says.
MAX_RETRY_WAIT_SECONDS = 30.0


def _retry_after(headers: Any) -> Optional[float]:
    value = headers.get("Retry-After") if headers is not None else None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        # The HTTP-date form: the control plane never sends it; a second is a safe guess.
        return 1.0


class Transport:
    """Bearer-authenticated JSON requests against one base URL.

    Args:
        base_url: e.g. ``http://127.0.0.1:8787``.
        token: sent as ``Authorization: Bearer``.
        timeout: socket timeout (seconds) of a request that does not say otherwise.
        retries: how many times an idempotent request is retried after a transient failure.
        backoff: the first wait (seconds) between tries; doubled each time.
        sleep: the wait function (replaceable so a caller can bound or observe the waits).

    Example::

        t = Transport(url, token, retries=5)
        t.request("POST", "/v1/batches", {"batch_id": "b1", "tasks": [task]}, idempotent=True)
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        timeout: float = 30.0,
        retries: int = 4,
        backoff: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not base_url:
            raise ValueError("base_url is empty (the control plane's URL, e.g. http://127.0.0.1:8787)")
        if not token:
            raise ValueError("token is empty (the trainer token, POLAR_TRAINER_TOKEN)")
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.sleep = sleep

    def headers(self, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
        """The authorization header plus ``extra``.

        Example::

            req = urllib.request.Request(url, headers=t.headers({"Accept": "text/event-stream"}))
        """
        out = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        out.update(extra or {})
        return out

    def open(
        self,
        method: str,
        path: str,
        body: Optional[Dict[str, Any]] = None,
        headers: Optional[Dict[str, str]] = None,
        timeout: Optional[float] = None,
    ) -> Any:
        """Opens one request and returns the live response (the caller reads and closes it);
        raises the typed error for a non-2xx answer or :class:`Unreachable`.

        Example::

            with t.open("GET", "/v1/batches/b1/results", headers={"Accept": "text/event-stream"}) as res:
                line = res.readline()
        """
        data = None if body is None else json.dumps(body, allow_nan=False).encode("utf-8")
        hdrs = self.headers(headers)
        if data is not None:
            hdrs["Content-Type"] = "application/json"
        req = urllib.request.Request(self.base_url + path, data=data, method=method, headers=hdrs)
        try:
            return urllib.request.urlopen(req, timeout=timeout or self.timeout)
        except urllib.error.HTTPError as e:
            # urllib raises on every non-2xx; the body still holds the control plane's error.
            text = e.read().decode("utf-8", errors="replace")
            try:
                parsed = json.loads(text) if text else None
            except ValueError:
                parsed = None
            raise error_from_response(e.code, parsed, text, _retry_after(e.headers)) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            reason = getattr(e, "reason", e)
            raise Unreachable(0, "unreachable", f"{method} {self.base_url}{path}: {reason}") from e

    def _once(self, method: str, path: str, body: Optional[Dict[str, Any]], timeout: Optional[float]) -> Dict[str, Any]:
        with self.open(method, path, body, timeout=timeout) as res:
            status = res.status
            try:
                text = res.read().decode("utf-8")
            except (OSError, ValueError, http.client.HTTPException) as e:
                # The connection broke mid-body: no answer, as far as the caller can tell.
                raise Unreachable(0, "unreachable", f"{method} {self.base_url}{path}: {e}") from e
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            raise BadResponse(status, "bad_response", f"{method} {path}: not a JSON object: {text[:200]}")
        return parsed

    def request(
        self,
        method: str,
        path: str,
        body: Optional[Dict[str, Any]] = None,
        timeout: Optional[float] = None,
        idempotent: Optional[bool] = None,
    ) -> Dict[str, Any]:
        """Sends one JSON request and returns the decoded object; retries idempotent requests on
        transient failures (``idempotent`` defaults to True for GET and DELETE).

        Example::

            status = t.request("GET", "/v1/batches/b1")
        """
        if idempotent is None:
            idempotent = method in ("GET", "HEAD", "DELETE", "PUT")
        attempt = 0
        while True:
            try:
                return self._once(method, path, body, timeout)
            except PolarError as e:
                if not (idempotent and e.transient) or attempt >= self.retries:
                    raise
                wait = e.retry_after if e.retry_after is not None else self.backoff * (2**attempt)
                self.sleep(min(wait, MAX_RETRY_WAIT_SECONDS))
                attempt += 1
