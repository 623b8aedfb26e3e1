"""Error mapping by code and status, and the SSE parser (pure units)."""

from __future__ import annotations

import io

import pytest

from polar_trainer import errors
from polar_trainer.sse import read_events


@pytest.mark.parametrize(
    "status,code,cls",
    [
        (400, "validation_failed", errors.BadRequest),
        (400, "invalid_json", errors.BadRequest),
        (401, "unauthorized", errors.Unauthorized),
        (403, "forbidden", errors.Forbidden),
        (404, "not_found", errors.NotFound),
        (409, "conflict", errors.Conflict),
        (409, "not_ready", errors.Conflict),
        (413, "payload_too_large", errors.PayloadTooLarge),
        (429, "queue_full", errors.RateLimited),
        (502, "bad_gateway", errors.ServerUnavailable),
        (503, "not_configured", errors.NotConfigured),
        (503, "unavailable", errors.ServerUnavailable),
        (500, "internal", errors.ServerError),
    ],
)
def test_error_bodies_map_to_typed_errors(status, code, cls):
    e = errors.error_from_response(status, {"error": {"code": code, "message": "tasks[0].num_samples: too big", "details": [1]}})
    assert type(e) is cls and isinstance(e, errors.PolarError)
    assert (e.status, e.code, e.message, e.details) == (status, code, "tasks[0].num_samples: too big", [1])
    assert e.transient == (cls in (errors.RateLimited, errors.ServerUnavailable))


def test_a_body_that_is_not_an_error_body_keeps_the_text():
    e = errors.error_from_response(418, None, "<html>teapot</html>")
    assert type(e) is errors.PolarError and e.code == "http_error" and "teapot" in e.message
    assert type(errors.error_from_response(504, "x", "gateway timeout")) is errors.ServerUnavailable


def test_sse_events_ids_comments_and_multiline_data():
    stream = b": keep-alive\n\nid: 1\nevent: result\ndata: {\"a\":\ndata: 1}\n\n: ping\nid: 2\nevent: result\ndata: x\n\nevent: done\ndata: {}\n\n"
    events = list(read_events(io.BytesIO(stream).readline))
    assert [(e.event, e.id, e.data) for e in events] == [
        ("result", "1", '{"a":\n1}'),
        ("result", "2", "x"),
        ("done", "2", "{}"),  # the last event id carries over, as the spec says
    ]


def test_a_torn_final_event_is_not_dispatched():
    events = list(read_events(io.BytesIO(b"id: 1\nevent: result\ndata: {}\n\nid: 2\nevent: result\ndata: {\"cut").readline))
    assert [e.id for e in events] == ["1"]


def test_crlf_lines_and_a_field_without_space():
    events = list(read_events(io.BytesIO(b"event:result\r\nid:7\r\ndata:{}\r\n\r\n").readline))
    assert [(e.event, e.id, e.data) for e in events] == [("result", "7", "{}")]
