"""The Helm chart: lint, render with every CI values file, validate against Kubernetes schemas,
and check the properties the deployment depends on."""

from __future__ import annotations

import base64
import hashlib
import re
import shlex
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import SchemaNotFoundError, all_versions

from server.cli import build_parser
from tests.deploy.helpers import (
    CHART,
    FULLNAME,
    NAMESPACE,
    Release,
    merged,
    release,
    render,
    values_file,
    values_files,
)

VALUES_FILES = values_files()


# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion, or the oldest schema bundled
# if that is newer) and the newest schema bundled.
def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


_BUNDLED = sorted(set(all_versions()), key=_version_key)
_MINIMUM = re.fullmatch(
    r">=(\d+\.\d+\.\d+)(-0)?", yaml.safe_load((CHART / "Chart.yaml").read_text())["kubeVersion"]
)
assert _MINIMUM, "Chart.yaml kubeVersion should be a plain lower bound"
KUBE_VERSIONS = (max(_MINIMUM.group(1), _BUNDLED[0], key=_version_key), _BUNDLED[-1])
# Kinds of custom resources: kubernetes-validate has no schema for them, so they get the
# structural checks of test_service_monitor_selects_the_worker_metrics instead.
CUSTOM_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}
SLUICE_COMPONENTS = ("api", "worker", "celery-worker", "celery-beat")
# The Redis ACL user (sluice-<service>) each component connects as when data-plane ACLs are on.
ACL_SERVICES = {
    "api": "api",
    "worker": "worker",
    "celery-worker": "reports",
    "celery-beat": "reports",
}
ALL_COMPONENTS = (*SLUICE_COMPONENTS, "migration")


def _release(name: str) -> Release:
    return release(values_file(name))


def _env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


def _port_number(container: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    named = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
    assert port in named, f"probe port {port!r} is not a named port of {container['name']}"
    return named[port]


def test_ci_values_files_cover_the_required_cases():
    required = {
        "default",
        "auth-off",
        "existing-secret",
        "scaled",
        "redis-cluster",
        "spark-cluster",
    }
    assert required <= set(VALUES_FILES)


def test_chart_metadata():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2"
    assert chart["name"] == "sluice"
    assert chart["type"] == "application"
    with helm.Chart.load(str(CHART)) as loaded:
        assert loaded.metadata["appVersion"] == chart["appVersion"]


@pytest.mark.parametrize("name", VALUES_FILES)
def test_lint_is_clean(name):
    report = helm.lint(str(CHART), values_file(name), strict=True, namespace=NAMESPACE)
    assert report["errors"] == []
    # Severity 1 is informational (e.g. "icon is recommended"); warnings fail in strict mode.
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert problems == []


@pytest.mark.parametrize("name", VALUES_FILES)
@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
def test_every_object_is_valid_against_the_kubernetes_schema(name, kube_version):
    rel = _release(name)
    assert rel.objects
    validated = 0
    for obj in rel.objects:
        if (obj["apiVersion"], obj["kind"]) in CUSTOM_KINDS:
            with pytest.raises(SchemaNotFoundError):
                kubernetes_validate.validate(obj, kube_version, strict=True)
            continue
        # strict: unknown fields (a misspelt key, a field at the wrong level) are errors too.
        kubernetes_validate.validate(obj, kube_version, strict=True)
        validated += 1
    assert validated >= 10


def test_schema_validation_catches_a_wrong_field():
    # The validator really rejects what it should: a field at the wrong level.
    deployment = _release("default").workload("api")
    broken = yaml.safe_load(yaml.safe_dump(deployment))
    broken["spec"]["template"]["spec"]["containers"][0]["livenessprobe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBE_VERSIONS[0], strict=True)


def test_rendering_without_a_database_fails_with_a_clear_message():
    with pytest.raises(helm.HelmRenderError, match=r"postgresql\.url"):
        render({})
    with pytest.raises(helm.HelmRenderError, match=r"redis\.url"):
        render({"postgresql": {"url": "postgresql+psycopg://u:p@h:5432/sluice"}})


def test_authorization_without_authentication_is_refused():
    values = merged(values_file("default"), {"auth": {"authentication": {"enabled": False}}})
    with pytest.raises(helm.HelmRenderError, match=r"needs auth\.authentication\.enabled"):
        render(values)


@pytest.mark.parametrize("name", VALUES_FILES)
def test_objects_are_named_uniquely_and_labelled(name):
    rel = _release(name)
    keys = [(o["kind"], o["metadata"]["name"]) for o in rel.objects]
    assert len(keys) == len(set(keys))
    for obj in rel.objects:
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/instance"] == "sluice"
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert "namespace" not in obj["metadata"]  # helm install --namespace decides


@pytest.mark.parametrize("name", VALUES_FILES)
def test_selectors_match_pod_labels(name):
    rel = _release(name)
    pods = {}
    for workload in rel.of_kind("Deployment"):
        selector = workload["spec"]["selector"]["matchLabels"]
        labels = workload["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= labels.items()
        pods[workload["metadata"]["name"]] = labels
    for kind in ("Service", "PodDisruptionBudget"):
        for obj in rel.of_kind(kind):
            spec = obj["spec"]
            selector = spec["selector"] if kind == "Service" else spec["selector"]["matchLabels"]
            matching = [n for n, labels in pods.items() if selector.items() <= labels.items()]
            assert len(matching) == 1, f"{kind} {obj['metadata']['name']} selects {matching}"


@pytest.mark.parametrize("name", VALUES_FILES)
def test_references_resolve(name):
    """Every Secret, ConfigMap, ServiceAccount and claim a pod uses is in the release, or was
    named in the values as existing."""
    values = values_file(name)
    rel = _release(name)
    existing_secrets = {values.get("existingSecret")} | {
        values.get("auth", {}).get("token", {}).get("existingSecret"),
        values.get("redis", {}).get("acl", {}).get("existingSecret"),
    }
    # Secrets an operator's extra environment variables name exist outside the chart too.
    for component in ("api", "worker", "celeryWorker", "celeryBeat", "migration"):
        for env in values.get(component, {}).get("extraEnvs", []):
            ref = env.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                existing_secrets.add(ref["name"])
    existing_secrets.discard(None)
    secrets = {o["metadata"]["name"]: o for o in rel.of_kind("Secret")} | {
        s: None for s in existing_secrets
    }
    configmaps = {o["metadata"]["name"] for o in rel.of_kind("ConfigMap")}
    accounts = {o["metadata"]["name"] for o in rel.of_kind("ServiceAccount")}
    if not values.get("serviceAccount", {}).get("create", True):
        accounts.add(values["serviceAccount"]["name"])
    claims = {o["metadata"]["name"] for o in rel.of_kind("PersistentVolumeClaim")}

    for workload in [*rel.of_kind("Deployment"), *rel.of_kind("Job")]:
        spec = workload["spec"]["template"]["spec"]
        assert spec["serviceAccountName"] in accounts
        for volume in spec.get("volumes", []):
            if "secret" in volume:
                secret = secrets[volume["secret"]["secretName"]]
                if secret is not None:
                    keys = set(secret.get("data", {})) | set(secret.get("stringData", {}))
                    assert {i["key"] for i in volume["secret"].get("items", [])} <= keys
            if "persistentVolumeClaim" in volume:
                assert volume["persistentVolumeClaim"]["claimName"] in claims
        for container in spec["containers"]:
            for source in container.get("envFrom", []):
                assert source["configMapRef"]["name"] in configmaps
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    secret = secrets[ref["name"]]
                    if secret is not None:
                        keys = set(secret.get("data", {})) | set(secret.get("stringData", {}))
                        assert ref["key"] in keys
            mounts = {m["name"] for m in container.get("volumeMounts", [])}
            assert mounts <= {v["name"] for v in spec.get("volumes", [])}


@pytest.mark.parametrize("name", VALUES_FILES)
def test_commands_are_real_sluice_and_celery_commands(name):
    rel = _release(name)
    parser = build_parser()
    seen = set()
    for component in ALL_COMPONENTS:
        container = rel.container(component)
        assert "command" not in container  # keep the image's tini entrypoint
        args = container["args"]
        if args[0] == "sluice":
            parsed = parser.parse_args(args[1:])
            seen.add(parsed.command)
        else:
            assert args[:3] == ["celery", "-A", "reports.celery_app:app"]
            assert args[3] in {"worker", "beat"}
            seen.add(f"celery {args[3]}")
    assert seen == {"api", "worker", "migrate", "celery worker", "celery beat"}
    api_args = build_parser().parse_args(rel.container("api")["args"][1:])
    assert api_args.host == "0.0.0.0"
    assert api_args.port == rel.container("api")["ports"][0]["containerPort"]


@pytest.mark.parametrize("name", VALUES_FILES)
def test_api_probes_hit_the_health_endpoints(name):
    rel = _release(name)
    container = rel.container("api")
    port = build_parser().parse_args(container["args"][1:]).port
    expected = {
        "livenessProbe": "/admin/v2/brokers/health",
        "readinessProbe": "/admin/v2/brokers/ready",
        "startupProbe": "/admin/v2/brokers/health",
    }
    for probe, path in expected.items():
        get = container[probe]["httpGet"]
        assert get["path"] == path
        assert _port_number(container, get["port"]) == port
    service = rel.get("Service", f"{FULLNAME}-api")
    assert service["spec"]["ports"][0]["targetPort"] == "http"


@pytest.mark.parametrize("name", VALUES_FILES)
def test_worker_probes_hit_the_worker_http_port(name):
    rel = _release(name)
    container = rel.container("worker")
    http_port = int(rel.configmap_data()["SLUICE_WORKER_HTTP_PORT"])
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert _port_number(container, container[probe]["httpGet"]["port"]) == http_port


@pytest.mark.parametrize("name", VALUES_FILES)
def test_workers_shut_down_gracefully_without_a_pre_stop_hook(name):
    rel = _release(name)
    spec = rel.pod_spec("worker")
    assert spec["terminationGracePeriodSeconds"] >= 30
    container = rel.container("worker")
    assert "lifecycle" not in container
    worker_id = _env(container)["SLUICE_WORKER_ID"]
    assert worker_id["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    for component in SLUICE_COMPONENTS:
        assert rel.pod_spec(component)["terminationGracePeriodSeconds"] >= 30


def test_worker_grace_period_comes_from_values():
    assert _release("scaled").pod_spec("worker")["terminationGracePeriodSeconds"] == 45


@pytest.mark.parametrize("name", VALUES_FILES)
def test_pods_run_as_non_root_with_a_read_only_root(name):
    rel = _release(name)
    for component in ALL_COMPONENTS:
        spec = rel.pod_spec(component)
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["runAsUser"] > 0
        assert spec["automountServiceAccountToken"] is False
        for container in spec["containers"]:
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False
            assert security["readOnlyRootFilesystem"] is True
            assert security["capabilities"]["drop"] == ["ALL"]
            mounts = {m["mountPath"] for m in container["volumeMounts"]}
            assert {"/tmp", "/var/lib/sluice"} <= mounts  # the writable places


@pytest.mark.parametrize("name", VALUES_FILES)
def test_pods_roll_when_the_settings_change(name):
    rel = _release(name)
    if not rel.values.get("restartPodsOnConfigMapChange", True):
        for component in SLUICE_COMPONENTS:
            annotations = rel.workload(component)["spec"]["template"]["metadata"].get(
                "annotations", {}
            )
            assert "checksum/config" not in annotations
        return
    config_sum = hashlib.sha256(rel.files["sluice/templates/configmap.yaml"].encode()).hexdigest()
    secret_sum = hashlib.sha256(rel.files["sluice/templates/secret.yaml"].encode()).hexdigest()
    for component in SLUICE_COMPONENTS:
        annotations = rel.workload(component)["spec"]["template"]["metadata"]["annotations"]
        assert annotations["checksum/config"] == config_sum
        assert annotations["checksum/secret"] == secret_sum
        assert rel.container(component)["envFrom"] == [{"configMapRef": {"name": FULLNAME}}]


def test_checksum_changes_with_the_settings():
    base = values_file("default")
    before = release(base).workload("api")["spec"]["template"]["metadata"]["annotations"]
    changed = release(merged(base, {"config": {"clusterName": "other"}}))
    after = changed.workload("api")["spec"]["template"]["metadata"]["annotations"]
    assert before["checksum/config"] != after["checksum/config"]
    assert before["checksum/secret"] == after["checksum/secret"]
    moved = release(merged(base, {"redis": {"url": "redis://elsewhere:6379/0"}}))
    moved_annotations = moved.workload("api")["spec"]["template"]["metadata"]["annotations"]
    assert before["checksum/secret"] != moved_annotations["checksum/secret"]


@pytest.mark.parametrize("name", VALUES_FILES)
def test_migration_job_is_a_pre_install_and_pre_upgrade_hook(name):
    rel = _release(name)
    job = rel.workload("migration")
    annotations = job["metadata"]["annotations"]
    assert set(annotations["helm.sh/hook"].split(",")) == {"pre-install", "pre-upgrade"}
    assert "before-hook-creation" in annotations["helm.sh/hook-delete-policy"]
    job_weight = int(annotations["helm.sh/hook-weight"])
    spec = job["spec"]["template"]["spec"]
    assert spec["restartPolicy"] == "Never"
    assert build_parser().parse_args(rel.container("migration")["args"][1:]).command == "migrate"
    assert job["spec"]["backoffLimit"] >= 1
    # A hook runs before the release's objects exist: whatever the Job uses must be an existing
    # object or a hook created before it.
    hooks = {
        (o["kind"], o["metadata"]["name"]): int(o["metadata"]["annotations"]["helm.sh/hook-weight"])
        for o in rel.objects
        if "helm.sh/hook" in o["metadata"].get("annotations", {})
    }
    database = _env(rel.container("migration"))["DATABASE_URL"]["valueFrom"]["secretKeyRef"]
    if rel.values.get("existingSecret"):
        assert database["name"] == rel.values["existingSecret"]
        assert ("Secret", f"{FULLNAME}-migration") not in hooks
    else:
        assert hooks[("Secret", database["name"])] < job_weight
    account = spec["serviceAccountName"]
    if rel.values.get("serviceAccount", {}).get("create", True):
        assert hooks[("ServiceAccount", account)] < job_weight
    else:
        assert account == rel.values["serviceAccount"]["name"]
    # Only the migration's objects are hooks.
    assert {name for _, name in hooks} == {f"{FULLNAME}-migration"}


@pytest.mark.parametrize("name", VALUES_FILES)
def test_celery_beat_is_a_single_replica_replaced_with_recreate(name):
    beat = _release(name).workload("celery-beat")
    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"] == {"type": "Recreate"}
    assert not [h for h in _release(name).of_kind("HorizontalPodAutoscaler") if "beat" in str(h)]


def test_celery_worker_liveness_pings_its_own_node():
    container = _release("default").container("celery-worker")
    command = container["livenessProbe"]["exec"]["command"]
    assert command[:2] == ["sh", "-c"]
    words = shlex.split(command[2])
    assert words[:5] == ["exec", "celery", "-A", "reports.celery_app:app", "inspect"]
    assert "ping" in words
    assert words[words.index("-d") + 1] == "celery@${HOSTNAME}"


def test_default_release_has_auth_on_with_a_generated_key():
    rel = _release("default")
    data = rel.configmap_data()
    assert data["SLUICE_AUTHENTICATION_ENABLED"] == "true"
    assert data["SLUICE_AUTHORIZATION_ENABLED"] == "true"
    assert data["SLUICE_SUPER_USER_ROLES"] == "admin"
    key_file = data["SLUICE_TOKEN_SECRET_KEY_FILE"]
    assert "SLUICE_TOKEN_PUBLIC_KEY_FILE" not in data
    token_secret = rel.get("Secret", f"{FULLNAME}-token-keys")
    assert token_secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    key_name = key_file.rsplit("/", 1)[1]
    assert len(token_secret["data"][key_name]) > 40
    for component in SLUICE_COMPONENTS:
        spec = rel.pod_spec(component)
        volume = next(v for v in spec["volumes"] if v["name"] == "token-keys")
        assert volume["secret"]["secretName"] == f"{FULLNAME}-token-keys"
        mount = next(
            m for m in rel.container(component)["volumeMounts"] if m["name"] == "token-keys"
        )
        assert mount["readOnly"] is True
        assert f"{mount['mountPath']}/{volume['secret']['items'][0]['path']}" == key_file
    # NOTES tell how to create a first token with that very key, inside the API pod.
    assert f"exec deploy/{FULLNAME}-api" in rel.notes
    assert f"sluice tokens create --secret-key file:{key_file} --subject admin" in rel.notes


def test_operator_given_token_key_is_used_verbatim():
    rel = _release("scaled")
    secret = rel.get("Secret", f"{FULLNAME}-token-keys")
    key = base64.b64decode(secret["data"]["token-secret.key"]).decode()
    assert key == values_file("scaled")["auth"]["token"]["secretKey"]


def test_auth_off_mounts_no_key():
    rel = _release("auth-off")
    data = rel.configmap_data()
    assert data["SLUICE_AUTHENTICATION_ENABLED"] == "false"
    assert data["SLUICE_AUTHORIZATION_ENABLED"] == "false"
    assert not any(k.startswith("SLUICE_TOKEN_") for k in data)
    assert not rel.has("Secret", f"{FULLNAME}-token-keys")
    for component in SLUICE_COMPONENTS:
        assert "token-keys" not in {v["name"] for v in rel.pod_spec(component)["volumes"]}
    assert "Authentication is OFF" in rel.notes


def test_existing_secrets_replace_the_chart_made_ones():
    values = values_file("existing-secret")
    rel = _release("existing-secret")
    # The chart makes no Secret at all: URLs and key come from the named ones.
    assert rel.of_kind("Secret") == []
    assert not rel.of_kind("ServiceAccount")
    data = rel.configmap_data()
    assert data["SLUICE_TOKEN_PUBLIC_KEY_FILE"] == "/etc/sluice/keys/public.key"
    assert "SLUICE_TOKEN_SECRET_KEY_FILE" not in data
    assert data["SLUICE_SUPER_USER_ROLES"] == "admin,ops"
    assert data["SLUICE_LAKE_PATH"] == "s3a://sluice-lake/stats"
    assert data["SLUICE_WORKER_RESYNC_SECONDS"] == "15"
    for component in SLUICE_COMPONENTS:
        env = _env(rel.container(component))
        assert env["DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {
            "name": "sluice-connections",
            "key": "database-url",
        }
        # Authentication is on, so data-plane ACLs are: the component's Redis user has its
        # password in the operator's ACL Secret, its address is redis.dataplaneUrl.
        service = ACL_SERVICES[component]
        password = env[f"SLUICE_REDIS_{service.upper()}_PASSWORD"]["valueFrom"]["secretKeyRef"]
        assert password == {"name": "sluice-redis-acl", "key": f"{service}-password"}
        assert env["REDIS_URL"]["value"] == (
            f"redis://sluice-{service}:$(SLUICE_REDIS_{service.upper()}_PASSWORD)"
            "@redis-master.databases.svc:6379/0"
        )
        spec = rel.pod_spec(component)
        assert spec["serviceAccountName"] == "sluice-runner"
        assert spec["imagePullSecrets"] == [{"name": "registry-credentials"}]
        volume = next(v for v in spec["volumes"] if v["name"] == "token-keys")
        assert volume["secret"]["secretName"] == "sluice-jwt"
        assert rel.container(component)["image"] == "registry.example.com/sluice:0.1.0"
        assert rel.container(component)["imagePullPolicy"] == "Always"
    assert values["existingSecret"] in str(rel.workload("migration"))
    assert "private" in rel.notes  # the API holds no signing key: NOTES say where to sign


def test_scaled_release_autoscales_and_exposes_the_api():
    rel = _release("scaled")
    for component, minimum, maximum in (("api", 3, 10), ("worker", 4, 24)):
        hpa = rel.get("HorizontalPodAutoscaler", f"{FULLNAME}-{component}")
        target = hpa["spec"]["scaleTargetRef"]
        assert (target["kind"], target["name"]) == ("Deployment", f"{FULLNAME}-{component}")
        assert rel.has("Deployment", target["name"])
        assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (minimum, maximum)
        # The HPA owns the replica count: the Deployment must not fight it.
        assert "replicas" not in rel.workload(component)["spec"]
        assert rel.container(component)["resources"]["requests"]["cpu"]
    ingress = rel.get("Ingress", f"{FULLNAME}-api")
    rule = ingress["spec"]["rules"][0]
    assert rule["host"] == "sluice.example.com"
    backend = rule["http"]["paths"][0]["backend"]["service"]
    service = rel.get("Service", backend["name"])
    assert backend["port"]["name"] in {p["name"] for p in service["spec"]["ports"]}
    assert ingress["spec"]["tls"][0]["secretName"] == "sluice-example-com-tls"
    assert ingress["spec"]["ingressClassName"] == "nginx"


def test_default_release_has_no_optional_objects():
    rel = _release("default")
    assert not rel.of_kind("HorizontalPodAutoscaler")
    assert not rel.of_kind("Ingress")
    assert not rel.of_kind("ServiceMonitor")
    assert not rel.of_kind("PersistentVolumeClaim")
    assert rel.workload("api")["spec"]["replicas"] == 2
    assert rel.workload("worker")["spec"]["replicas"] == 3
    pdbs = {o["metadata"]["name"] for o in rel.of_kind("PodDisruptionBudget")}
    assert pdbs == {f"{FULLNAME}-api", f"{FULLNAME}-worker", f"{FULLNAME}-celery-worker"}


def test_service_monitor_selects_the_worker_metrics():
    """ServiceMonitor is a CRD that kubernetes-validate has no schema for: check its shape and
    that it selects the worker Service's metrics port."""
    rel = _release("scaled")
    monitor = rel.get("ServiceMonitor", f"{FULLNAME}-worker")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    spec = monitor["spec"]
    assert set(spec) <= {"jobLabel", "selector", "namespaceSelector", "endpoints"}
    assert spec["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    service = rel.get("Service", f"{FULLNAME}-worker")
    assert spec["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert service["spec"]["clusterIP"] == "None"
    ports = {p["name"]: p for p in service["spec"]["ports"]}
    (endpoint,) = spec["endpoints"]
    assert endpoint["path"] == "/metrics"
    assert endpoint["port"] in ports
    assert ports[endpoint["port"]]["port"] == int(rel.configmap_data()["SLUICE_WORKER_HTTP_PORT"])
    for duration in (endpoint["interval"], endpoint["scrapeTimeout"]):
        assert duration[:-1].isdigit() and duration[-1] in "smh"


def test_scaled_release_pins_nodes_and_keeps_the_lake():
    rel = _release("scaled")
    worker = rel.pod_spec("worker")
    assert worker["nodeSelector"] == {"node-role.example.com/sluice": "true"}
    assert worker["tolerations"][0]["key"] == "dedicated"
    assert rel.container("worker")["image"] == "sluice:0.1.1-rc1"
    assert rel.container("api")["image"] == "sluice:0.1.0"
    celery = rel.pod_spec("celery-worker")
    assert "nodeAffinity" in celery["affinity"]
    assert "--concurrency=4" in rel.container("celery-worker")["args"]
    assert rel.workload("celery-worker")["spec"]["replicas"] == 2
    claim = rel.get("PersistentVolumeClaim", f"{FULLNAME}-lake")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["spec"]["storageClassName"] == "nfs-client"
    for component in ("api", "celery-worker"):
        lake = next(v for v in rel.pod_spec(component)["volumes"] if v["name"] == "lake")
        assert lake["persistentVolumeClaim"]["claimName"] == f"{FULLNAME}-lake"
    cors = _env(rel.container("api"))["SLUICE_CORS_ORIGINS"]
    assert cors["value"] == "https://console.example.com"
    template = rel.workload("api")["spec"]["template"]["metadata"]
    assert template["annotations"]["example.com/team"] == "streaming"
    assert template["labels"]["example.com/cost-centre"] == "messaging"
    assert "emptyDir" not in rel.notes


def test_components_can_be_switched_off():
    values = merged(
        values_file("default"),
        {"components": {"celeryWorker": False, "celeryBeat": False, "migration": False}},
    )
    rel = release(values)
    names = {o["metadata"]["name"] for o in rel.of_kind("Deployment")}
    assert names == {f"{FULLNAME}-api", f"{FULLNAME}-worker"}
    assert not rel.of_kind("Job")


def test_upgrade_renders_the_same_objects():
    values = values_file("default")
    install = {k for k in render(values) if render(values)[k].strip()}
    upgrade = {k for k in render(values, is_upgrade=True) if render(values)[k].strip()}
    assert install == upgrade


@pytest.mark.parametrize(
    ("override", "where"),
    [
        ({"auth": {"token": {"keyType": "hs256"}}}, "/auth/token/keyType"),
        ({"worker": {"replicaCount": "three"}}, "/worker/replicaCount"),
        ({"config": {"reportSchedule": "every 15 minutes"}}, "/config/reportSchedule"),
        ({"redis": {"url": "localhost:6379"}}, "/redis/url"),
        ({"api": {"probe": {"liveness": {"path": "health"}}}}, "/api/probe/liveness/path"),
        ({"components": {"proxy": True}}, "/components"),
        ({"redis": {"cluster": "yes"}}, "/redis/cluster"),
        ({"redis": {"celeryBrokerUrl": "broker:6379"}}, "/redis/celeryBrokerUrl"),
        ({"redis": {"clusterMode": True}}, "/redis"),
        ({"secretKeys": {"celeryBrokerUrl": ""}}, "/secretKeys/celeryBrokerUrl"),
    ],
)
def test_values_schema_rejects_wrong_values(override, where):
    with pytest.raises(helm.HelmValuesError, match=re.escape(where)):
        render(merged(values_file("default"), override))


# --- an external Redis Cluster ----------------------------------------------------------------

CELERY_VARIABLES = ("CELERY_BROKER_URL", "CELERY_RESULT_BACKEND")
CELERY_COMPONENTS = ("api", "celery-worker", "celery-beat")


def _secret_data(rel: Release, name: str) -> dict[str, str]:
    """The (decoded) keys of a Secret the chart makes."""
    secret = rel.get("Secret", name)
    data = dict(secret.get("stringData", {}))
    data |= {k: base64.b64decode(v).decode() for k, v in secret.get("data", {}).items()}
    return data


def _resolved_env(rel: Release, component: str) -> dict[str, str]:
    """A container's environment with the chart's ConfigMap and Secrets filled in, and the
    $(NAME) references Kubernetes expands (from variables defined before) expanded."""
    environment = dict(rel.configmap_data())
    for env in rel.container(component)["env"]:
        name = env["name"]
        ref = env.get("valueFrom", {}).get("secretKeyRef")
        if ref:
            assert ref["name"] in {FULLNAME, f"{FULLNAME}-redis-acl"}
            environment[name] = _secret_data(rel, ref["name"])[ref["key"]]
        elif "value" in env:
            environment[name] = _DEPENDENT.sub(
                lambda m: environment.get(m.group(1), m.group(0)), env["value"]
            )
    return environment


def test_redis_cluster_keeps_celery_on_its_own_broker(monkeypatch):
    from models.settings import Settings
    from reports.celery_app import make_celery

    values = values_file("redis-cluster")
    rel = _release("redis-cluster")
    secret = rel.get("Secret", FULLNAME)["stringData"]
    assert secret["REDIS_URL"] == values["redis"]["url"]
    assert secret["CELERY_BROKER_URL"] == values["redis"]["celeryBrokerUrl"]
    for component in CELERY_COMPONENTS:
        env = _env(rel.container(component))
        # Authentication is on, so data-plane ACLs are: Celery's Redis too is reached as the
        # component's own ACL user.
        service = ACL_SERVICES[component]
        for variable in CELERY_VARIABLES:
            assert env[variable]["value"] == (
                f"redis://sluice-{service}:$(SLUICE_REDIS_{service.upper()}_PASSWORD)"
                "@celery-broker-redis-master.databases.svc:6379/0"
            ), (component, variable)
    off = release(
        merged(
            values,
            {"auth": {"authentication": {"enabled": False}, "authorization": {"enabled": False}}},
        )
    )
    for component in CELERY_COMPONENTS:
        env = _env(off.container(component))
        for variable in CELERY_VARIABLES:
            ref = env[variable]["valueFrom"]["secretKeyRef"]
            assert ref == {"name": FULLNAME, "key": "CELERY_BROKER_URL"}, (component, variable)
    # The broker workers do not use Celery; Sluice itself has no cluster setting.
    assert not set(CELERY_VARIABLES) & set(_env(rel.container("worker")))
    assert not [k for k in rel.configmap_data() if "CLUSTER" in k and k != "SLUICE_CLUSTER_NAME"]
    assert "Redis Cluster (redis.cluster=true)" in rel.notes

    # What the report worker makes of its environment: Sluice's data plane on the cluster,
    # Celery's broker and results on the single Redis, both as sluice-reports.
    environment = _resolved_env(rel, "celery-worker")
    password = _secret_data(rel, f"{FULLNAME}-redis-acl")["reports-password"]
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    settings = Settings(_env_file=None)
    assert settings.effective_redis_url == (
        f"redis://sluice-reports:{password}@redis-redis-cluster.databases.svc:6379/0"
    )
    celery = make_celery(settings)
    broker = f"redis://sluice-reports:{password}@celery-broker-redis-master.databases.svc:6379/0"
    assert celery.conf.broker_url == broker
    assert celery.conf.result_backend == broker


def test_without_redis_cluster_celery_uses_the_redis_url():
    rel = _release("default")
    assert "CELERY_BROKER_URL" not in rel.get("Secret", FULLNAME)["stringData"]
    for component in SLUICE_COMPONENTS:
        assert not set(CELERY_VARIABLES) & set(_env(rel.container(component)))
    assert "Redis Cluster" not in rel.notes


def test_redis_cluster_celery_broker_is_optional_but_never_the_cluster_url():
    values = merged(values_file("redis-cluster"), {"redis": {"celeryBrokerUrl": ""}})
    # Without a Redis of its own, Celery runs on the cluster (Sluice finds the master itself).
    rel = release(values)
    assert "CELERY_BROKER_URL" not in rel.get("Secret", FULLNAME)["stringData"]
    celery = rel.container("celery-worker")
    assert not set(CELERY_VARIABLES) & set(_env(celery))
    assert "on the cluster" in rel.notes
    same = merged(values, {"redis": {"celeryBrokerUrl": values["redis"]["url"]}})
    with pytest.raises(helm.HelmRenderError, match=r"not the cluster of redis\.url"):
        render(same)
    # Without the report worker and scheduler nothing uses Celery's broker.
    off = merged(values, {"components": {"celeryWorker": False, "celeryBeat": False}})
    assert not release(off).has("Deployment", f"{FULLNAME}-celery-worker")


@pytest.mark.parametrize(
    ("url", "accepted"),
    [
        ("redis://:pw@redis-cluster.db.svc:6379/0", True),
        ("redis://redis-cluster.db.svc:6379", True),
        ("rediss://default:pw@redis-cluster.db.svc:6380/?ssl_ca_certs=/etc/ca.pem", True),
        ("redis://redis-cluster.db.svc:6379/2", False),
        ("rediss://redis-cluster.db.svc:6380/15?ssl_ca_certs=/etc/ca.pem", False),
    ],
)
def test_redis_cluster_url_has_database_0_only(url, accepted):
    values = merged(values_file("redis-cluster"), {"redis": {"url": url}})
    if accepted:
        assert release(values).get("Secret", FULLNAME)["stringData"]["REDIS_URL"] == url
    else:
        with pytest.raises(helm.HelmRenderError, match="database 0 only"):
            render(values)


def test_redis_cluster_from_an_existing_secret():
    values = merged(
        values_file("existing-secret"),
        {"redis": {"cluster": True}, "secretKeys": {"celeryBrokerUrl": "celery-broker-url"}},
    )
    rel = release(values)
    for component in CELERY_COMPONENTS:
        env = _env(rel.container(component))
        for variable in CELERY_VARIABLES:
            assert env[variable]["valueFrom"]["secretKeyRef"] == {
                "name": "sluice-connections",
                "key": "celery-broker-url",
                # Without that key Celery runs on the cluster.
                "optional": True,
            }
    assert "key celery-broker-url of Secret sluice-connections" in rel.notes


# --- the report worker as the driver on a Spark cluster -------------------------------------

_DEPENDENT = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def test_report_worker_drives_a_spark_cluster_from_its_pod_ip():
    from models.settings import Settings
    from reports.session import spark_conf

    rel = _release("spark-cluster")
    data = rel.configmap_data()
    assert data["SLUICE_SPARK_MASTER"].startswith("spark://")
    assert data["SLUICE_LAKE_PATH"].startswith("s3a://")
    env = rel.container("celery-worker")["env"]
    names = [e["name"] for e in env]
    assert env[names.index("POD_IP")]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    raw = env[names.index("SLUICE_SPARK_CONF")]["value"]
    # Kubernetes expands $(NAME) only from variables defined before it in the list.
    used = _DEPENDENT.findall(raw)
    assert used and all(names.index(n) < names.index("SLUICE_SPARK_CONF") for n in used)
    fake = {"POD_IP": "10.1.2.3", "AWS_REGION": "eu-west-1"}
    fake |= {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret"}
    expanded = _DEPENDENT.sub(lambda m: fake[m.group(1)], raw)
    conf = spark_conf(Settings(_env_file=None, spark_conf=expanded, jdbc_jar=""))
    assert conf["spark.driver.host"] == "10.1.2.3"
    assert (conf["spark.driver.port"], conf["spark.blockManager.port"]) == ("7078", "7079")
    assert conf["spark.jars.packages"] == "org.apache.hadoop:hadoop-aws:3.5.0"
    assert conf["spark.hadoop.fs.s3a.access.key"] == "AKIDEXAMPLE"
    # Only the report worker drives Spark.
    assert "SLUICE_SPARK_CONF" not in _env(rel.container("api"))


# --- data-plane ACLs (on exactly when authentication is) -------------------------------------

ACL_SECRET = f"{FULLNAME}-redis-acl"
ACL_PASSWORDS = {"api": "api-Pw.1", "worker": "worker~Pw-2", "reports": "reports_Pw3"}


def _password_variable(service: str) -> str:
    return f"SLUICE_REDIS_{service.upper()}_PASSWORD"


def test_acl_file_is_the_one_sluice_renders_for_the_same_passwords():
    from dataplane.acl import render_acl_file

    values = merged(values_file("default"), {"redis": {"acl": {"passwords": ACL_PASSWORDS}}})
    data = _secret_data(release(values), ACL_SECRET)
    assert {k: data[f"{k}-password"] for k in ACL_PASSWORDS} == ACL_PASSWORDS
    assert data["users.acl"] == render_acl_file(ACL_PASSWORDS)


def test_generated_passwords_make_the_same_file_and_are_kept():
    from dataplane.acl import render_acl_file

    rel = _release("default")
    secret = rel.get("Secret", ACL_SECRET)
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    data = _secret_data(rel, ACL_SECRET)
    passwords = {s: data[f"{s}-password"] for s in ("api", "worker", "reports")}
    assert all(re.fullmatch(r"[A-Za-z0-9]{32}", p) for p in passwords.values())
    assert len(set(passwords.values())) == 3
    assert data["users.acl"] == render_acl_file(passwords)
    # On upgrade the Secret is looked up and its passwords reused (the lookup finds nothing
    # offline); the template reads them under the keys it writes.
    template = (CHART / "templates" / "redis-acl-secret.yaml").read_text()
    assert 'lookup "v1" "Secret" .Release.Namespace $name' in template
    assert "hasKey $existing.data $key" in template


def test_each_component_connects_as_its_own_acl_user(monkeypatch):
    from urllib.parse import urlsplit

    from models.settings import Settings
    from reports.celery_app import make_celery

    values = merged(values_file("default"), {"redis": {"acl": {"passwords": ACL_PASSWORDS}}})
    rel = release(values)
    for component, service in ACL_SERVICES.items():
        env = rel.container(component)["env"]
        names = [e["name"] for e in env]
        variable = _password_variable(service)
        ref = env[names.index(variable)]["valueFrom"]["secretKeyRef"]
        assert ref == {"name": ACL_SECRET, "key": f"{service}-password"}
        # Kubernetes expands $(NAME) only from variables defined before it.
        assert names.index(variable) < names.index("REDIS_URL")
        # No other component's password is in its environment.
        assert [n for n in names if n.startswith("SLUICE_REDIS_")] == [variable]
        url = urlsplit(_resolved_env(rel, component)["REDIS_URL"])
        assert (url.username, url.password) == (f"sluice-{service}", ACL_PASSWORDS[service])
        assert (url.hostname, url.port, url.path) == ("redis-master.databases.svc", 6379, "/0")
    # The migration Job (a hook, before the ACL Secret exists) uses no Redis.
    assert "REDIS_URL" not in _env(rel.container("migration"))
    # Celery (beat and worker) takes its broker and results from REDIS_URL: sluice-reports.
    for name, value in _resolved_env(rel, "celery-beat").items():
        monkeypatch.setenv(name, value)
    celery = make_celery(Settings(_env_file=None))
    assert urlsplit(celery.conf.broker_url).username == "sluice-reports"
    assert urlsplit(celery.conf.result_backend).username == "sluice-reports"


def test_admin_service_gives_clients_the_address_without_credentials(monkeypatch):
    from models.settings import Settings

    rel = _release("default")
    assert _env(rel.container("api"))["SLUICE_DATAPLANE_URL"]["value"] == (
        "redis://redis-master.databases.svc:6379/0"  # redis.url without ":s3cret@"
    )
    for component in ("worker", "celery-worker", "celery-beat", "migration"):
        assert "SLUICE_DATAPLANE_URL" not in _env(rel.container(component))
    for name, value in _resolved_env(rel, "api").items():
        monkeypatch.setenv(name, value)
    assert Settings(_env_file=None).dataplane_url == "redis://redis-master.databases.svc:6379/0"
    # TLS options stay; another address for clients is redis.dataplaneUrl.
    tls = merged(
        values_file("default"),
        {"redis": {"url": "rediss://:pw@redis.db.svc:6380/0?ssl_ca_certs=/etc/ca.pem"}},
    )
    env = _env(release(tls).container("api"))
    assert env["SLUICE_DATAPLANE_URL"]["value"] == (
        "rediss://redis.db.svc:6380/0?ssl_ca_certs=/etc/ca.pem"
    )
    assert env["REDIS_URL"]["value"] == (
        "rediss://sluice-api:$(SLUICE_REDIS_API_PASSWORD)@redis.db.svc:6380/0"
        "?ssl_ca_certs=/etc/ca.pem"
    )
    public = merged(
        values_file("default"), {"redis": {"dataplaneUrl": "redis://redis.example.com:6379/0"}}
    )
    assert _env(release(public).container("api"))["SLUICE_DATAPLANE_URL"]["value"] == (
        "redis://redis.example.com:6379/0"
    )
    # The components themselves still connect to redis.url.
    assert (
        "@redis-master.databases.svc:6379/0"
        in _env(release(public).container("worker"))["REDIS_URL"]["value"]
    )


@pytest.mark.parametrize("name", ["auth-off"])
def test_without_authentication_redis_is_used_as_before(name):
    rel = _release(name)
    assert not rel.has("Secret", ACL_SECRET)
    assert "sluice/templates/redis-acl-secret.yaml" not in {
        path for path, text in rel.files.items() if text.strip()
    }
    for component in SLUICE_COMPONENTS:
        env = _env(rel.container(component))
        assert env["REDIS_URL"]["valueFrom"]["secretKeyRef"] == {
            "name": FULLNAME,
            "key": "REDIS_URL",
        }
        assert not [n for n in env if n.startswith("SLUICE_REDIS_")]
        assert "SLUICE_DATAPLANE_URL" not in env
    assert "Data-plane ACLs" not in rel.notes
    on = release(merged(values_file(name), {"auth": {"authentication": {"enabled": True}}}))
    assert on.has("Secret", ACL_SECRET)


def test_acls_with_an_existing_secret_need_the_dataplane_url():
    values = values_file("existing-secret")
    rel = _release("existing-secret")
    assert not rel.has("Secret", ACL_SECRET)  # the operator's sluice-redis-acl holds them
    assert "sluice redis-acl-file --output users.acl" in rel.notes
    assert (
        _env(rel.container("api"))["SLUICE_DATAPLANE_URL"]["value"]
        == (values["redis"]["dataplaneUrl"])
    )
    without = merged(values, {"redis": {"dataplaneUrl": ""}})
    with pytest.raises(helm.HelmRenderError, match=r"set redis\.dataplaneUrl"):
        render(without)


def test_notes_say_how_to_load_the_acl_file():
    rel = _release("default")
    assert "Data-plane ACLs are on" in rel.notes
    assert f"get secret {ACL_SECRET}" in rel.notes
    assert "users\\.acl" in rel.notes
    assert "redis-server --aclfile" in rel.notes
    assert "every cluster node" in _release("redis-cluster").notes


def test_pods_roll_when_the_acl_passwords_change():
    base = values_file("default")
    before = release(base).workload("worker")["spec"]["template"]["metadata"]["annotations"]
    changed = release(merged(base, {"redis": {"acl": {"passwords": ACL_PASSWORDS}}}))
    after = changed.workload("worker")["spec"]["template"]["metadata"]["annotations"]
    assert before["checksum/redis-acl"] != after["checksum/redis-acl"]
    assert before["checksum/config"] == after["checksum/config"]


@pytest.mark.parametrize(
    ("override", "where"),
    [
        ({"redis": {"acl": {"passwords": {"api": "has space"}}}}, "/redis/acl/passwords/api"),
        ({"redis": {"acl": {"passwords": {"worker": "p@ss"}}}}, "/redis/acl/passwords/worker"),
        ({"redis": {"acl": {"passwords": {"admin": "x"}}}}, "/redis/acl/passwords"),
        ({"redis": {"dataplaneUrl": "redis://u:pw@redis:6379/0"}}, "/redis/dataplaneUrl"),
        ({"redis": {"dataplaneUrl": "redis:6379"}}, "/redis/dataplaneUrl"),
    ],
)
def test_values_schema_rejects_wrong_acl_values(override, where):
    with pytest.raises(helm.HelmValuesError, match=re.escape(where)):
        render(merged(values_file("default"), override))


def test_a_redis_server_loads_the_charts_file_and_admits_each_component(tmp_path):
    """The chart's ACL file in a real redis-server: each component's resolved REDIS_URL logs
    in as its own user; nobody gets in as the default user."""
    import shutil
    import time

    import redis

    from server.embedded_redis import EmbeddedRedis

    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    rel = _release("default")
    acl = tmp_path / "users.acl"
    acl.write_text(_secret_data(rel, ACL_SECRET)["users.acl"])
    server = EmbeddedRedis(tmp_path / "redis", extra_args=("--aclfile", str(acl)))
    process = server.spawn()
    try:
        for component, service in ACL_SERVICES.items():
            url = _resolved_env(rel, component)["REDIS_URL"]
            local = re.sub(r"@[^/]+/", f"@127.0.0.1:{server.port}/", url)
            client = redis.Redis.from_url(local, decode_responses=True)
            deadline = time.monotonic() + 10
            while True:
                try:
                    assert client.acl_whoami() == f"sluice-{service}"
                    break
                except redis.ConnectionError:
                    assert process.poll() is None, "redis-server refused the chart's ACL file"
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
            client.close()
        anonymous = redis.Redis(port=server.port)
        with pytest.raises((redis.AuthenticationError, redis.ResponseError)):
            anonymous.ping()
        anonymous.close()
    finally:
        server.stop()
