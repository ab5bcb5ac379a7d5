"""deploy/dra's ValidatingAdmissionPolicy: each node's driver writes only its own node's ResourceSlices.

The policy and its binding come from every DRA kustomization as real kustomize renders it; their CEL runs in
cel-python (tests/dra/admission_policy.py says how close that is to the API server) against a table of
admission requests, and against the slices the driver itself builds."""

from __future__ import annotations

from typing import Any

import celpy
import pytest

from device_plugin.dra.inventory import build_devices
from device_plugin.dra_helper.api.slices import API_VERSIONS, build_slices
from device_plugin.nvml.fake.machine import FakeNvml
from tests.allocation.machines import topology_of
from tests.deploy.kustomize import build as render
from tests.deploy.kustomize import kustomizations
from tests.dra.admission_policy import AdmissionPolicy, Request, Verdict, expressions

# the DRA kustomizations that deploy the driver (its ClusterRole): each must bring the policy along
KUSTOMIZATIONS = [
    name
    for name in kustomizations()
    if (name == "dra" or name.startswith("dra/"))
    and any(o["kind"] == "ClusterRole" and o["metadata"]["name"] == "gpu-device-plugin-dra" for o in render(name))
]
SA = "system:serviceaccount:gpu-device-plugin:gpu-device-plugin"
NODE_KEY = "authentication.kubernetes.io/node-name"
DRIVER = "gpu.gpu-device-plugin.io"
Extra = dict[str, list[str]]  # userInfo.extra: each key holds a list of values
RBAC_TO_OPERATIONS = {"create": "CREATE", "update": "UPDATE", "patch": "UPDATE", "delete": "DELETE"}


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


POLICY = one(render("dra"), "ValidatingAdmissionPolicy")
ADMISSION = AdmissionPolicy(POLICY)


def slice_on(node: str | None, **spec: Any) -> dict[str, Any]:
    body = {"driver": DRIVER, "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}, "devices": []}
    placement = {"nodeName": node} if node is not None else {}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "spec": {**body, **placement, **spec}}


def on_node(node: str) -> Extra:
    return {NODE_KEY: [node]}


def create(obj: dict[str, Any], user: str = SA, extra: Extra | None = None, version: str = "v1") -> Request:
    return Request("CREATE", user, on_node("n1") if extra is None else extra, obj, None, version)


def update(old: dict[str, Any], new: dict[str, Any], user: str = SA) -> Request:
    return Request("UPDATE", user, on_node("n1"), new, old)


def delete(old: dict[str, Any], user: str = SA, extra: Extra | None = None) -> Request:
    return Request("DELETE", user, on_node("n1") if extra is None else extra, None, old)


ALLOWED, DENIED, NOT_MATCHED = Verdict(True, True), Verdict(True, False), Verdict(False, True)
TABLE = [
    ("our-driver-creates-its-own-nodes-slice", create(slice_on("n1")), ALLOWED),
    ("through-v1beta2", create(slice_on("n1"), version="v1beta2"), ALLOWED),
    ("through-v1beta1", create(slice_on("n1"), version="v1beta1"), ALLOWED),
    ("our-driver-creates-another-nodes-slice", create(slice_on("n2")), DENIED),
    ("another-nodes-slice-through-v1beta1", create(slice_on("n2"), version="v1beta1"), DENIED),
    ("a-slice-for-all-nodes", create(slice_on(None, allNodes=True)), DENIED),
    ("a-slice-for-a-node-selector", create(slice_on(None, nodeSelector={"nodeSelectorTerms": []})), DENIED),
    ("updating-its-own-slice-in-place", update(slice_on("n1"), slice_on("n1", devices=[{"name": "g"}])), ALLOWED),
    ("an-update-moving-its-slice-to-another-node", update(slice_on("n1"), slice_on("n2")), DENIED),
    ("an-update-taking-over-another-nodes-slice", update(slice_on("n2"), slice_on("n1")), DENIED),
    ("an-update-of-another-nodes-slice", update(slice_on("n2"), slice_on("n2")), DENIED),
    ("an-update-turning-its-slice-into-all-nodes", update(slice_on("n1"), slice_on(None, allNodes=True)), DENIED),
    ("deleting-its-own-slice", delete(slice_on("n1")), ALLOWED),
    ("deleting-another-nodes-slice", delete(slice_on("n2")), DENIED),
    ("deleting-an-all-nodes-slice", delete(slice_on(None, allNodes=True)), DENIED),
    ("a-token-without-node-name-creates", create(slice_on("n1"), extra={}), DENIED),
    ("a-token-without-node-name-deletes", delete(slice_on("n1"), extra={}), DENIED),
    ("a-token-with-an-empty-node-name", create(slice_on("n1"), extra={NODE_KEY: []}), DENIED),
    ("a-token-with-two-node-names", create(slice_on("n1"), extra={NODE_KEY: ["n1", "n2"]}), DENIED),
    ("another-service-account", create(slice_on("n2"), user="system:serviceaccount:kube-system:other"), NOT_MATCHED),
    (
        "our-account-name-in-another-namespace",
        create(slice_on("n2"), user="system:serviceaccount:elsewhere:gpu-device-plugin"),
        NOT_MATCHED,
    ),
    ("the-kubelet-deleting-its-nodes-slices", delete(slice_on("n2"), user="system:node:n2", extra={}), NOT_MATCHED),
    (
        "not-a-resourceslice",
        Request("UPDATE", SA, {}, {"spec": {}}, {"spec": {}}, resource="resourceclaims"),
        NOT_MATCHED,
    ),
]


@pytest.mark.parametrize(("request_", "expected"), [row[1:] for row in TABLE], ids=[row[0] for row in TABLE])
def test_the_policy_admits_only_the_drivers_own_node_slices(request_: Request, expected: Verdict) -> None:
    verdict = ADMISSION.admit(request_)
    assert (verdict.matched, verdict.allowed) == (expected.matched, expected.allowed), verdict.messages
    assert bool(verdict.messages) is not verdict.allowed  # a refusal always says why


@pytest.mark.parametrize(
    ("request_", "says"),
    [
        (create(slice_on("n2")), "the driver on node n1 may write only ResourceSlices with spec.nodeName n1"),
        (update(slice_on("n2"), slice_on("n1")), "may update or delete only ResourceSlices whose stored"),
        (create(slice_on("n1"), extra={}), "names no node (user extra authentication.kubernetes.io/node-name)"),
    ],
    ids=["another-node-named-in-the-answer", "stored-slice-of-another-node", "token-without-node-name"],
)
def test_a_refusal_gives_exactly_one_reason_that_names_the_node(request_: Request, says: str) -> None:
    (message,) = ADMISSION.admit(request_).messages
    assert says in message


@pytest.mark.parametrize("api_version", API_VERSIONS)
def test_the_slices_the_driver_builds_pass_on_their_node_and_fail_on_another(api_version: str) -> None:
    devices, _ = build_devices(FakeNvml.from_machine("dgx1-v100"), topology_of("dgx1-v100"))
    slices = build_slices(devices, node_name="n1", driver_name=DRIVER, generation=3, api_version=api_version)
    for obj in slices:
        assert ADMISSION.admit(create(obj, version=api_version)).allowed
        assert ADMISSION.admit(update(obj, obj)).allowed
        assert ADMISSION.admit(delete(obj)).allowed
        stranger = Request("CREATE", SA, on_node("n2"), obj, None, api_version)
        assert not ADMISSION.admit(stranger).allowed


@pytest.mark.parametrize("expression", expressions(POLICY))
def test_every_expression_parses_as_standard_cel(expression: str) -> None:
    env = celpy.Environment()
    assert env.compile(expression) is not None  # CELParseError otherwise


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_the_policy_names_the_account_that_the_rbac_binds_and_the_daemonset_runs(name: str) -> None:
    objects = render(name)
    (subject,) = one(objects, "ClusterRoleBinding")["subjects"]
    daemonset = one(objects, "DaemonSet")
    assert (daemonset["spec"]["template"]["spec"]["serviceAccountName"], daemonset["metadata"]["namespace"]) == (
        subject["name"],
        subject["namespace"],
    )
    policy = one(objects, "ValidatingAdmissionPolicy")
    own = Request("CREATE", f"system:serviceaccount:{subject['namespace']}:{subject['name']}", {}, slice_on("n1"), None)
    assert AdmissionPolicy(policy).admit(own).matched  # renamed account or namespace: this policy would miss it


def test_every_kustomization_that_deploys_the_driver_is_checked() -> None:
    assert {"dra", "dra/driver", "dra/extended-resource"} <= set(KUSTOMIZATIONS)


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_the_binding_denies_with_the_policy_and_nothing_is_left_to_params(name: str) -> None:
    objects = render(name)
    policy, binding = one(objects, "ValidatingAdmissionPolicy"), one(objects, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
    assert "paramKind" not in policy["spec"]
    assert policy["spec"]["failurePolicy"] == "Fail"  # an evaluation error refuses, never waves through


def test_the_rules_cover_every_version_the_driver_writes_and_every_write_rbac_grants() -> None:
    (rule,) = POLICY["spec"]["matchConstraints"]["resourceRules"]
    assert (rule["apiGroups"], rule["resources"]) == (["resource.k8s.io"], ["resourceslices"])
    assert set(rule["apiVersions"]) == set(API_VERSIONS)
    role = one(render("dra"), "ClusterRole")
    granted = {v for r in role["rules"] if "resourceslices" in r["resources"] for v in r["verbs"]}
    writes = {RBAC_TO_OPERATIONS[v] for v in granted if v in RBAC_TO_OPERATIONS}
    assert writes == {"CREATE", "UPDATE", "DELETE"}
    assert set(rule["operations"]) == writes
    assert not {"deletecollection", "*"} & granted  # a collection delete would need the policy to see each item


def test_an_expression_that_fails_to_evaluate_refuses_under_failure_policy_fail() -> None:
    broken = {**POLICY, "spec": {**POLICY["spec"], "validations": [{"expression": "object.spec.nodeName == 'n1'"}]}}
    verdict = AdmissionPolicy(broken).admit(delete(slice_on("n1")))  # no `object` on DELETE: an evaluation error
    assert (verdict.matched, verdict.allowed) == (True, False)
    assert "policy failed" in verdict.messages[0]
