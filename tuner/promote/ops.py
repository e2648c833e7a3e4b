"""Staging operations on registered configs: deploy a version, roll back to the previous one.

The registry aliases move only after the app serves the new config and passed its smoke test; a
failed deploy or rollback leaves the running app and the aliases as they were.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from mlflow.entities.model_registry import ModelVersion

from tuner.promote.canary import CanaryResult
from tuner.promote.deploy import Check, DeployResult, ServeAdmin, deploy_blue_green, deploy_in_place
from tuner.promote.pipeline import PROMOTED_FILE, SUMMARY_FILE
from tuner.promote.registry import ConfigRegistry
from tuner.promote.serve_config import read_app


@dataclass
class StagingChange:
    ok: bool
    reason: str
    model_name: str
    version: str  # the version now (or meant to be) in staging
    replaced: str | None  # the version it replaced
    canary: CanaryResult | None = None
    rolled_back: bool = False  # the version served, failed its canary, and the previous app was put back


def version_config(registry: ConfigRegistry, version: ModelVersion) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(application entry, http_options) of the Serve config stored with a registered version."""
    path = registry.download(version) / PROMOTED_FILE
    http = (yaml.safe_load(path.read_text()) or {}).get("http_options")
    return read_app(path), http


def deploy_version(registry: ConfigRegistry, admin: ServeAdmin, name: str, version: str, *,
                   timeout_s: float = 600, check: Check | None = None, in_place: bool = False) -> StagingChange:
    """Deploy a registered version to its staging app; on success (smoke test, and `check`, the canary,
    when given) point `staging` at it. A failed canary puts the previous app back; aliases stay.
    `in_place`: no side copy (a cluster with room for one engine; tuner.promote.deploy)."""
    mv = registry.get(name, version)
    app, http = version_config(registry, mv)
    how = deploy_in_place if in_place else deploy_blue_green
    result: DeployResult = how(admin, app, name=app["name"], route_prefix=app["route_prefix"],
                               timeout_s=timeout_s, http_options=http, check=check)
    if not result.ok:
        return StagingChange(False, result.reason, name, version, None, result.canary, result.rolled_back)
    replaced = registry.move_staging(name, version)
    return StagingChange(True, result.reason, name, version, replaced, result.canary)


def record_canary(registry: ConfigRegistry, name: str, version: str, canary: CanaryResult,
                  output_dir: Path | None) -> Path | None:
    """The canary's verdict and figures: tags on the registered version, metrics on its promotion run
    (the version's run), and a "canary" entry in `output_dir`/promotion.json. Returns that file."""
    verdict = "passed" if canary.passed else "failed"
    figures = canary.figures()
    client = registry.client
    tags = {"servetune.canary": verdict, "servetune.canary_reason": canary.reason[:5000],
            "servetune.canary_load": f"{canary.plan.load:g}", "servetune.canary_seconds": f"{canary.plan.seconds:g}",
            **{f"servetune.canary_{k}": f"{v:.6g}" for k, v in figures.items()}}
    for key, value in tags.items():
        client.set_model_version_tag(name, version, key, value)
    run_id = registry.get(name, version).run_id
    if run_id:
        from mlflow.entities import Metric

        metrics = [Metric(f"canary_{k}", v, 0, 0) for k, v in figures.items()]
        metrics.append(Metric("canary_passed", 1.0 if canary.passed else 0.0, 0, 0))
        metrics.append(Metric("canary_load", canary.plan.load, 0, 0))
        client.log_batch(run_id, metrics=metrics)
        client.set_tag(run_id, "servetune.canary", verdict)
    if output_dir is None:
        return None
    path = output_dir / SUMMARY_FILE
    try:
        data = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError):
        data = {}
    data.setdefault("model_name", name)
    data.setdefault("model_version", version)
    data["canary"] = {"model_version": version, **canary.to_json()}
    output_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    os.replace(tmp, path)
    return path


def rollback(registry: ConfigRegistry, admin: ServeAdmin, name: str, *, timeout_s: float = 600,
             in_place: bool = False) -> StagingChange:
    """Redeploy `previous-staging` as staging; on success the aliases step back one version."""
    current, previous = registry.rollback_target(name)
    app, http = version_config(registry, previous)
    how = deploy_in_place if in_place else deploy_blue_green
    result = how(admin, app, name=app["name"], route_prefix=app["route_prefix"], timeout_s=timeout_s,
                 http_options=http)
    if not result.ok:
        return StagingChange(False, f"rollback to version {previous.version} failed: {result.reason}",
                             name, str(current.version), None)
    registry.rolled_back(name, current, previous)
    return StagingChange(True, f"staging rolled back from version {current.version} to {previous.version}; "
                               f"{result.reason}", name, str(previous.version), str(current.version))
