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


def bound_parameters(function: Any) -> list[str]:
    """Parameter names from pybind11's signature line: name(self: T, a: T, *, b: T = d) -> R."""
    signature = (function.__doc__ or "").splitlines()[0]
    inside = signature[signature.index("(") + 1 : signature.rindex(") ->")]
    names = [part.split(":")[0].split("=")[0].strip() for part in split_top_level(inside)]
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
