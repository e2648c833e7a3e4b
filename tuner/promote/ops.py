"""Staging operations on registered configs: deploy a version, roll back to the previous one.

The registry aliases move only after the app serves the new config and passed its smoke test; a
failed deploy or rollback leaves the running app and the aliases as they were.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml
from mlflow.entities.model_registry import ModelVersion

from tuner.promote.deploy import DeployResult, ServeAdmin, deploy_blue_green
from tuner.promote.pipeline import PROMOTED_FILE
from tuner.promote.registry import ConfigRegistry
from tuner.promote.serve_config import read_app


@dataclass
class StagingChange:
    ok: bool
    reason: str
    model_name: str
    version: str  # the version now (or meant to be) in staging
    replaced: str | None  # the version it replaced


def version_config(registry: ConfigRegistry, version: ModelVersion) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(application entry, http_options) of the Serve config stored with a registered version."""
    path = registry.download(version) / PROMOTED_FILE
    http = (yaml.safe_load(path.read_text()) or {}).get("http_options")
    return read_app(path), http


def deploy_version(registry: ConfigRegistry, admin: ServeAdmin, name: str, version: str, *,
                   timeout_s: float = 600) -> StagingChange:
    """Deploy a registered version to its staging app; on success point `staging` at it."""
    mv = registry.get(name, version)
    app, http = version_config(registry, mv)
    result: DeployResult = deploy_blue_green(admin, app, name=app["name"], route_prefix=app["route_prefix"],
                                             timeout_s=timeout_s, http_options=http)
    if not result.ok:
        return StagingChange(False, result.reason, name, version, None)
    replaced = registry.move_staging(name, version)
    return StagingChange(True, result.reason, name, version, replaced)


def rollback(registry: ConfigRegistry, admin: ServeAdmin, name: str, *, timeout_s: float = 600) -> StagingChange:
    """Redeploy `previous-staging` as staging; on success the aliases step back one version."""
    current, previous = registry.rollback_target(name)
    app, http = version_config(registry, previous)
    result = deploy_blue_green(admin, app, name=app["name"], route_prefix=app["route_prefix"],
                               timeout_s=timeout_s, http_options=http)
    if not result.ok:
        return StagingChange(False, f"rollback to version {previous.version} failed: {result.reason}",
                             name, str(current.version), None)
    registry.rolled_back(name, current, previous)
    return StagingChange(True, f"staging rolled back from version {current.version} to {previous.version}; "
                               f"{result.reason}", name, str(previous.version), str(current.version))
