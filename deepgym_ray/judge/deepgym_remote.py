"""The solution's module and objects as a verifier sees them (stdlib only).

:class:`SolutionModule` (what ``load_solution`` returns) stands for the solution's module:
``dir``, ``hasattr``, ``getattr`` with a default, ``vars(...)``, ``__name__``, ``__doc__``,
constants read as plain values, functions and classes called by name. A value that is not plain
data stays in the solution process and arrives as a :class:`SolutionObject`, a handle: its
attributes, methods, items, length, truth and iteration are looked up there, one exchange each
under the call timeout. A handle never runs anything here: like every value that is not plain
data it equals nothing (``is`` still tells it apart), its hash and repr are local, and it can be
passed back to the solution as an argument. A solution-defined exception class arrives as a
local subclass of its builtin base (``deepgym_wire``).

Example (inside a verifier):
    sol = load_solution(solution_path)
    "twoSum" in dir(sol.Solution)                   # names
    sol.Solution().twoSum([2, 7, 11, 15], 9)        # [0, 1]: one exchange
    cache = sol.LRUCache(2); cache.put(1, 1); cache.get(1)
    list(itertools.islice(sol.primes(), 5))         # a generator, step by step
"""

from deepgym_wire import OpaqueValue

# Dunder names looked up in the solution process. Every other dunder is the handle's own or
# missing: Python's machinery (copy, pickle, length hints, unwrap) probes many, and a probe
# must not cost an exchange or run the solution's code.
_REMOTE_DUNDERS = frozenset({"__name__", "__qualname__", "__annotations__", "__defaults__",
                             "__kwdefaults__", "__all__", "__version__", "__self__", "__func__",
                             "__bases__", "__mro__", "__code__"})
_SLOTS = frozenset({"_conn", "_hid", "_path", "_info", "_gen", "_exports", "_owner",
                    "description"})


def _own(obj, name, value):
    object.__setattr__(obj, name, value)


class SolutionObject(OpaqueValue):
    """A handle to an object in the solution process (see the module docstring). Like any
    value that is not plain data it is an :class:`OpaqueValue`: it equals nothing."""

    __slots__ = ("_conn", "_hid", "_path", "_info", "_gen", "_exports", "_owner", "__weakref__")

    def __init__(self, conn, hid, path=(), info=None, owner=None):
        for name, value in (("_conn", conn), ("_hid", hid), ("_path", path), ("_info", info),
                            ("_gen", conn.generation), ("_exports", 0), ("_owner", owner),
                            ("description", info[1] if info else ".".join(path))):
            _own(self, name, value)

    def _ask(self, op, attr=None, args=None, sync=False, kwargs=None):
        return self._conn.request(op, self, attr=attr, args=args, kwargs=kwargs, sync=sync)

    def __getattr__(self, name):
        if name in _SLOTS or (name[:2] == "__" and name[-2:] == "__"
                              and name not in _REMOTE_DUNDERS):
            raise AttributeError(name)
        info = self._info
        if info is not None and name in info[3]:  # a method: called in one exchange
            return SolutionMember(self._conn, self._hid, self._path + (name,), owner=self)
        return self._ask("get", attr=name)

    def __setattr__(self, name, value):
        self._ask("set", attr=name, args=(value,))

    def __delattr__(self, name):
        self._ask("del", attr=name)

    def __dir__(self):
        return self._ask("dir")

    @property
    def __dict__(self):
        return self._ask("vars")

    @property
    def __signature__(self):
        return build_signature(self._ask("sig"))

    def __repr__(self):
        if self._info is None:
            return f"<solution attribute {'.'.join(self._path)}>"
        return f"<solution {self._info[1]} object>"

    def __bool__(self):
        if self._info is not None and "b" not in self._info[0]:
            return True  # no __bool__ or __len__: true, as in one process
        return self._ask("truth")

    def __len__(self):
        if self._info is not None and "b" not in self._info[0]:
            raise TypeError(f"object of type {self._info[1]!r} has no len()")
        return self._ask("len")

    def __iter__(self):
        return self._ask("iter")

    def __contains__(self, item):
        return self._ask("contains", args=(item,))

    def __getitem__(self, key):
        return self._ask("getitem", args=(key,))

    def __setitem__(self, key, value):
        self._ask("setitem", args=(key, value))

    def __delitem__(self, key):
        self._ask("delitem", args=(key,))

    def __instancecheck__(self, obj):
        try:
            return self._ask("isinstance", args=(obj,)) is True
        except TypeError:  # a local object that cannot cross: not an instance of theirs
            return False

    # A handle is a reference: a copy is the same reference (a second local object would
    # release the solution's object twice), and it never travels as a pickle.
    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce_ex__(self, protocol):
        raise TypeError("a handle to the solution's object cannot be pickled")

    def __del__(self):
        try:
            if self._exports:
                self._conn.released.append((self._gen, self._hid, self._exports))
        except AttributeError:
            pass


class SolutionCallable(SolutionObject):
    """A handle to a callable object (a function, a class, a bound method)."""

    __slots__ = ()

    def __call__(self, *args, **kwargs):
        return self._ask("call", args=args, kwargs=kwargs, sync=True)


class SolutionIterator(SolutionObject):
    """A handle to an iterator or generator: each ``next`` is one exchange."""

    __slots__ = ()

    def __iter__(self):
        return self

    def __next__(self):
        return self._ask("next")


class _CallableIterator(SolutionIterator, SolutionCallable):
    __slots__ = ()


class SolutionMember(SolutionCallable):
    """``owner.name`` for a callable name (a module's function or class, an instance's
    method): calling it is one exchange; anything else looks the attribute up first."""

    __slots__ = ()


def _remote_doc(self):
    return self._ask("get", attr="__doc__")


# ``obj.__doc__`` is the solution object's docstring (the classes' own are in their source).
for _kind in (SolutionObject, SolutionCallable, SolutionIterator, _CallableIterator,
              SolutionMember):
    _kind.__doc__ = property(_remote_doc)

_KINDS = {"": SolutionObject, "c": SolutionCallable, "i": SolutionIterator,
          "ci": _CallableIterator}


def make_handle(conn, hid, info):
    """A handle of the right kind for ``info`` = (flags, type name, name, methods, base)."""
    flags = info[0]
    kind = ("c" if "c" in flags else "") + ("i" if "i" in flags else "")
    return _KINDS[kind](conn, hid, (), info)


def bump_exports(obj):
    """Count one more export of ``obj``'s handle (released together when it is dropped)."""
    _own(obj, "_exports", obj._exports + 1)


class _Text(str):
    """An annotation as the solution wrote it; shown as written (``b: int``, not ``b: 'int'``)."""

    __slots__ = ()

    def __repr__(self):
        return str.__str__(self)


def build_signature(raw):
    """An ``inspect.Signature`` from the solution's description: parameters with their kinds,
    defaults (plain values or handles) and annotations as text."""
    import inspect

    if type(raw) is not list or len(raw) != 2 or type(raw[0]) is not list:
        raise ValueError("malformed signature")
    params = []
    for item in raw[0]:
        if type(item) is not list or len(item) != 5 or item[1] not in range(5):
            raise ValueError("malformed signature")
        name, kind, has_default, default, annotation = item
        params.append(inspect.Parameter(
            str(name), inspect._ParameterKind(kind),
            default=default if has_default is True else inspect.Parameter.empty,
            annotation=_Text(annotation) if type(annotation) is str else inspect.Parameter.empty))
    returns = _Text(raw[1]) if type(raw[1]) is str else inspect.Signature.empty
    return inspect.Signature(params, return_annotation=returns)


class SolutionModule:
    """The solution's module (see the module docstring). ``get``, ``close`` and ``output`` are
    this object's own only when the solution defines no such name."""

    __slots__ = ("_conn", "_names", "_members", "_name", "_file", "_module_doc", "_hid",
                 "_path", "_gen")

    def __init__(self, conn, names, name, path, doc):
        for key, value in (("_conn", conn), ("_names", names), ("_members", {}), ("_name", name),
                           ("_file", path), ("_module_doc", doc), ("_hid", 0), ("_path", ()),
                           ("_gen", None)):
            _own(self, key, value)

    def __getattr__(self, name):
        if name in _SLOTS or name == "_names":
            raise AttributeError(name)
        kind = self._names.get(name)
        if kind == "c":
            member = self._members.get(name)
            if member is None:
                member = self._members[name] = SolutionMember(self._conn, 0, (name,), owner=self)
            return member
        if kind is not None and kind != "v":
            return kind  # a solution-defined exception class, as its local stand-in
        if kind is None:
            if name == "__name__":
                return self._name
            if name == "__file__":
                return self._file
            if name in _OWN_API:
                return getattr(self, "_api_" + name)
            if name[:2] == "__" and name[-2:] == "__" and name not in _REMOTE_DUNDERS:
                raise AttributeError(name)
        return self._conn.request("get", self, attr=name)

    def __setattr__(self, name, value):
        self._conn.request("set", self, attr=name, args=(value,))

    def __delattr__(self, name):
        self._conn.request("del", self, attr=name)

    def __dir__(self):
        return self._conn.request("dir", self)

    @property
    def __dict__(self):
        return self._conn.request("vars", self)

    @property
    def __doc__(self):
        return self._module_doc

    def __repr__(self):
        return f"<solution module {self._name!r}>"

    def _api_get(self, name):
        """The value of a module-level name."""
        return self._conn.request("get", self, attr=name)

    def _api_close(self):
        """Stop the solution process now (it is stopped at the end of the run anyway)."""
        self._conn.stop()

    @property
    def _api_output(self):
        """What the solution printed so far (bounded)."""
        drain = self._conn.output
        return drain.text() if drain is not None else ""


_OWN_API = frozenset({"get", "close", "output"})
