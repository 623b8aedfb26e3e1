#!/usr/bin/env python3
"""A dependency-free Python client for the Polar control plane's trainer API.

Standard library only (``urllib.request``, ``json``), Python 3.9+, so an RL trainer can copy
this one file next to its training loop. It covers the trainer routes of the control plane
(see ``docs/control-plane.md``; the schemas live in ``protocol/api.ts``, ``protocol/session.ts``
and ``protocol/trajectory.ts``):

* ``POST /v1/batches``                      -> :meth:`PolarClient.submit`
* ``GET /v1/batches/:id``                   -> :meth:`PolarClient.status`
* ``GET /v1/batches/:id/results?after=&wait=`` -> :meth:`PolarClient.results` / :meth:`PolarClient.iter_results`
* ``DELETE /v1/batches/:id``                -> :meth:`PolarClient.cancel`

and :func:`to_samples`, which turns one session result into training samples.

Example::

    client = PolarClient("http://127.0.0.1:8787", os.environ["POLAR_TRAINER_TOKEN"])
    created = client.submit({"tasks": [task_spec]})
    for seq, result in client.iter_results(created["batch_id"]):
        for sample in to_samples(result):
            buffer.append(sample)

Command line: ``python3 polar_client.py URL TASK.json`` (token from ``POLAR_TRAINER_TOKEN``)
submits the batch (or single task) in TASK.json and prints one JSON line per result.
"""

import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Iterator, List, Optional, Tuple

#: The control plane caps ``wait=`` at 60 seconds (``LIMITS.maxResultsWaitSeconds``).
MAX_WAIT_SECONDS = 60

#: Extra seconds the socket timeout allows beyond a long-poll's ``wait``, so a page the server
#: answers right at the end of its wait is not cut off by the client.
_TIMEOUT_MARGIN_SECONDS = 30


class PolarError(Exception):
    """A non-2xx answer of the control plane.

    Attributes:
        status: the HTTP status (0 when the server could not be reached).
        code: the ``error.code`` of the ``{error: {code, message}}`` body (``unauthorized``,
            ``not_found``, ``conflict``, ...), or ``http_error`` / ``unreachable`` when the body
            was not an error body.
        message: the ``error.message`` (it names the offending field or limit).
        details: the optional ``error.details``.

    Example::

        try:
            client.status("nope")
        except PolarError as e:
            assert e.code == "not_found"
    """

    def __init__(self, status: int, code: str, message: str, details: Any = None) -> None:
        super().__init__(f"{code} ({status}): {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details


class PolarClient:
    """Trainer-side client of the control plane's HTTP API.

    Args:
        base_url: the control plane's URL, e.g. ``http://127.0.0.1:8787``.
        token: the trainer token (``POLAR_TRAINER_TOKEN``), sent as ``Authorization: Bearer``.
        timeout: socket timeout in seconds for requests that do not long-poll.

    Example::

        client = PolarClient("http://127.0.0.1:8787", token)
        print(client.status("my-batch")["status"])
    """

    def __init__(self, base_url: str, token: str, timeout: float = 30.0) -> None:
        if not base_url:
            raise ValueError("base_url is empty")
        if not token:
            raise ValueError("token is empty (the trainer token, POLAR_TRAINER_TOKEN)")
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def _request(
        self, method: str, path: str, body: Optional[Dict[str, Any]] = None, timeout: Optional[float] = None
    ) -> Dict[str, Any]:
        """Sends one request and returns the decoded JSON body; raises :class:`PolarError` on non-2xx."""
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.base_url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as res:
                status, text = res.status, res.read().decode("utf-8")
        except urllib.error.HTTPError as e:
            # urllib raises on every non-2xx; the body still holds the control plane's error.
            status, text = e.code, e.read().decode("utf-8", errors="replace")
        except urllib.error.URLError as e:
            raise PolarError(0, "unreachable", f"{method} {self.base_url}{path}: {e.reason}") from e
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = None
        if 200 <= status < 300:
            if not isinstance(parsed, dict):
                raise PolarError(status, "bad_response", f"not a JSON object: {text[:200]}")
            return parsed
        err = parsed.get("error") if isinstance(parsed, dict) else None
        if isinstance(err, dict) and isinstance(err.get("code"), str):
            raise PolarError(status, err["code"], str(err.get("message", "")), err.get("details"))
        raise PolarError(status, "http_error", text[:500])

    @staticmethod
    def _quote(batch_id: str) -> str:
        return urllib.parse.quote(batch_id, safe="")

    def submit(self, batch: Dict[str, Any]) -> Dict[str, Any]:
        """``POST /v1/batches``: submits ``{batch_id?, queue?, callback_url?, tasks: [TaskSpec]}``.

        Returns ``{batch_id, queue, tasks, sessions, created}``. Submitting the same ``batch_id``
        with the same body again is an idempotent replay (``created`` false); another body is a
        409 ``conflict``; a full queue a 429.

        Example::

            created = client.submit({"batch_id": "step-17", "tasks": [task]})
        """
        if not isinstance(batch, dict) or not isinstance(batch.get("tasks"), list):
            raise ValueError("batch must be a dict with a 'tasks' list")
        return self._request("POST", "/v1/batches", batch)

    def status(self, batch_id: str) -> Dict[str, Any]:
        """``GET /v1/batches/:id``: ``{batch_id, status: running|completed, counts, tasks, cancelled_at, ...}``.

        Example::

            if client.status(batch_id)["status"] == "completed": ...
        """
        return self._request("GET", f"/v1/batches/{self._quote(batch_id)}")

    def results(self, batch_id: str, after: int = 0, wait: int = 0, limit: Optional[int] = None) -> Dict[str, Any]:
        """``GET /v1/batches/:id/results``: one page ``{batch_id, results: [{seq, result}], next, done}``.

        Args:
            after: the cursor (``next`` of the previous page; 0 for the start).
            wait: seconds (0..60) the server may hold the request until a result arrives.
            limit: the page size (the server caps it at 500).

        Example::

            page = client.results(batch_id, after=0, wait=30)
        """
        if not 0 <= wait <= MAX_WAIT_SECONDS:
            raise ValueError(f"wait must be between 0 and {MAX_WAIT_SECONDS} seconds, got {wait}")
        query = {"after": str(int(after)), "wait": str(int(wait))}
        if limit is not None:
            query["limit"] = str(int(limit))
        path = f"/v1/batches/{self._quote(batch_id)}/results?{urllib.parse.urlencode(query)}"
        return self._request("GET", path, timeout=max(self.timeout, wait + _TIMEOUT_MARGIN_SECONDS))

    def iter_results(
        self, batch_id: str, after: int = 0, wait: int = 30, timeout: Optional[float] = None
    ) -> Iterator[Tuple[int, Dict[str, Any]]]:
        """Yields ``(seq, result)`` for every result after ``after`` until the batch is done.

        Follows ``next`` page after page, long-polling with ``wait=`` while nothing is new. To
        resume after a crash, pass the last ``seq`` the trainer has processed as ``after``.

        Args:
            after: the cursor to start from (0 = from the first result).
            wait: the long-poll seconds per request (0..60).
            timeout: overall seconds before raising ``TimeoutError`` (None = no limit).

        Example::

            for seq, result in client.iter_results(batch_id, after=saved_seq):
                train_on(to_samples(result)); saved_seq = seq
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        cursor = after
        while True:
            page = self.results(batch_id, after=cursor, wait=wait)
            for item in page["results"]:
                yield item["seq"], item["result"]
            cursor = page["next"]
            if page["done"]:
                return
            if deadline is not None and time.monotonic() > deadline and not page["results"]:
                raise TimeoutError(f"batch {batch_id} not done after {timeout} s (cursor {cursor})")
            if not page["results"] and wait == 0:
                # Without a long-poll the server answers at once: pause instead of spinning.
                time.sleep(0.5)

    def cancel(self, batch_id: str) -> Dict[str, Any]:
        """``DELETE /v1/batches/:id``: ends the batch's open sessions ``CANCELLED`` (idempotent).

        Returns ``{batch_id, status: "cancelled", cancelled_sessions}``.

        Example::

            client.cancel(batch_id)
        """
        return self._request("DELETE", f"/v1/batches/{self._quote(batch_id)}")


def _check(condition: bool, message: str) -> None:
    # An explicit raise rather than `assert`, which `python -O` strips.
    if not condition:
        raise AssertionError(message)


def to_samples(result: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Turns one session result into one training sample per trace (model call).

    Each sample is::

        {
          "tokens": prompt_ids + response_ids,
          "prompt_len": len(prompt_ids),
          "loss_mask": [0] * prompt_len + trace.loss_mask,   # one entry per token
          "rollout_logprobs": trace.response_logprobs or None, # one entry per response id
          "reward": the session's outcome reward (the trace's own when the session has none),
          "session_id", "task_id", "status", "finish_reason", "trace_index",
        }

    Raises ``AssertionError`` when a trace's lengths do not line up (never silently truncated).

    Example::

        samples = to_samples(result)
        assert samples[0]["loss_mask"][: samples[0]["prompt_len"]] == [0] * samples[0]["prompt_len"]
    """
    session_id = result["session_id"]
    samples: List[Dict[str, Any]] = []
    for i, trace in enumerate(result["trajectory"]["traces"]):
        where = f"session {session_id} trace {i}"
        prompt_ids: List[int] = list(trace["prompt_ids"])
        response_ids: List[int] = list(trace["response_ids"])
        mask: List[int] = list(trace["loss_mask"])
        logprobs: Optional[List[float]] = trace.get("response_logprobs")
        _check(
            len(mask) == len(response_ids),
            f"{where}: loss_mask has {len(mask)} entries, response_ids {len(response_ids)}",
        )
        _check(all(m in (0, 1) for m in mask), f"{where}: loss_mask holds values other than 0 and 1")
        if logprobs is not None:
            _check(
                len(logprobs) == len(response_ids),
                f"{where}: response_logprobs has {len(logprobs)} entries, response_ids {len(response_ids)}",
            )
            logprobs = list(logprobs)
        tokens = prompt_ids + response_ids
        loss_mask = [0] * len(prompt_ids) + mask
        _check(len(loss_mask) == len(tokens), f"{where}: loss_mask does not cover every token")
        reward = result.get("reward")
        samples.append(
            {
                "tokens": tokens,
                "prompt_len": len(prompt_ids),
                "loss_mask": loss_mask,
                "rollout_logprobs": logprobs,
                "reward": reward if reward is not None else trace.get("reward"),
                "session_id": session_id,
                "task_id": result.get("task_id"),
                "status": result.get("status"),
                "finish_reason": trace.get("finish_reason"),
                "trace_index": i,
            }
        )
    return samples


def _load_batch(path: str) -> Dict[str, Any]:
    """Reads TASK.json: a batch ``{tasks: [...]}`` or one task spec (wrapped into a batch)."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: expected a JSON object (a batch with 'tasks' or one task spec)")
    return doc if "tasks" in doc else {"tasks": [doc]}


def main(argv: List[str]) -> int:
    """``polar_client.py URL TASK.json``: submits the batch, prints one JSON line per result."""
    if len(argv) != 2:
        print("usage: polar_client.py URL TASK.json   (token from POLAR_TRAINER_TOKEN)", file=sys.stderr)
        return 2
    token = os.environ.get("POLAR_TRAINER_TOKEN", "")
    if not token:
        print("polar_client: POLAR_TRAINER_TOKEN is not set (the control plane's trainer token)", file=sys.stderr)
        return 2
    url, task_file = argv
    try:
        batch = _load_batch(task_file)
    except (OSError, ValueError) as e:
        print(f"polar_client: cannot read TASK.json: {e}", file=sys.stderr)
        return 2
    client = PolarClient(url, token)
    try:
        created = client.submit(batch)
        print(
            f"polar_client: batch {created['batch_id']} on queue {created['queue']}: {created['sessions']} sessions",
            file=sys.stderr,
        )
        for seq, result in client.iter_results(created["batch_id"]):
            samples = to_samples(result)
            line = {
                "seq": seq,
                "session_id": result["session_id"],
                "task_id": result["task_id"],
                "status": result["status"],
                "reward": result["reward"],
                "traces": len(samples),
                "tokens": sum(len(s["tokens"]) for s in samples),
                "trained_tokens": sum(sum(s["loss_mask"]) for s in samples),
            }
            print(json.dumps(line), flush=True)
    except PolarError as e:
        print(f"polar_client: PolarError {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
