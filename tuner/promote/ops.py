"""Staging operations on registered configs: deploy a version, roll back to the previous one.

The registry aliases move only after the app serves the new config and passed its smoke test; a
failed deploy or rollback leaves the running app and the aliases as they were.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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


def version_app(registry: ConfigRegistry, version: ModelVersion) -> dict:
    """The Serve application entry stored with a registered version."""
    folder = registry.download(version)
    return read_app(Path(folder) / PROMOTED_FILE)


def deploy_version(registry: ConfigRegistry, admin: ServeAdmin, name: str, version: str, *,
                   timeout_s: float = 600) -> StagingChange:
    """Deploy a registered version to its staging app; on success point `staging` at it."""
    mv = registry.get(name, version)
    app = version_app(registry, mv)
    result: DeployResult = deploy_blue_green(admin, app, name=app["name"], route_prefix=app["route_prefix"],
                                             timeout_s=timeout_s)
    if not result.ok:
        return StagingChange(False, result.reason, name, version, None)
    replaced = registry.move_staging(name, version)
    return StagingChange(True, result.reason, name, version, replaced)


def rollback(registry: ConfigRegistry, admin: ServeAdmin, name: str, *, timeout_s: float = 600) -> StagingChange:
    """Redeploy `previous-staging` as staging; on success the aliases step back one version."""
    current, previous = registry.rollback_target(name)
    app = version_app(registry, previous)
    result = deploy_blue_green(admin, app, name=app["name"], route_prefix=app["route_prefix"],
                               timeout_s=timeout_s)
    if not result.ok:
        return StagingChange(False, f"rollback to version {previous.version} failed: {result.reason}",
                             name, str(current.version), None)
    registry.rolled_back(name, current, previous)
    return StagingChange(True, f"staging rolled back from version {current.version} to {previous.version}; "
                               f"{result.reason}", name, str(previous.version), str(current.version))
