"""Typed errors of the reference engine; ``server.py`` maps each to one HTTP answer."""

from __future__ import annotations


class EngineError(Exception):
    """Base class: ``status`` and ``code`` are the HTTP answer, ``field`` the offending input."""

    status = 500
    code = "internal_error"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message


class BadRequest(EngineError):
    """A request field the engine cannot serve (HTTP 400).

    Example::

        raise BadRequest("input_ids", "must be a non-empty list of token ids")
    """

    status = 400
    code = "invalid_request"


class Conflict(EngineError):
    """A request id that is still in flight (HTTP 400, as SGLang answers it).

    Example::

        raise Conflict("rid", "request r1 is still running")
    """

    status = 400
    code = "duplicate_rid"


class WeightLoadError(EngineError):
    """``/update_weights_from_disk`` could not load the checkpoint (HTTP 400, ``success: false``).

    Example::

        raise WeightLoadError("model_path", "no config.json in /ckpt/v3")
    """

    status = 400
    code = "weight_load_failed"
