"""Through a real Prometheus: a queue's size and a duration quantile, and every PromQL expression of the Grafana
dashboard and of the alert rules evaluated through the HTTP API, without error and with data."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from asynqpy import Client, Task
from asynqpy.metrics.worker import WorkerMetrics
from tests.metrics.conftest import Stack, prometheus_binary
from tests.metrics.scrape import get, scrape, value

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
WINDOW = "30s"  # what $__rate_interval becomes: 30 scrapes at 1 s


def _worker_limit_series() -> list[str]:
    """The series the workers export about flow-control limits, named as asynqpy/metrics/worker.py names them."""
    registry = CollectorRegistry()
    WorkerMetrics(registry)
    suffix = {"counter": "_total", "histogram": "_bucket"}
    return [f.name + suffix[f.type] for f in registry.collect() if "limit" in f.name]


WORKER_LIMIT_SERIES = _worker_limit_series()


def dashboard_exprs() -> list[str]:
    dash = json.loads((DEPLOY / "grafana" / "asynqpy.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    for var in dash["templating"]["list"]:
        if var["type"] == "query":  # label_values(metric, label): Grafana asks Prometheus for the metric's series
            m = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", var["definition"])
            assert m, var["definition"]
            exprs.append(m.group(1))
    return exprs


def alert_rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
    return [rule for g in doc["groups"] for rule in g["rules"]]


def all_queues() -> str:
    """What Grafana puts for $queue when All is chosen: the queue variable's allValue."""
    dash = json.loads((DEPLOY / "grafana" / "asynqpy.json").read_text())
    [var] = [v for v in dash["templating"]["list"] if v["name"] == "queue"]
    return str(var["allValue"])


def concrete(expr: str) -> str:
    return expr.replace("$__rate_interval", WINDOW).replace('"$queue"', json.dumps(all_queues()))


def wait_for_data(stack: Stack, expr: str, timeout: float = 60.0) -> dict[str, Any]:
    """Poll until the expression returns at least one sample; fail at once on an error answer."""
    deadline = time.monotonic() + timeout
    while True:
        ans = stack.query(expr)
        assert ans.get("status") == "success", f"{expr}: {ans.get('error')}"
        if ans["data"]["result"]:
            return dict(ans)
        if time.monotonic() > deadline:
            raise AssertionError(f"no data for {expr!r} after {timeout}s")
        time.sleep(0.5)


def test_dashboard_and_rules_are_parsed() -> None:
    assert len(dashboard_exprs()) >= 20
    dash = json.loads((DEPLOY / "grafana" / "asynqpy.json").read_text())
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)) and dash["uid"] == "asynqpy"
    assert {v["name"] for v in dash["templating"]["list"]} == {"datasource", "queue"}
    for p in dash["panels"]:
        if p["type"] != "row":  # every query panel reads the chosen data source, and filters by $queue if per queue
            assert p["datasource"]["uid"] == "${datasource}" and p["targets"], p["title"]
            assert len({t["refId"] for t in p["targets"]}) == len(p["targets"])
            for t in p["targets"]:
                assert "queue" not in t["expr"] or '"$queue"' in t["expr"], t["expr"]
    exprs = " ".join(dashboard_exprs())  # flow control: backpressure refusals, and waits on limits by limit
    for metric in ["asynqpy_queue_enqueue_refused_total", "asynqpy_limit_waits_total", *WORKER_LIMIT_SERIES]:
        assert f"{metric}{{" in exprs, metric
    wait = next(m for m in WORKER_LIMIT_SERIES if m.endswith("_bucket"))
    assert f"histogram_quantile(0.95, sum by (le, queue, limit) (rate({wait}{{" in exprs
    names = {r["alert"] for r in alert_rules()}
    assert len(names) == 8
    tested = yaml.safe_load((DEPLOY / "prometheus" / "alerts_test.yml").read_text())
    covered = {t["alertname"] for case in tested["tests"] for t in case.get("alert_rule_test", [])}
    assert covered == names  # every alert has a unit test


# The exporter's counters of queue state: Redis's own, so every place that reads the same Redis (an exporter and
# the dashboard's /metrics, two exporters) exports the same series.
REDIS_COUNTERS = ("asynq_tasks_processed_total", "asynq_tasks_failed_total", "asynqpy_queue_enqueue_refused_total",
                  "asynqpy_limit_waits_total")


def test_redis_counters_count_once_however_many_places_export_them() -> None:
    """A rate of one of Redis's counters is aggregated with max, not sum: summed, a second scrape of the same
    Redis doubled the dashboard's processed and failed per second, refusals and limit waits, and made
    AsynqpyEnqueuesRefused fire at half its threshold."""
    exprs = dashboard_exprs() + [r["expr"] for r in alert_rules()]
    summed = [e for e in exprs for name in REDIS_COUNTERS
              if re.search(r"\bsum\s*(?:(?:by|without)\s*\([^)]*\)\s*)?\((?:rate|increase)\(" + name, e)]
    assert summed == []
    assert sum(name in e for e in exprs for name in REDIS_COUNTERS) >= 7


def test_promtool_checks_and_unit_tests_the_rules() -> None:
    if prometheus_binary() is None:
        pytest.skip("promtool is not installed (apt-get install --no-install-recommends prometheus)")
    check = subprocess.run(["promtool", "check", "rules", "alerts.yml"], cwd=DEPLOY / "prometheus",
                           capture_output=True, text=True)
    assert check.returncode == 0 and "SUCCESS: 8 rules found" in check.stdout, check.stdout + check.stderr
    unit = subprocess.run(["promtool", "test", "rules", "alerts_test.yml"], cwd=DEPLOY / "prometheus",
                          capture_output=True, text=True)
    assert unit.returncode == 0, unit.stdout + unit.stderr
    cfg = subprocess.run(["promtool", "check", "config", "prometheus.yml"], cwd=DEPLOY / "prometheus",
                         capture_output=True, text=True)
    assert cfg.returncode == 0, cfg.stdout + cfg.stderr


def test_prometheus_reads_a_queue_size_equal_to_the_exporter(prometheus_stack: Stack) -> None:
    ans = wait_for_data(prometheus_stack, 'asynq_queue_size{queue="stale"}')
    assert [float(x["value"][1]) for x in ans["data"]["result"]] == [1.0]
    assert value(scrape(prometheus_stack.exporter + "/metrics"), "asynq_queue_size", queue="stale") == 1
    age = wait_for_data(prometheus_stack, 'asynqpy_queue_oldest_task_age_seconds{queue="stale",state="pending"}')
    assert 3600 <= float(age["data"]["result"][0]["value"][1]) < 3700
    targets = prometheus_stack.api("/api/v1/targets")["activeTargets"]
    assert len(targets) == 4
    deadline = time.monotonic() + 30
    while sorted(t["health"] for t in prometheus_stack.api("/api/v1/targets")["activeTargets"]) != \
            ["down", "up", "up", "up"]:  # (the one where nothing listens, for AsynqpyExporterDown)
        assert time.monotonic() < deadline, prometheus_stack.api("/api/v1/targets")
        time.sleep(0.5)


def test_the_redis_counters_are_the_exporters_queue_counters(prometheus_stack: Stack) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    body = get(prometheus_stack.exporter + "/metrics")[2]
    counters = {f.name + "_total" for f in text_string_to_metric_families(body)
                if f.type == "counter" and any("queue" in smp.labels for smp in f.samples)}
    assert counters == set(REDIS_COUNTERS)


def test_all_queues_includes_a_queue_with_a_line_break_in_its_name(prometheus_stack: Stack) -> None:
    """The queue variable's All matches every queue name: it was ".*", and in Prometheus 2 "." matches no line
    break, so a queue named with one (any client can name a queue) was left out of every panel."""
    with Client(prometheus_stack.redis_url) as c:
        c.enqueue(Task("t"), queue="line\nbreak")
    wait_for_data(prometheus_stack, 'asynq_queue_size{queue="line\\nbreak"}')
    wait_for_data(prometheus_stack, concrete('asynq_queue_size{queue=~"$queue",queue="line\\nbreak"}'))


def test_a_duration_quantile_of_the_worker(prometheus_stack: Stack) -> None:
    expr = ('histogram_quantile(0.5, sum by (le) (rate(asynqpy_task_duration_seconds_bucket'
            '{queue="work",task_type="ok",outcome="success"}[30s])))')
    ans = wait_for_data(prometheus_stack, expr)
    p50 = float(ans["data"]["result"][0]["value"][1])
    assert 0.01 <= p50 <= 0.1, p50  # the handler sleeps 20 ms: inside the 10-25 ms bucket, or a neighbour
    total = wait_for_data(prometheus_stack, 'sum(asynqpy_task_duration_seconds_count{queue="work"})')
    assert float(total["data"]["result"][0]["value"][1]) > 0


@pytest.mark.parametrize("expr", dashboard_exprs())
def test_every_dashboard_expression_returns_data(prometheus_stack: Stack, expr: str) -> None:
    wait_for_data(prometheus_stack, concrete(expr))


@pytest.mark.parametrize("rule", alert_rules(), ids=lambda r: r["alert"])
def test_every_alert_expression_returns_data(prometheus_stack: Stack, rule: dict[str, Any]) -> None:
    wait_for_data(prometheus_stack, rule["expr"])  # the stack is built so that every alert's condition holds
    deadline = time.monotonic() + 30
    while True:  # and Prometheus's own evaluation of the rule: healthy, and its condition holding
        rules = [r for g in prometheus_stack.api("/api/v1/rules")["groups"] for r in g["rules"]]
        mine = next(r for r in rules if r["name"] == rule["alert"])
        assert not mine.get("lastError"), mine
        if mine["health"] == "ok" and mine["state"] in ("pending", "firing"):
            break
        assert time.monotonic() < deadline, mine
        time.sleep(0.5)
