"""The dashboard's /metrics bearer token, from every place a dashboard setting can come from: the config file
(``metrics_token``), create_app's mapping (either spelling) and the environment. A token set in any of them must
close /metrics to a scrape without it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.webui.authkit import app_on

TOKEN = "metrics-token-for-the-test"


@pytest.mark.parametrize("where", ["config file", "ASYNQPY_METRICS_TOKEN", "METRICS_TOKEN", "environment"])
def test_a_metrics_token_set_anywhere_closes_metrics(where: str, redis_url: str, users_path: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASYNQPY_METRICS_TOKEN", raising=False)
    config: dict[str, str] = {}
    if where == "config file":
        (tmp_path / "dashboard.toml").write_text(f'metrics_token = "{TOKEN}"\n')
        config["ASYNQPY_CONFIG_FILE"] = str(tmp_path / "dashboard.toml")
    elif where == "environment":
        monkeypatch.setenv("ASYNQPY_METRICS_TOKEN", TOKEN)
    else:
        config[where] = TOKEN
    with app_on(redis_url, users_path, **config) as app:
        c = app.test_client()
        refused = c.get("/metrics")
        assert refused.status_code == 401, f"/metrics open with the token set in the {where}"
        assert refused.headers["WWW-Authenticate"] == "Bearer" and b"asynq_" not in refused.data
        assert c.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
        ok = c.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 200 and b"asynq_" in ok.data


def test_without_a_token_metrics_stays_open(redis_url: str, users_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASYNQPY_METRICS_TOKEN", raising=False)
    with app_on(redis_url, users_path) as app:
        assert app.test_client().get("/metrics").status_code == 200  # documented: no login, no token by default
