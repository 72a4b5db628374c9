"""torchdata_s3/_core.pyi matches the native module: the same functions, classes and members, and the same
parameter names, so that type checkers and readers of the stub see what the binding really offers."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import pytest

import torchdata_s3
from torchdata_s3 import _core

STUB = Path(torchdata_s3.__file__).with_name("_core.pyi")
# Members pybind11 adds to every class or that the buffer protocol stands for.
NOT_BOUND_BY_US = {"__init__", "__module__", "__doc__", "__dict__", "__weakref__", "_pybind11_conduit_v1_"}


def stub_tree() -> dict[str, Any]:
    """{name: [parameter names]} for functions; {name: {member: [parameter names] or None}} for classes."""
    tree: dict[str, Any] = {}
    for node in ast.parse(STUB.read_text()).body:
        if isinstance(node, ast.FunctionDef):
            tree[node.name] = parameters_of(node)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            tree[node.target.id] = None  # a module constant
        elif isinstance(node, ast.ClassDef):
            members: dict[str, Any] = {}
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    is_property = any(getattr(d, "id", "") == "property" for d in item.decorator_list)
                    members[item.name] = None if is_property else parameters_of(item)
            tree[node.name] = members
    return tree


def parameters_of(function: ast.FunctionDef) -> list[str]:
    arguments = function.args
    names = [a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs]
    if arguments.vararg:
        names.append("*" + arguments.vararg.arg)
    return [name for name in names if name != "self"]


def split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        depth += (char in "[(" and 1) or ((char in "])" and -1) or 0)
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current.strip())
    return parts


def signature_parts(function: Any) -> list[str]:
    """The parameters of pybind11's signature line, name(self: T, a: T, *, b: T = d) -> R, as written."""
    signature = (function.__doc__ or "").splitlines()[0]
    return split_top_level(signature[signature.index("(") + 1 : signature.rindex(") ->")])


def bound_parameters(function: Any) -> list[str]:
    """Parameter names from pybind11's signature line."""
    names = [part.split(":")[0].split("=")[0].strip() for part in signature_parts(function)]
    return [name for name in names if name not in ("self", "*", "")]


def runtime_members(cls: type) -> dict[str, Any]:
    members = {}
    for name, value in vars(cls).items():
        if name in NOT_BOUND_BY_US:
            continue
        if isinstance(value, property):
            members[name] = None
        else:
            members[name] = bound_parameters(value)
    return members


def test_the_module_level_names_match() -> None:
    runtime = {name for name in vars(_core) if not name.startswith("__") or name == "__version__"}
    stub = set(stub_tree())
    assert stub == runtime


@pytest.mark.parametrize(
    "name",
    [
        "set_error_factory",
        "enable_crt_logging",
        "parse_list_objects_v2",
        "encode_path",
        "crc32c",
        "crc64nvme",
    ],
)
def test_function_parameters_match(name: str) -> None:
    assert stub_tree()[name] == bound_parameters(getattr(_core, name))


@pytest.mark.parametrize("name", ["Buffer", "ObjectStream", "S3Client"])
def test_class_members_and_parameters_match(name: str) -> None:
    stub = stub_tree()[name]
    runtime = runtime_members(getattr(_core, name))
    stub.pop("__buffer__", None)  # the buffer protocol, not a method pybind11 binds
    runtime_init = bound_parameters(getattr(_core, name).__init__) if "__init__" in stub else None
    if runtime_init is not None:
        assert stub.pop("__init__") == runtime_init
    assert stub == runtime
    assert inspect.isclass(getattr(_core, name))


# pybind11's names for the scalar types a parameter converts from, and the stub's name for each.
SCALARS = {
    "str": "str",
    "bytes": "bytes",
    "bool": "bool",
    "typing.SupportsInt | typing.SupportsIndex": "int",
    "typing.SupportsFloat | typing.SupportsIndex": "float",
}


def bound_scalar_types(function: Any) -> dict[str, str]:
    """{parameter: stub type} for the parameters pybind11's signature line gives a scalar type."""
    types = {}
    for part in signature_parts(function):
        name, _, annotation = part.split("=")[0].partition(":")
        if annotation.strip() in SCALARS:
            types[name.strip()] = SCALARS[annotation.strip()]
    return types


def stub_annotations() -> dict[str, dict[str, str]]:
    """{"function" or "Class.method": {parameter: annotation as written}} from the stub."""
    found: dict[str, dict[str, str]] = {}

    def add(qualified: str, function: ast.FunctionDef) -> None:
        arguments = function.args
        found[qualified] = {
            a.arg: ast.unparse(a.annotation)
            for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs
            if a.annotation is not None
        }

    for node in ast.parse(STUB.read_text()).body:
        if isinstance(node, ast.FunctionDef):
            add(node.name, node)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    add(f"{node.name}.{item.name}", item)
    return found


def test_scalar_parameter_types_match() -> None:
    # A stub that says int where the binding takes str sends type checkers and readers the wrong way.
    stub = stub_annotations()
    mismatched = []
    for qualified, written in stub.items():
        owner, _, member = qualified.rpartition(".")
        bound = getattr(getattr(_core, owner), member, None) if owner else getattr(_core, qualified)
        if bound is None or ") ->" not in (getattr(bound, "__doc__", None) or "").partition("\n")[0]:
            continue  # no signature line: __buffer__ (buffer protocol), properties, constructors not bound
        for parameter, expected in bound_scalar_types(bound).items():
            if parameter in written and written[parameter] != expected:
                mismatched.append(f"{qualified}({parameter}: {written[parameter]}), bound as {expected}")
    assert not mismatched, mismatched
