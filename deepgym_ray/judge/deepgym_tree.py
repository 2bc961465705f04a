"""A solution of several files imported from memory in the solution process (stdlib only).

Part of the solution process's program (``deepgym_proc.WORKER_PARTS``). ``load_files`` sends
the files (relative path -> source) and the module to return; :func:`import_tree` puts a finder
first on ``sys.meta_path`` that serves the tree's modules (``pkg/__init__.py`` a package,
``pkg/mod.py`` its module ``pkg.mod``, a folder without ``__init__.py`` an empty package) and
imports the entry through Python's own import system, so modules importing each other, in a
cycle too, behave as they would from a folder. Nothing is written to disk.

Example (what the worker does with a ``load`` message that has files):
    module = import_tree({"pkg/__init__.py": "", "pkg/a.py": "from pkg import b"}, "pkg.a", cwd)
"""

import os
import sys

__all__ = ["TreeFinder", "import_tree"]


class TreeFinder:
    """Finds and loads the modules of an in-memory tree of files (a meta path finder)."""

    def __init__(self, files, base):
        self.files, self.base, self.modules = files, base, {}
        for path in files:
            parts = path[:-3].split("/") if path.endswith(".py") else []
            if not parts or not all(part.isidentifier() for part in parts):
                continue  # not a module Python could import by name
            package = parts[-1] == "__init__"
            if package:
                parts.pop()
            if parts:
                self.modules[".".join(parts)] = (path, package)
        for name in list(self.modules):  # the folders above a module are packages
            while "." in name:
                name = name.rpartition(".")[0]
                self.modules.setdefault(name, (None, True))

    def find_spec(self, name, path=None, target=None):
        found = self.modules.get(name)
        if found is None:
            return None
        from importlib.machinery import ModuleSpec

        where = os.path.join(self.base, found[0] or name.replace(".", "/"))
        spec = ModuleSpec(name, self, origin=where, is_package=found[1])
        spec.has_location = found[0] is not None  # sets __file__
        if found[1]:
            spec.submodule_search_locations = [os.path.join(self.base, *name.split("."))]
        return spec

    def create_module(self, spec):
        return None  # a plain module

    def exec_module(self, module):
        path = self.modules[module.__name__][0]
        if path is not None:
            code = compile(self.files[path], os.path.join(self.base, path), "exec")
            exec(code, module.__dict__)


def import_tree(files, entry, base):
    """Import module ``entry`` of the tree ``files`` (see the module docstring)."""
    sys.meta_path.insert(0, TreeFinder(files, base))
    import importlib

    return importlib.import_module(entry)
