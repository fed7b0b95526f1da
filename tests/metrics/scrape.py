"""Test helpers: fetch an exposition over HTTP and parse it with prometheus_client's parser."""

from __future__ import annotations

import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def get(url: str, token: str | None = None, timeout: float = 10.0) -> tuple[int, str, str]:
    """(status, content type, body) of a GET."""
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read().decode()


def parse(text: str) -> Samples:
    """Every sample of an exposition: (sample name, sorted labels) -> value."""
    out: Samples = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def scrape(url: str, token: str | None = None) -> Samples:
    status, _, body = get(url, token)
    assert status == 200, (status, body)
    return parse(body)


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def series(samples: Samples, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {lbl: v for (n, lbl), v in samples.items() if n == name}
