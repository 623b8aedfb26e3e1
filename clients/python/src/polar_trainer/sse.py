"""A Server-Sent Events reader (the WHATWG event-stream format) over a binary line source.

The control plane streams results as ``event: result`` / ``id: <seq>`` / ``data: <json>`` and ends
with ``event: done``; comment lines (``: keep-alive``) keep the connection open. This module only
parses; reconnecting with ``Last-Event-ID`` is the client's job (:meth:`PolarClient.stream_results`).

Example::

    for event in read_events(response.readline):
        if event.event == "result":
            handle(event.id, json.loads(event.data))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Optional


@dataclass
class Event:
    """One dispatched event.

    Attributes:
        event: the ``event:`` field (``message`` when the stream named none).
        data: the ``data:`` lines joined with newlines.
        id: the last ``id:`` seen so far in the stream (the spec's "last event ID"), or None.
        retry: a ``retry:`` value in milliseconds given with this event, or None.

    Example::

        Event(event="result", data='{"seq": 1}', id="1")
    """

    event: str
    data: str
    id: Optional[str] = None
    retry: Optional[int] = None


def read_events(readline: Callable[[], bytes]) -> Iterator[Event]:
    """Yields events until the source ends (``readline`` returns ``b""``).

    A final event without its terminating blank line is NOT dispatched (the spec's rule: it may
    be cut short), so a dropped connection never yields half an event.

    Example::

        events = list(read_events(io.BytesIO(b"event: done\\ndata: {}\\n\\n").readline))
    """
    last_id: Optional[str] = None
    event_type = ""
    data: list[str] = []
    retry: Optional[int] = None
    saw_field = False
    while True:
        raw = readline()
        if not raw:
            return
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if line == "":
            if saw_field and data:
                yield Event(event=event_type or "message", data="\n".join(data), id=last_id, retry=retry)
            event_type, data, retry, saw_field = "", [], None, False
            continue
        if line.startswith(":"):
            continue
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        saw_field = True
        if name == "event":
            event_type = value
        elif name == "data":
            data.append(value)
        elif name == "id":
            # An id with a NUL is ignored (spec); the control plane's ids are decimal seqs.
            if "\0" not in value:
                last_id = value
        elif name == "retry":
            if value.isdigit():
                retry = int(value)
