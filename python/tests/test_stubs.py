"""The typed stubs (shmlink/_shmlink.pyi, read with `ast`) against the extension module: the
public names of the module and of each class it exports are the ones the stub declares, each
as the same kind of member (method, static method, property), and every function and method
takes the parameters the stub gives it.

A name the stub declares with an annotation only (``pid: int`` on an exception) is an instance
attribute, which the module sets on the exceptions it raises: `dir()` of the class cannot see
it, so it is left out of the comparison (the tests that raise those errors read them)."""

import ast
import inspect
import pathlib

import pytest
from shmlink import _shmlink

STUB = pathlib.Path(__file__).resolve().parents[1] / "shmlink" / "_shmlink.pyi"


def public(names):
    return {n for n in names if not n.startswith("_")}


class Stub:
    """The declarations of a stub file: its classes, functions and values."""

    def __init__(self, path):
        tree = ast.parse(path.read_text(), filename=str(path))
        self.classes = {}
        self.functions = {}
        self.values = set()
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
            elif isinstance(node, ast.FunctionDef):
                self.functions[node.name] = node
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                self.values.add(node.target.id)
            elif isinstance(node, ast.Assign):
                self.values.update(t.id for t in node.targets if isinstance(t, ast.Name))

    def names(self):
        return set(self.classes) | set(self.functions) | self.values

    def members(self, name):
        """What class `name` declares, with what its bases in the stub declare: name ->
        (kind, the `FunctionDef` or None). Kinds: method, staticmethod, property, attribute."""
        node = self.classes[name]
        found = {}
        for base in node.bases:
            if isinstance(base, ast.Name) and base.id in self.classes:
                found.update(self.members(base.id))
        for item in node.body:
            if isinstance(item, ast.FunctionDef):
                decorators = [ast.unparse(d) for d in item.decorator_list]
                if any(d.endswith(".setter") for d in decorators):
                    continue
                if "property" in decorators:
                    found[item.name] = ("property", None)
                elif "staticmethod" in decorators:
                    found[item.name] = ("staticmethod", item)
                else:
                    found[item.name] = ("method", item)
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                found[item.target.id] = ("attribute", None)
        return found


STUBS = Stub(STUB)
CLASSES = sorted(n for n in public(dir(_shmlink)) if isinstance(getattr(_shmlink, n), type))


def runtime_members(cls):
    """The public members of `cls` that it or a base of the module defines (not those of a
    built-in base such as `Exception`): name -> (kind, the object)."""
    inherited = set()
    for base in cls.__mro__:
        if base.__module__ == "builtins":
            inherited.update(dir(base))
    found = {}
    for name in public(dir(cls)) - inherited:
        raw = next(b.__dict__[name] for b in cls.__mro__ if name in b.__dict__)
        if isinstance(raw, staticmethod):
            kind = "staticmethod"
        elif inspect.isdatadescriptor(raw):
            kind = "property"
        else:
            kind = "method"
        found[name] = (kind, getattr(cls, name))
    return found


def differences(what, in_module, in_stub):
    """The names missing on either side, as one message (empty when there are none)."""
    missing = sorted(in_module - in_stub)
    extra = sorted(in_stub - in_module)
    parts = []
    if missing:
        parts.append(f"{what}: in the module, not declared in the stub: {missing}")
    if extra:
        parts.append(f"{what}: declared in the stub, not in the module: {extra}")
    return "; ".join(parts)


def stub_parameters(func, kind):
    """The parameters of a stub function as (name, has a default) pairs, `self` left out."""
    a = func.args
    positional = a.posonlyargs + a.args
    defaults = [False] * (len(positional) - len(a.defaults)) + [True] * len(a.defaults)
    params = list(zip((p.arg for p in positional), defaults, strict=True))
    if kind == "method":
        params = params[1:]
    if a.vararg:
        params.append(("*" + a.vararg.arg, False))
    params += [(p.arg, d is not None) for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)]
    if a.kwarg:
        params.append(("**" + a.kwarg.arg, False))
    return params


def runtime_parameters(obj, kind):
    """The parameters of a function or method of the module, as `stub_parameters` gives them."""
    params = []
    for p in inspect.signature(obj).parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            params.append(("*" + p.name, False))
        elif p.kind is p.VAR_KEYWORD:
            params.append(("**" + p.name, False))
        else:
            params.append((p.name, p.default is not p.empty))
    if kind == "method" and not isinstance(obj, type):
        params = params[1:]
    return params


def test_the_stub_declares_every_public_name_of_the_module_and_nothing_else():
    message = differences("the module", public(dir(_shmlink)), public(STUBS.names()))
    assert not message, message


@pytest.mark.parametrize("name", CLASSES)
def test_each_class_has_exactly_the_public_members_its_stub_declares(name):
    assert name in STUBS.classes, f"class {name} is not declared in the stub"
    declared = STUBS.members(name)
    declared_names = {n for n, (kind, _) in declared.items() if kind != "attribute"}
    runtime = runtime_members(getattr(_shmlink, name))
    message = differences(f"class {name}", set(runtime), public(declared_names))
    assert not message, message
    kinds = [
        f"{n}: {runtime[n][0]} in the module, {declared[n][0]} in the stub"
        for n in sorted(runtime)
        if runtime[n][0] != declared[n][0]
    ]
    assert not kinds, f"class {name}: {kinds}"


def test_every_function_and_method_takes_the_parameters_its_stub_declares():
    pairs = [
        (f"{n}()", getattr(_shmlink, n), "function", f)
        for n, f in STUBS.functions.items()
        if hasattr(_shmlink, n)
    ]
    for name in CLASSES:
        if name not in STUBS.classes:
            continue
        cls = getattr(_shmlink, name)
        runtime = runtime_members(cls)
        for member, (kind, func) in STUBS.members(name).items():
            if func is not None and member in runtime:
                pairs.append((f"{name}.{member}()", runtime[member][1], kind, func))
        for init in STUBS.classes[name].body:
            if isinstance(init, ast.FunctionDef) and init.name == "__init__":
                pairs.append((f"{name}()", cls, "method", init))
    assert pairs
    wrong = []
    for what, obj, kind, func in pairs:
        got, declared = runtime_parameters(obj, kind), stub_parameters(func, kind)
        if got != declared:
            wrong.append(f"{what}: {got} in the module, {declared} in the stub")
    assert not wrong, "\n".join(wrong)
