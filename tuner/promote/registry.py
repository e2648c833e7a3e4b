"""The MLflow model registry as the record of what is (and was) in staging.

A promoted config is a registered model version of ``<study>-config`` whose source is the
promotion run's ``promotion/`` artifact folder (promoted.yaml + promotion.json). Aliases:
``staging`` (what staging serves) and ``previous-staging`` (what it replaced). Each version
remembers the version it replaced in a tag, so a rollback can step back more than once.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from mlflow import MlflowClient
from mlflow.entities.model_registry import ModelVersion
from mlflow.exceptions import MlflowException

from tuner.common.errors import SpecError

STAGING = "staging"
PREVIOUS = "previous-staging"
REPLACED_TAG = "servetune.replaced_version"
ARTIFACT_DIR = "promotion"
PICKED_TAG = "servetune.picked_trial"  # a version registered for a trial named by hand (--trial), not selected


def model_name(study_name: str) -> str:
    return f"{study_name}-config"


class ConfigRegistry:
    """Registered configs of one MLflow server; a thin layer that knows our aliases and tags."""

    def __init__(self, tracking_uri: str) -> None:
        self.client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)

    def register(self, name: str, *, source_run_id: str, run_id: str, tags: dict[str, str],
                 description: str = "") -> str:
        """A new version of `name` whose files are `source_run_id`'s promotion artifacts, attributed to
        `run_id` (a tracking server wants the run that holds the files; other runs go in `tags`).
        Returns the version number."""
        try:
            self.client.create_registered_model(name, description="servetune promoted serving configs")
        except MlflowException as exc:
            if exc.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
        mv = self.client.create_model_version(
            name, source=f"runs:/{source_run_id}/{ARTIFACT_DIR}", run_id=run_id, tags=tags, description=description
        )
        return str(mv.version)

    def version(self, name: str, alias: str) -> ModelVersion | None:
        try:
            return self.client.get_model_version_by_alias(name, alias)
        except MlflowException:
            return None

    def get(self, name: str, version: str) -> ModelVersion:
        return self.client.get_model_version(name, str(version))

    def find(self, name: str, tag: str, value: str,
             where: Callable[[ModelVersion], bool] | None = None) -> ModelVersion | None:
        """Newest version of `name` carrying tag=value (e.g. the one promoted from a study run), of
        those `where` accepts."""
        try:
            found = self.client.search_model_versions(f"name = '{name}' and tags.`{tag}` = '{value}'")
        except MlflowException:
            return None
        kept = [v for v in found if where is None or where(v)]
        return max(kept, key=lambda v: int(v.version), default=None)

    def move_staging(self, name: str, version: str) -> str | None:
        """Point `staging` at `version`; the version it replaced gets `previous-staging`. Returns that one."""
        current = self.version(name, STAGING)
        replaced = None if current is None or str(current.version) == str(version) else str(current.version)
        if replaced is not None:
            self.client.set_registered_model_alias(name, PREVIOUS, replaced)
            self.client.set_model_version_tag(name, str(version), REPLACED_TAG, replaced)
        self.client.set_registered_model_alias(name, STAGING, str(version))
        return replaced

    def rollback_target(self, name: str) -> tuple[ModelVersion, ModelVersion]:
        """(current staging, previous staging), or SpecError when there is nothing to roll back to."""
        current, previous = self.version(name, STAGING), self.version(name, PREVIOUS)
        if current is None:
            raise SpecError(f"registered model {name!r} has no {STAGING!r} alias", "--rollback",
                            "promote a config first (python -m tuner.promote --study-run ID)")
        if previous is None:
            raise SpecError(f"registered model {name!r} has no {PREVIOUS!r} alias", "--rollback",
                            "a rollback needs a config that staging replaced; promote a second one first")
        return current, previous

    def rolled_back(self, name: str, current: ModelVersion, previous: ModelVersion) -> None:
        """After redeploying `previous`: move the aliases one step back and mark `current` rolled back."""
        self.client.set_registered_model_alias(name, STAGING, str(previous.version))
        before = previous.tags.get(REPLACED_TAG)
        if before and before != str(previous.version):
            self.client.set_registered_model_alias(name, PREVIOUS, before)
        else:
            self.client.delete_registered_model_alias(name, PREVIOUS)
        self.client.set_model_version_tag(name, str(current.version), "servetune.rolled_back", "true")

    def download(self, version: ModelVersion, dst: Path | None = None) -> Path:
        """The version's promotion folder (promoted.yaml, promotion.json) on local disk."""
        dst = dst or Path(tempfile.mkdtemp(prefix="servetune-promotion-"))
        source = str(version.source)
        if not source.startswith("runs:/"):
            raise SpecError(f"version {version.version} of {version.name} has source {source!r}",
                            "registry", "register configs with python -m tuner.promote")
        run_id, _, path_in_run = source.removeprefix("runs:/").partition("/")
        path = self.client.download_artifacts(run_id, path_in_run or ARTIFACT_DIR, str(dst))
        return Path(path)

