"""The dashboard's smoke test on a real Redis Cluster: log in, see queues spread over the three primaries,
act on a task, find the audit record (every key a script touches must share one slot)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from asynqpy import Client, Task
from inspector import Inspector
from tests.webui.authkit import login, make_app

pytest.importorskip("flask")


@pytest.fixture(scope="module")
def cluster_users(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.webui.authkit import PASSWORDS, ROLES
    from webui.users import create_user

    path = tmp_path_factory.mktemp("cluster-users") / "users.toml"
    create_user(path, "ada", ROLES["ada"], PASSWORDS["ada"])
    return path


def test_dashboard_on_a_cluster(cluster_url: str, cluster_users: Path) -> None:
    queues = [f"q{i}" for i in range(6)]  # six queues: their hash tags land on all three primaries
    with Client(cluster_url) as client:
        ids = {q: client.enqueue(Task("report:daily", b'{"n": 1}'), queue=q).id for q in queues}
    app = make_app(cluster_url, cluster_users)
    try:
        c = app.test_client()
        assert login(c, "ada").status_code == 303
        home = c.get("/").get_data(as_text=True)
        assert all(f"/queues/{q}" in home for q in queues)
        page = c.get("/queues/q3/pending")
        assert page.status_code == 200 and ids["q3"] in page.get_data(as_text=True)
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.get_data(as_text=True))
        assert token
        resp = c.post(f"/queues/q3/tasks/{ids['q3']}/archive", data={"csrf_token": token.group(1)})
        assert resp.status_code in (200, 303), resp.get_data(as_text=True)[:500]
        with Inspector(cluster_url) as insp:
            assert insp.get_task("q3", ids["q3"]).state.value == "archived"
        audit = c.get("/audit").get_data(as_text=True)
        assert "q3" in audit and "archive" in audit
        assert c.get("/healthz").status_code == 200
    finally:
        app.extensions["asynqpy.inspector"].close()
