"""deploy/kubernetes without a cluster: every overlay renders with ``kubectl kustomize``, every
object validates against the Kubernetes 1.32 schemas (kubernetes-validate, strict: no unknown
field) or, for KEDA's and the Prometheus operator's kinds, against their vendored CRD schemas
(tests/deploy/schemas/README.md names the versions); each container runs an entry point the
image has with options it accepts; each environment variable the manifests set is one the code
reads; and the rules the README promises hold in every overlay (non-root read-only pods, a
worker per queue scaled on that queue's list, the drain inside the grace period, one beat)."""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import importlib.util
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from django.core.management import get_commands

from agents.llm import factory

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = ROOT / "deploy" / "kubernetes"
SCHEMAS = Path(__file__).parent / "schemas"
KUBERNETES_VERSION = "1.32.0"
OVERLAYS = ("small", "production")
RENDERS = (*OVERLAYS, *(f"{overlay}/migrate" for overlay in OVERLAYS))
CUSTOM_KINDS = {
    ("keda.sh/v1alpha1", "ScaledObject"): "keda-2.16.1-scaledobject.json",
    ("keda.sh/v1alpha1", "TriggerAuthentication"): "keda-2.16.1-triggerauthentication.json",
    ("monitoring.coreos.com/v1", "ServiceMonitor"): (
        "prometheus-operator-0.80.1-servicemonitor.json"
    ),
}
Manifest = dict[str, Any]


@functools.cache
def render(overlay: str) -> tuple[Manifest, ...]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed (`make test` installs it: apt-get install kubectl)")
    done = subprocess.run(
        [kubectl, "kustomize", str(KUBERNETES / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return tuple(doc for doc in yaml.safe_load_all(done.stdout) if doc)


def pod_specs(overlay: str) -> Iterator[tuple[Manifest, Manifest]]:
    for doc in render(overlay):
        if doc["kind"] in ("Deployment", "StatefulSet", "Job"):
            yield doc, doc["spec"]["template"]["spec"]


def containers(overlay: str) -> Iterator[tuple[Manifest, Manifest]]:
    for doc, spec in pod_specs(overlay):
        for container in [*spec.get("initContainers", []), *spec["containers"]]:
            yield doc, container


@pytest.mark.parametrize("overlay", RENDERS)
def test_every_object_validates_against_its_schema(overlay: str) -> None:
    docs = render(overlay)
    assert docs
    for doc in docs:
        where = f"{overlay}: {doc['kind']} {doc['metadata']['name']}"
        schema_file = CUSTOM_KINDS.get((doc["apiVersion"], doc["kind"]))
        if schema_file is None:
            try:
                kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
            except kubernetes_validate.ValidationError as error:
                pytest.fail(f"{where}: {error.message} at {list(error.path)}")
        else:
            schema = json.loads((SCHEMAS / schema_file).read_text())
            errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]
            assert not errors, f"{where}: {errors}"


def test_the_schemas_refuse_what_the_cluster_would():
    # The checks above would see a typo or a misplaced field (strict schemas, custom kinds too).
    (worker,) = (
        d
        for d in render("small")
        if d["metadata"]["name"] == "agentdesk-worker-runs" and d["kind"] == "Deployment"
    )
    typo = json.loads(json.dumps(worker))
    typo["spec"]["template"]["spec"]["terminationGracePeriod"] = 30
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(typo, KUBERNETES_VERSION, strict=True)
    (scaled,) = (
        d
        for d in render("small")
        if d["metadata"]["name"] == "agentdesk-worker-runs" and d["kind"] == "ScaledObject"
    )
    wrong = json.loads(json.dumps(scaled))
    wrong["spec"]["minReplicas"] = 1  # the HPA's name, not KEDA's
    schema = json.loads((SCHEMAS / CUSTOM_KINDS[("keda.sh/v1alpha1", "ScaledObject")]).read_text())
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(wrong))


# --- Entry points ---------------------------------------------------------------------------


def _click_options(command: Any) -> set[str]:
    return {opt for param in command.params for opt in [*param.opts, *param.secondary_opts]}


def _check_options(args: list[str], accepted: set[str], what: str) -> None:
    for arg in args:
        if arg.startswith("-"):
            assert arg.split("=", 1)[0] in accepted, f"{what} has no option {arg}"


def _declared_queues() -> set[str]:
    """The queues the settings declare (a worker without -Q consumes them all). From the
    settings, not the app's ``amqp.queues``, which also holds what other tests sent to."""
    from django.conf import settings

    return set(settings.CELERY_TASK_QUEUES)


def _check_command(command: list[str]) -> None:
    scripts = {ep.name for ep in importlib.metadata.entry_points(group="console_scripts")}
    program, *args = command
    if program == "uvicorn":
        from uvicorn.main import main as uvicorn_cli

        assert "uvicorn" in scripts
        target, *options = args
        module, _, attribute = target.partition(":")
        spec = importlib.util.find_spec(module)
        assert spec is not None, f"no module {module}"
        assert spec.origin is not None, f"no module {module}"
        tree = ast.parse(Path(spec.origin).read_text())
        assigned = {
            t.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            for t in node.targets
            if isinstance(t, ast.Name)
        }
        assert attribute in assigned, f"{module} defines no {attribute}"
        _check_options(options, _click_options(uvicorn_cli), "uvicorn")
    elif program == "celery":
        from celery.bin.celery import celery as celery_cli

        from config.celery_app import app

        assert "celery" in scripts
        assert args[:2] == ["-A", "config"], args
        assert importlib.import_module("config").celery_app is app
        subcommand, *options = args[2:]
        assert subcommand in ("worker", "beat"), subcommand
        _check_options(options, _click_options(celery_cli.commands[subcommand]), subcommand)
        if "-Q" in options:
            queues = options[options.index("-Q") + 1].split(",")
            declared = _declared_queues()
            assert set(queues) <= declared, f"{queues}: not among the queues {declared}"
    else:
        assert program == "python", command
        assert args[0] == "manage.py", command
        name = args[1]
        app = get_commands().get(name)
        # Production settings do not install devkit: its commands are not in the image's.
        assert app is not None, f"manage.py has no {name}"
        assert app != "devkit", f"manage.py has no {name} in production"


@pytest.mark.parametrize("overlay", RENDERS)
def test_each_container_runs_an_entry_point_of_the_image(overlay: str) -> None:
    seen = [container["command"] for _, container in containers(overlay)]
    assert seen
    for command in seen:
        _check_command(command)


# --- Environment ----------------------------------------------------------------------------

_ENV_READERS = {
    "str",
    "int",
    "bool",
    "float",
    "list",
    "json",
    "url",
    "db_url",
    "get",
    "setdefault",
    "getenv",
}


def _names_read(path: Path) -> set[str]:
    """String literals that name a variable in an environment read: env.<type>("X", ...),
    env("X"), os.environ.get / setdefault / ["X"], os.getenv("X")."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and node.args:
            first = node.args[0]
            func = node.func
            reads = (isinstance(func, ast.Attribute) and func.attr in _ENV_READERS) or (
                isinstance(func, ast.Name) and func.id == "env"
            )
            if reads and isinstance(first, ast.Constant) and isinstance(first.value, str):
                names.add(first.value)
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "environ"
        ):
            names.add(str(node.slice.value))
    return {name for name in names if name.isupper()}


@functools.cache
def variables_read() -> frozenset[str]:
    """What the settings (and config/ around them) read, the LLM gateway's provider keys, and
    what the web's server itself reads (uvicorn: FORWARDED_ALLOW_IPS)."""
    import uvicorn.config

    files = [*(ROOT / "config").glob("*.py"), *(ROOT / "config" / "settings").glob("*.py")]
    names = set().union(*(_names_read(path) for path in files))
    names |= {*factory.ENV_KEYS.values(), *factory.GOOGLE_ENV_KEYS}
    names |= _names_read(Path(uvicorn.config.__file__))
    return frozenset(names)


def test_the_variables_read_are_found_in_the_code() -> None:
    # The derivation finds what the settings read, however they read it.
    assert {
        "DATABASE_URL",
        "REDIS_URL",
        "DJANGO_SECRET_KEY",
        "DJANGO_SETTINGS_MODULE",
        "AGENTDESK_METRICS_PORT",
        "CELERY_WORKER_CONCURRENCY",
    } <= variables_read()
    assert "NOT_A_SETTING" not in variables_read()


@pytest.mark.parametrize("overlay", RENDERS)
def test_each_variable_the_manifests_set_is_read_by_the_code(overlay: str) -> None:
    set_here: dict[str, str] = {}
    for doc in render(overlay):
        if doc["kind"] == "ConfigMap":
            set_here.update(dict.fromkeys(doc["data"], f"ConfigMap {doc['metadata']['name']}"))
    for doc, container in containers(overlay):
        for variable in container.get("env", []):
            set_here[variable["name"]] = f"{doc['metadata']['name']}/{container['name']}"
    unread = {name: where for name, where in set_here.items() if name not in variables_read()}
    assert not unread, f"set but read by nothing: {unread}"


# --- What the README promises ---------------------------------------------------------------


@pytest.mark.parametrize("overlay", RENDERS)
def test_every_pod_runs_non_root_and_read_only(overlay: str) -> None:
    for doc, spec in pod_specs(overlay):
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True, doc["metadata"]["name"]
        assert pod["runAsUser"] != 0, doc["metadata"]["name"]
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}
        assert spec["automountServiceAccountToken"] is False
        for container in [*spec.get("initContainers", []), *spec["containers"]]:
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True, container["name"]
            assert context["allowPrivilegeEscalation"] is False
            assert context["capabilities"] == {"drop": ["ALL"]}
            mounts = {mount["mountPath"] for mount in container["volumeMounts"]}
            assert {"/tmp", "/var/lib/agentdesk/metrics"} <= mounts
            assert container["resources"]["requests"]
            assert container["resources"]["limits"]
        # Secrets only by reference: no value of a Secret's key is in the manifests.
        for container in spec["containers"]:
            for variable in container.get("env", []):
                if variable["name"] in ("DATABASE_URL", "DJANGO_SECRET_KEY", "REDIS_URL"):
                    assert "secretKeyRef" in variable["valueFrom"]
    assert not [doc for doc in render(overlay) if doc["kind"] == "Secret"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_a_worker_per_queue_scaled_on_its_list_draining_within_its_grace_period(
    overlay: str,
) -> None:
    docs = render(overlay)
    workers = {}
    for doc, spec in pod_specs(overlay):
        (container,) = spec["containers"]
        if container["command"][:4] == ["celery", "-A", "config", "worker"]:
            queue = container["command"][container["command"].index("-Q") + 1]
            env = {v["name"]: v.get("value") for v in container["env"]}
            assert (
                float(env["AGENTDESK_WORKER_DRAIN_SECONDS"]) < spec["terminationGracePeriodSeconds"]
            )
            assert spec["terminationGracePeriodSeconds"] == 30
            workers[queue] = doc
            assert "replicas" not in doc["spec"]  # the ScaledObject's HPA owns it
    assert set(workers) == _declared_queues()
    scaled = {d["spec"]["scaleTargetRef"]["name"]: d for d in docs if d["kind"] == "ScaledObject"}
    for queue, worker in workers.items():
        scaler = scaled[worker["metadata"]["name"]]
        (trigger,) = scaler["spec"]["triggers"]
        assert trigger["type"] == "redis"
        assert trigger["metadata"]["listName"] == queue
        assert 1 <= scaler["spec"]["minReplicaCount"] <= scaler["spec"]["maxReplicaCount"]
    # A run starts at once: its workers never scale to zero.
    assert scaled["agentdesk-worker-runs"]["spec"]["minReplicaCount"] >= 1


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_one_beat_and_web_probes_that_survive_a_database_outage(overlay: str) -> None:
    (beat,) = (
        doc for doc, spec in pod_specs(overlay) if spec["containers"][0]["command"][3:4] == ["beat"]
    )
    assert beat["kind"] == "StatefulSet"
    assert beat["spec"]["replicas"] == 1
    (web,) = (
        doc
        for doc in render(overlay)
        if doc["metadata"]["name"] == "agentdesk-web" and doc["kind"] == "Deployment"
    )
    (container,) = web["spec"]["template"]["spec"]["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz?checks=database"
    assert container["livenessProbe"]["httpGet"]["path"] == "/livez"


def test_the_image_runs_as_the_numeric_user_the_pods_ask_for() -> None:
    # runAsNonRoot can only be checked against a numeric USER; the pods run as the same one.
    dockerfile = (ROOT / "Dockerfile").read_text()
    (user,) = (line.split()[1] for line in dockerfile.splitlines() if line.startswith("USER "))
    uid, _, gid = user.partition(":")
    assert uid.isdigit(), user
    assert uid != "0", user
    for _, spec in pod_specs("production"):
        assert str(spec["securityContext"]["runAsUser"]) == uid
        assert str(spec["securityContext"]["runAsGroup"]) == gid
    # The build context leaves out a developer's secrets and embedded servers' data.
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".env", ".data/", ".venv/", ".git/"} <= set(ignored)
