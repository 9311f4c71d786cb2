"""Rendering the Helm chart offline, and small lookups over the rendered objects.

The chart is rendered by Helm's own Go template engine (Helm 4's SDK, bound through
``helm-python-sdk``), so what the tests see is exactly what ``helm template`` / ``helm install``
would send to the cluster; no cluster and no network are involved.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import helm_python as helm
import yaml

from tests import ROOT

CHART = ROOT / "helm" / "sluice"
CI_VALUES = CHART / "ci"
RELEASE = "sluice"
NAMESPACE = "streaming"
FULLNAME = "sluice"  # the release name contains the chart name, as in `helm install sluice`


def values_file(name: str) -> dict[str, Any]:
    """The values of ``helm/sluice/ci/<name>-values.yaml``."""
    return yaml.safe_load((CI_VALUES / f"{name}-values.yaml").read_text()) or {}


def values_files() -> list[str]:
    """The names of every values file kept for CI."""
    return sorted(p.name.removesuffix("-values.yaml") for p in CI_VALUES.glob("*-values.yaml"))


@functools.cache
def _render_cached(values_yaml: str, is_upgrade: bool) -> dict[str, str]:
    values = yaml.safe_load(values_yaml) or {}
    with helm.Chart.load(str(CHART)) as chart:
        return chart.render(
            values=values,
            name=RELEASE,
            namespace=NAMESPACE,
            is_install=not is_upgrade,
            is_upgrade=is_upgrade,
        )


def render(values: dict[str, Any] | None = None, *, is_upgrade: bool = False) -> dict[str, str]:
    """Template path -> rendered text, for the given values."""
    return dict(_render_cached(yaml.safe_dump(values or {}, sort_keys=True), is_upgrade))


class Release:
    """The objects of one rendered release."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values
        self.files = render(values)
        self.notes = self.files.get("sluice/templates/NOTES.txt", "")
        self.objects: list[dict[str, Any]] = []
        self.sources: dict[int, str] = {}
        for path, text in self.files.items():
            if not path.endswith((".yaml", ".yml")):
                continue
            for doc in yaml.safe_load_all(text):
                if doc:
                    self.sources[len(self.objects)] = path
                    self.objects.append(doc)

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]

    def get(self, kind: str, name: str) -> dict[str, Any]:
        found = [o for o in self.of_kind(kind) if o["metadata"]["name"] == name]
        assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
        return found[0]

    def has(self, kind: str, name: str) -> bool:
        return any(o["metadata"]["name"] == name for o in self.of_kind(kind))

    def workload(self, component: str) -> dict[str, Any]:
        """The Deployment (or the migration Job) of a component."""
        kind = "Job" if component == "migration" else "Deployment"
        return self.get(kind, f"{FULLNAME}-{component}")

    def pod_spec(self, component: str) -> dict[str, Any]:
        return self.workload(component)["spec"]["template"]["spec"]

    def container(self, component: str) -> dict[str, Any]:
        containers = self.pod_spec(component)["containers"]
        assert len(containers) == 1
        return containers[0]

    def configmap_data(self) -> dict[str, str]:
        return self.get("ConfigMap", FULLNAME)["data"]


@functools.cache
def _release_cached(values_yaml: str) -> Release:
    return Release(yaml.safe_load(values_yaml) or {})


def release(values: dict[str, Any]) -> Release:
    """The rendered release for ``values`` (cached; treat it as read-only)."""
    return _release_cached(yaml.safe_dump(values, sort_keys=True))


def merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``base`` deep-merged with ``override``, like a second ``-f`` values file."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out
