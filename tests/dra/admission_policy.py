"""A ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1) evaluated offline, its CEL run by cel-python.

Responsibility: the steps the API server takes for one admission request and one policy with a Deny binding
and no params: match the request against `matchConstraints.resourceRules`, then every `matchConditions`
expression (all true, or the policy does not apply), then compute `variables` in order (exposed to later
expressions as `variables.<name>`), then every `validations` expression; a false one denies with its
`messageExpression` (else `message`, else the expression). An expression that fails to evaluate, or that
gives no bool, follows `failurePolicy` (Fail denies, Ignore lets the request pass that policy).

Boundary, and the gaps to Kubernetes, kept small on purpose:
- the CEL is cel-python's (a real evaluator of the CEL spec), not cel-go with Kubernetes' libraries: no
  type check against the OpenAPI schema at creation, no cost limit, no Kubernetes extension functions
  (the policy uses none); so the expressions stay within standard CEL that both accept. One known
  difference: cel-python answers `has()` on a null object with false where cel-go fails; the policy tests
  the operation before it reads `object` or `oldObject`, so it never asks either;
- the API server computes variables lazily; here they are computed before the validations (the policy's
  variables never fail, so the answers are the same);
- no conversion between versions (matchPolicy Equivalent): a request matches only a version the rules
  list, so the tests check that the rules list every version the driver writes;
- what the request holds: the AdmissionRequest fields the policy reads (operation, resource, userInfo),
  with `object` null on DELETE and `oldObject` null on CREATE, as the API server passes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import celpy
from celpy import celtypes

Obj = dict[str, Any]
GROUP, RESOURCE = "resource.k8s.io", "resourceslices"


class PolicyError(RuntimeError):
    """An expression failed to evaluate, or gave something other than what its place needs."""


@dataclass(frozen=True)
class Verdict:
    matched: bool  # the policy applies to the request (rules and matchConditions)
    allowed: bool
    messages: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class Request:
    operation: str  # CREATE, UPDATE, DELETE
    username: str
    extra: dict[str, list[str]]
    object: Obj | None  # the new object: None on DELETE
    old_object: Obj | None  # the stored object: None on CREATE
    version: str = "v1"
    group: str = GROUP
    resource: str = RESOURCE

    def as_cel(self) -> Obj:
        request = {
            "operation": self.operation,
            "resource": {"group": self.group, "version": self.version, "resource": self.resource},
            "userInfo": {"username": self.username, "extra": self.extra},
        }
        return {"request": request, "object": self.object, "oldObject": self.old_object}


class AdmissionPolicy:
    def __init__(self, policy: Obj) -> None:
        self.spec = policy["spec"]
        self._env = celpy.Environment()
        self._programs: dict[str, celpy.Runner] = {}
        for expression in expressions(policy):
            self._programs[expression] = self._env.program(self._env.compile(expression))

    def matches_rules(self, request: Request) -> bool:
        def listed(value: str, values: list[str]) -> bool:
            return "*" in values or value in values

        return any(
            listed(request.group, rule["apiGroups"])
            and listed(request.version, rule["apiVersions"])
            and listed(request.operation, rule["operations"])
            and listed(request.resource, rule["resources"])
            for rule in self.spec["matchConstraints"]["resourceRules"]
        )

    def admit(self, request: Request) -> Verdict:
        if not self.matches_rules(request):
            return Verdict(matched=False, allowed=True)
        activation: dict[str, Any] = {name: celpy.json_to_cel(value) for name, value in request.as_cel().items()}
        try:
            for condition in self.spec.get("matchConditions", []):
                if not self._boolean(condition["expression"], activation):
                    return Verdict(matched=False, allowed=True)
            computed: dict[celtypes.StringType, Any] = {}
            for variable in self.spec.get("variables", []):
                activation["variables"] = celtypes.MapType(computed)
                computed[celtypes.StringType(variable["name"])] = self._value(variable["expression"], activation)
            activation["variables"] = celtypes.MapType(computed)
            messages = [
                self._message(validation, activation)
                for validation in self.spec["validations"]
                if not self._boolean(validation["expression"], activation)
            ]
        except PolicyError as error:
            if self.spec.get("failurePolicy", "Fail") == "Fail":
                return Verdict(matched=True, allowed=False, messages=(f"policy failed: {error}",))
            return Verdict(matched=True, allowed=True)
        return Verdict(matched=True, allowed=not messages, messages=tuple(messages))

    def _value(self, expression: str, activation: dict[str, Any]) -> Any:
        try:
            result = self._programs[expression].evaluate(activation)
        except celpy.CELEvalError as error:
            raise PolicyError(f"{expression!r}: {error}") from error
        if isinstance(result, celpy.CELEvalError):
            raise PolicyError(f"{expression!r}: {result}")
        return result

    def _boolean(self, expression: str, activation: dict[str, Any]) -> bool:
        result = self._value(expression, activation)
        if not isinstance(result, celtypes.BoolType | bool):
            raise PolicyError(f"{expression!r} gave {type(result).__name__}, not a bool")
        return bool(result)

    def _message(self, validation: Obj, activation: dict[str, Any]) -> str:
        if "messageExpression" in validation:
            try:
                text = self._value(validation["messageExpression"], activation)
            except PolicyError:
                text = None  # as the API server does: fall back to the static message
            if isinstance(text, str) and text.strip():  # StringType is a str; a concatenation gives a plain str
                return str(text)
        return str(validation.get("message") or f"failed expression: {validation['expression']}")


def expressions(policy: Obj) -> list[str]:
    """Every CEL expression of the policy, in the order the API server meets them."""
    spec = policy["spec"]
    found = [c["expression"] for c in spec.get("matchConditions", [])]
    found += [v["expression"] for v in spec.get("variables", [])]
    for validation in spec["validations"]:
        found += [validation[key] for key in ("expression", "messageExpression") if key in validation]
    return found
