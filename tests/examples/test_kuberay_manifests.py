"""The KubeRay manifests in ``examples/kuberay``, checked without Kubernetes.

Each RayJob and RayCluster is validated against the schema of KubeRay's own CRD (its ``ray.io/v1``
``openAPIV3Schema``, kept in ``kuberay_crds/``; see the README there), as the API server would:
wrong types, enum values and quantities, missing required fields, and fields the schema does not
name (which the API server would drop, or refuse under strict field validation). Then what the
schema cannot know: the RayJob's entrypoint is an eval our CLI accepts with a shipped config,
the pods that run the local sandbox carry what ``examples/kuberay/README.md`` says it needs, and
the README's image runs the Ray the manifests name. No Kubernetes, no Ray, no network.
"""

from __future__ import annotations

import copy
import gzip
import json
import re
import shlex
from functools import cache
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft4Validator

from deepgym_ray.cli import build_parser
from deepgym_ray.cli.options import settings_from
from deepgym_ray.config import config_path

ROOT = Path(__file__).resolve().parents[2]
KUBERAY = ROOT / "examples" / "kuberay"
GUIDE = (KUBERAY / "README.md").read_text(encoding="utf-8")
SCHEMA_FILES = {"RayJob": "rayjobs.v1.schema.json.gz",
                "RayCluster": "rayclusters.v1.schema.json.gz"}
MANIFESTS = {"rayjob-eval.yaml": "RayJob", "raycluster-training.yaml": "RayCluster"}


@cache
def _validator(kind: str) -> Draft4Validator:
    # Kubernetes' structural schemas are OpenAPI v3.0, JSON Schema draft 4 in what they use; the
    # x-kubernetes-* keywords (int-or-string, list types) are unknown to it and left alone.
    path = Path(__file__).with_name("kuberay_crds") / SCHEMA_FILES[kind]
    return Draft4Validator(json.loads(gzip.decompress(path.read_bytes())))


@cache
def _manifest(name: str) -> dict:
    [document] = [d for d in yaml.safe_load_all((KUBERAY / name).read_text()) if d is not None]
    return document


def _unknown_fields(instance: object, schema: dict, where: str = "") -> list[str]:
    """The fields of ``instance`` that ``schema`` does not name, where it names them all (the
    API server prunes such fields: a misspelled one would vanish without a word)."""
    def at(key: object) -> str:
        return f"{where}.{key}" if where else str(key)

    if isinstance(instance, list):
        return [found for i, item in enumerate(instance)
                for found in _unknown_fields(item, schema.get("items", {}), at(i))]
    if not isinstance(instance, dict):
        return []
    properties = schema.get("properties")
    if properties is None:  # a map (additionalProperties), or an object kept as it is
        values = schema.get("additionalProperties")
        if not isinstance(values, dict):
            return []
        return [found for key, value in instance.items()
                for found in _unknown_fields(value, values, at(key))]
    found = []
    for key, value in instance.items():
        if key in properties:
            found += _unknown_fields(value, properties[key], at(key))
        elif not schema.get("x-kubernetes-preserve-unknown-fields"):
            found.append(at(key))
    return found


def _problems(manifest: dict) -> list[str]:
    validator = _validator(manifest["kind"])
    problems = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
                for e in validator.iter_errors(manifest)]
    return problems + [f"unknown field {f}" for f in _unknown_fields(manifest, validator.schema)]


def _cluster_spec(manifest: dict) -> dict:
    return manifest["spec"]["rayClusterSpec"] if manifest["kind"] == "RayJob" \
        else manifest["spec"]


def _groups(manifest: dict) -> dict[str, dict]:
    """Every pod group of the cluster by name (the head as ``head``)."""
    spec = _cluster_spec(manifest)
    return {"head": spec["headGroupSpec"],
            **{group["groupName"]: group for group in spec["workerGroupSpecs"]}}


def _hosts_actors(group: dict) -> bool:
    # The pool's actors ask Ray for CPUs only: a group offering none never gets one.
    return group.get("rayStartParams", {}).get("num-cpus") != "0"


def _ray_container(group: dict) -> dict:
    return group["template"]["spec"]["containers"][0]  # KubeRay runs Ray in the first one


# What the local sandbox needs in its container, as examples/kuberay/README.md spells it, and
# how a pod shows it.
def _cgroup_mount(group: dict) -> bool:
    spec = group["template"]["spec"]
    host = {v["name"] for v in spec.get("volumes", [])
            if v.get("hostPath", {}).get("path") == "/sys/fs/cgroup"}
    return any(m["name"] in host and m["mountPath"] == "/sys/fs/cgroup"
               and not m.get("readOnly", False)
               for m in _ray_container(group).get("volumeMounts", []))


LOCAL_SANDBOX_NEEDS = {
    "`runAsUser: 0`": lambda g: _ray_container(g)["securityContext"].get("runAsUser") == 0,
    "`privileged: true`": lambda g: _ray_container(g)["securityContext"].get("privileged"),
    "`seccompProfile`, `appArmorProfile`: `Unconfined`": lambda g: all(
        _ray_container(g)["securityContext"].get(p, {}).get("type") == "Unconfined"
        for p in ("seccompProfile", "appArmorProfile")),
    "`/sys/fs/cgroup` from the node (`hostPath`), writable": _cgroup_mount,
}


@pytest.mark.parametrize("name", sorted(MANIFESTS))
def test_each_manifest_is_a_kuberay_v1_resource_its_crd_accepts(name):
    manifest = _manifest(name)
    assert (manifest["apiVersion"], manifest["kind"]) == ("ray.io/v1", MANIFESTS[name])
    assert _problems(manifest) == []


def test_the_validation_refuses_what_the_api_server_would():
    """Broken copies of the RayJob, one fault each, and the one problem each is told as."""
    def broken(path: str, change) -> list[str]:
        job = copy.deepcopy(_manifest("rayjob-eval.yaml"))
        node = job
        for key in path.split("."):
            node = node[int(key) if key.isdigit() else key]
        change(node)
        return _problems(job)

    workers = "spec.rayClusterSpec.workerGroupSpecs.0"
    container = f"{workers}.template.spec.containers.0"
    assert broken(workers, lambda group: group.update(replicas="four")) == [
        f"{workers}.replicas: 'four' is not of type 'integer'"]
    [mode] = broken("spec.rayClusterSpec.authOptions", lambda auth: auth.update(mode="tokens"))
    assert mode.startswith("spec.rayClusterSpec.authOptions.mode: 'tokens' is not one of")
    assert broken(workers, lambda group: group.pop("groupName")) == [
        f"{workers}: 'groupName' is a required property"]
    [quantity] = broken(f"{container}.resources.limits", lambda limits: limits.update(
        cpu="16 cores"))
    assert quantity.startswith(f"{container}.resources.limits.cpu: ")
    assert broken("spec", lambda spec: spec.update(shutdownAfterJobFinish=True)) == [
        "unknown field spec.shutdownAfterJobFinish"]
    assert broken(f"{container}.securityContext", lambda ctx: ctx.update(priviledged=True)) == [
        f"unknown field {container}.securityContext.priviledged"]


def test_the_entrypoint_is_an_eval_the_cli_accepts_with_a_shipped_config():
    job = _manifest("rayjob-eval.yaml")
    program, *argv = shlex.split(job["spec"]["entrypoint"])
    assert program == "deepgym-ray"
    args = build_parser().parse_args(argv)  # exits (SystemExit) on a flag the CLI lacks
    assert (args.command, args.target) == ("eval", "humaneval")
    shipped = ROOT / "configs" / f"{args.config}.yaml"  # configs/ links to the package's
    assert shipped.is_file() and config_path(args.config).resolve() == shipped.resolve()
    settings = settings_from(args)
    assert (settings.mode, settings.backend) == ("local", "ray")
    # The driver runs on the head: what it reads and writes must be on the head's volume.
    head = _ray_container(_groups(job)["head"])
    mounted = [m["mountPath"] for m in head["volumeMounts"]]
    for path in (args.solutions, args.out):
        assert any(path.startswith(f"{mount}/") for mount in mounted), path


def test_the_pods_that_run_the_local_sandbox_have_what_the_guide_says_it_needs():
    for spelled in LOCAL_SANDBOX_NEEDS:
        assert spelled in GUIDE, spelled
    for name in MANIFESTS:
        groups = _groups(_manifest(name))
        # Only the groups that offer Ray CPUs get the pool's actors, and with them the
        # sandboxes: the eval's (mode local, previous test) and the training cluster's local
        # `verifiers`; the head and the trainers' GPU pods hold none and get no privilege.
        hosts = {group for group in groups if _hosts_actors(groups[group])}
        assert hosts - {"verifiers-remote"} == {"verifiers"}, (name, hosts)
        missing = [need for need, holds in LOCAL_SANDBOX_NEEDS.items()
                   if not holds(groups["verifiers"])]
        assert missing == [], name
        for group in groups.keys() - hosts:
            assert "securityContext" not in _ray_container(groups[group]), (name, group)


def test_the_remote_sandbox_group_has_no_privilege_and_gets_a_key():
    remote = _groups(_manifest("raycluster-training.yaml"))["verifiers-remote"]
    container = _ray_container(remote)
    context = container["securityContext"]
    assert context.get("privileged", False) is False
    assert context["runAsNonRoot"] is True and context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert "volumes" not in remote["template"]["spec"]  # no node cgroups
    assert any("secretRef" in source for source in container["envFrom"])


def test_every_pod_runs_one_image_with_the_ray_the_guide_installs():
    [pinned] = re.findall(r'"ray\[default\]==([\d.]+)"', GUIDE)
    for name in MANIFESTS:
        manifest = _manifest(name)
        assert _cluster_spec(manifest)["rayVersion"] == pinned, name
        images = {_ray_container(group)["image"] for group in _groups(manifest).values()}
        assert images == {"deepgym-ray:latest"}, name


def test_the_readme_cluster_section_links_the_manifests():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Evaluating on a cluster"):readme.index("## Docker")]
    assert "examples/kuberay" in section
