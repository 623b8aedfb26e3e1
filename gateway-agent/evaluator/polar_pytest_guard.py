"""Polar's pytest runner guard.

The gateway loads this module as a pytest plugin (``-p polar_pytest_guard`` through
PYTEST_ADDOPTS, its folder on PYTHONPATH) when a patch evaluator runs a pytest test command. It is
imported while pytest reads its command line: after pytest's own modules and before any conftest,
test module or code under test. From then on it records every test's outcome itself, in a frame
of its own around the test function, and hands the records to the gateway in a file whose every
line carries an HMAC under a key that only the guard's audit hook holds. The gateway accepts a
test the JUnit report passes only when the guard saw that test function return; patching pytest's
reporting (TestReport, the runner, the JUnit writer, the terminal, the exit status) no longer
changes a grade, it disagrees with the records (verdict ``runner_tampered``).

Measures, each checked by the tampering battery (gateway-agent/tampering.test.ts):

- Outcomes from the test call itself: a pytest_pyfunc_call hookwrapper puts a shim in place of
  the item's function for the call; the shim calls the function and records what it raised
  (nothing: passed; Skipped; XFailed; anything else: failed) before pytest sees it. The function
  must be the object collection found for that item, and its code must come from the item's file
  with the item's name.
- Records only from the guard's own frames, called by pytest: every record request goes through
  ``sys.audit`` to the audit hook, which checks that the calling frame is the guard's and that
  every frame below it, down to this session's ``wrap_session``, runs code that was loaded before
  any conftest or test module (or code of a protected file the hook verified), with the guard's
  frame once. A forged ``sys.audit`` call, a call of the shim from a thread or from inside a
  test is a violation.
- The key: read from a file the gateway wrote and unlinked before any untrusted code runs; kept
  only in the audit hook's closure (audit hooks cannot be removed). Records are MAC'd with
  ``_hashlib.hmac_digest`` (C): no Python-level function the code under test could patch ever
  sees the key or a record before it is signed. The hook and the shim use no global names.
- Protected test files (the list the gateway writes): hashed when the guard loads; source compiled
  under such a name must have that content; a module of such a file executes only after a
  verified compile (pytest's cached rewrites are not read), so rewriting a test file on disk
  during the run, a forged .pyc or a crafted code object claiming the file is a violation.
- Refused with a violation: gc.get_objects/get_referrers/get_referents, sys._current_frames,
  sys.settrace/setprofile (and sys.monitoring callbacks), reaching the hook's frame through
  sys._getframe, replacing __code__/__defaults__ of the guard's functions, opening this process's
  /proc/<pid>/mem or environ, code or functions made for protected files, and importing ctypes
  from the repository's code (ImportError): its pointers read and write memory without an audit
  event. An installed library may import it (numpy does); that is written down as a note.
- The process: not dumpable (prctl), so its child processes cannot ptrace it or open its
  /proc/<pid>/mem, fd or environ without CAP_SYS_PTRACE; where Landlock is available, no
  process of the run can write under /proc (no_new_privs is set for that).
- At the end: pytest's, pluggy's and the guard's module and class attributes, and builtins, are
  compared with a snapshot taken at load; a change is a violation.

What it cannot close is listed in docs/evaluators.md ("The runner guard").

The record format (one line each, tab-separated, ASCII): ``seq pid kind fields... mac``, where
mac = hex HMAC-SHA256(key, the line before the last tab) and string fields are hex-encoded UTF-8.
"""

import sys


def _install():  # noqa: C901 - one closure on purpose: what it captures is reachable from nowhere
    import os

    env = os.environ
    home = env.get("POLAR_PYTEST_GUARD")
    if not home:
        return None
    # Children of the run (a pytest started by a test) see the environment the task had.
    del env["POLAR_PYTEST_GUARD"]
    path_var = env.get("PYTHONPATH", "")
    if path_var == home:
        del env["PYTHONPATH"]
    elif path_var.startswith(home + os.pathsep):
        env["PYTHONPATH"] = path_var[len(home) + 1 :]
    flag = "-p polar_pytest_guard"
    addopts = env.get("PYTEST_ADDOPTS", "")
    if addopts == flag:
        del env["PYTEST_ADDOPTS"]
    elif addopts.startswith(flag + " "):
        env["PYTEST_ADDOPTS"] = addopts[len(flag) + 1 :]
    while home in sys.path:
        sys.path.remove(home)
    try:
        key_fd = os.open(os.path.join(home, "key"), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None  # a second pytest run of the same command: the key went to the first
    try:
        key = bytes.fromhex(os.read(key_fd, 4096).decode("ascii").strip())
    finally:
        os.close(key_fd)
    os.unlink(os.path.join(home, "key"))
    with open(os.path.join(home, "config"), "rb") as f:
        lines = f.read().decode("utf-8", "surrogateescape").split("\n")
    root = lines[0]
    root_slash = root.rstrip("/") + "/"
    out = os.open(
        os.path.join(home, "records"),
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o644,
    )

    import hashlib

    def digest_of(data):
        return hashlib.sha256(data).hexdigest()

    # Protected files (relative to the repository): their content now, before untrusted code runs.
    manifest = {}
    for rel in lines[1:]:
        if not rel:
            continue
        full = root_slash + rel
        try:
            with open(full, "rb") as f:
                manifest[full] = digest_of(f.read())
        except OSError:
            pass

    import _pytest
    import _pytest.assertion.rewrite as rewrite
    import _pytest.config
    import _pytest.main
    import _pytest.outcomes
    import _pytest.python
    import _pytest.unittest
    import importlib._bootstrap_external as bootstrap_external
    import pytest

    runner_under_test = any(
        (getattr(m, "__file__", None) or "").startswith(root_slash) for m in (_pytest, pytest, sys.modules.get("pluggy"))
    )

    measures = {"dumpable": 1, "landlock": 0, "ctypes": "refused"}
    had_ctypes = any(name == "_ctypes" or name == "ctypes" or name.startswith("ctypes.") for name in sys.modules)
    if had_ctypes:
        measures["ctypes"] = "loaded_before_guard"
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(4, 0, 0, 0, 0) == 0:  # PR_SET_DUMPABLE 0
            measures["dumpable"] = 0
        measures["landlock"] = _landlock(ctypes, libc, os)
    except Exception:
        pass
    finally:
        libc = ctypes = None
        if not had_ctypes:
            for name in [n for n in sys.modules if n == "_ctypes" or n == "ctypes" or n.startswith("ctypes.")]:
                del sys.modules[name]

    # pytest's cached rewrites are never read: every protected test module is compiled from its
    # source, where the compile check below sees it.
    def no_cached_rewrite(*args, **kwargs):
        return None

    rewrite._read_pyc = no_cached_rewrite

    FunctionType = type(_install)
    CodeType = type(_install.__code__)
    ModuleType = type(sys)
    MethodType = type(digest_of.__get__(0))
    FrameType = type(sys._getframe())

    # ---- trusted code: everything loaded so far, outside the repository -------------------------
    trusted = {}

    def add_code(co):  # also called by the hook: no global names
        todo = [co]
        while todo:
            c = todo.pop()
            if trusted.get(_id(c)) is c:
                continue
            trusted[_id(c)] = c
            for k in c.co_consts:
                if _type(k) is CodeType:
                    todo.append(k)

    def add_object(v, seen):
        if type(v) is FunctionType:
            add_code(v.__code__)
        elif isinstance(v, (staticmethod, classmethod)):
            add_object(v.__func__, seen)
        elif isinstance(v, property):
            for f in (v.fget, v.fset, v.fdel):
                if f is not None:
                    add_object(f, seen)
        elif isinstance(v, type) and id(v) not in seen:
            seen.add(id(v))
            for w in list(vars(v).values()):
                add_object(w, seen)

    def gather(modules, seen):
        for name, m in list(modules.items()):
            if not isinstance(m, ModuleType) or name in seen:
                continue
            seen.add(name)
            file = getattr(m, "__file__", None)
            if type(file) is str and file.startswith(root_slash):
                continue
            try:
                for v in list(vars(m).values()):
                    add_object(v, set())
            except Exception:
                pass

    gathered = set()

    # ---- integrity snapshot: pytest's, pluggy's, the guard's and builtins' functions and classes -
    def watched(name):
        return name in ("pytest", "builtins", "polar_pytest_guard") or name.split(".")[0] in ("_pytest", "pluggy")

    def snapshot_of(m):
        entries = {}
        own = getattr(m, "__name__", "") == "polar_pytest_guard"
        for k, v in list(vars(m).items()):
            if own and not (type(k) is str and k.startswith("pytest_")):
                continue
            if type(k) is str and (callable(v) or isinstance(v, type)):
                entries[k] = v
        classes = []
        mod_name = getattr(m, "__name__", "")
        for k, v in entries.items():
            if isinstance(v, type) and getattr(v, "__module__", None) == mod_name:
                classes.append((mod_name + "." + k, v, dict(vars(v))))
        return (m, entries, classes)

    # ---- the state only the hook reaches -----------------------------------------------------------
    state = {
        "seq": 0,
        "pid": os.getpid(),
        "busy": set(),
        "items": {},
        "verified": {},
        "session_frame": None,
        "main_frame": None,
        "snapshot_done": False,
        "calls": 0,
        "violations": 0,
        "untrusted_early": None,
        "integrity": None,
    }
    try:
        from _hashlib import hmac_digest

        def sign(line, _h=hmac_digest, _k=key):
            return _h(_k, line, "sha256").hex()

    except ImportError:  # no OpenSSL: HMAC by hand over the C SHA-256
        _blk = 64
        _k0 = key.ljust(_blk, b"\0")
        _ipad = bytes(b ^ 0x36 for b in _k0)
        _opad = bytes(b ^ 0x5C for b in _k0)

        def sign(line, _s=hashlib.sha256, _i=_ipad, _o=_opad):
            return _s(_o + _s(_i + line).digest()).hexdigest()

    getpid = os.getpid
    write = os.write
    stat = os.stat
    listdir = os.listdir
    _str = str
    _bytes = bytes
    _int = int
    _type = type
    _id = id
    _len = len
    _tuple = tuple
    _bool = bool
    _getframe = sys._getframe
    _ImportError = ImportError
    _RuntimeError = RuntimeError
    _BaseException = BaseException
    _OSError = OSError
    _ValueError = ValueError
    _set = set
    _dict = dict
    _object = object
    _missing = object()
    _callable = callable
    _staticmethod = staticmethod
    _classmethod = classmethod
    _property = property
    BuiltinType = type(len)
    os_open = os.open
    os_close = os.close
    os_read = os.read
    compile_ = compile
    sha256 = hashlib.sha256
    qualname_of = type.__dict__["__qualname__"].__get__
    from _thread import get_ident

    import gc

    gc_disable = gc.disable
    gc_enable = gc.enable
    gc_isenabled = gc.isenabled
    gc = None
    mro_of = type.__dict__["__mro__"].__get__
    dict_of_type = type.__dict__["__dict__"].__get__
    function_dict = FunctionType.__dict__["__dict__"].__get__
    Function = _pytest.python.Function
    TestCaseFunction = _pytest.unittest.TestCaseFunction
    WRAP_SESSION = _pytest.main.wrap_session.__code__
    CONFIG_MAIN = _pytest.config.main.__code__
    REWRITE_TEST = getattr(getattr(rewrite, "_rewrite_test", None), "__code__", None) or _install.__code__
    SOURCE_TO_CODE = bootstrap_external.SourceLoader.source_to_code.__code__
    rewrite_globals = vars(rewrite)
    try:
        PROC_DEV = os.stat("/proc/self").st_dev
    except OSError:
        PROC_DEV = None
    CO_ASYNC = 0x80 | 0x100 | 0x200  # CO_COROUTINE | CO_ITERABLE_COROUTINE | CO_ASYNC_GENERATOR
    DENIED_IMPORTS = frozenset(("ctypes", "_ctypes", "_testcapi", "_testinternalcapi", "_testbuffer"))
    DENIED_EVENTS = frozenset(
        (
            "gc.get_objects",
            "gc.get_referrers",
            "gc.get_referents",
            "sys._current_frames",
            "sys.settrace",
            "sys.setprofile",
            "sys.monitoring.register_callback",
        )
    )
    OUTCOMES = frozenset(("passed", "failed", "skipped", "xfailed", "awaitable"))
    OUR_CODES = {}  # id -> code: the hook's, its handlers', the shim's and the plugin hooks'
    HOOK_CODES = {}  # id -> code: the hook's and its handlers' (frames that hold the key)

    def hx(s):
        return s.encode("utf-8", "surrogateescape").hex()

    def emit(kind, *fields):
        pid = getpid()
        seq = state["seq"]
        state["seq"] = seq + 1
        line = _str(seq) + "\t" + _str(pid) + "\t" + kind
        if fields:
            line = line + "\t" + "\t".join(fields)
        data = line.encode("ascii")
        try:
            write(out, data + b"\t" + sign(data).encode("ascii") + b"\n")
        except _OSError:
            pass  # a closed or swapped channel: the gateway sees the gap

    def violation(kind, detail):
        state["violations"] = state["violations"] + 1
        emit("violation", kind, hx(detail))

    def where(co):
        return co.co_filename + ":" + co.co_name

    def trusted_code(co):
        return trusted.get(_id(co)) is co

    def stack_ok(frame, stop):
        """Every frame from `frame` down to `stop` runs trusted code, and none is the guard's."""
        f = frame
        while f is not None:
            if f is stop:
                return None
            co = f.f_code
            if OUR_CODES.get(_id(co)) is co:
                return "the guard's own code below the call: " + where(co)
            if not trusted_code(co):
                return "untrusted code below the call: " + where(co)
            f = f.f_back
        return "not called from this session"

    def caller_is(depth, code):
        f = _getframe(depth)
        return f if f.f_code is code else None

    def is_sub(cls, base):
        for k in mro_of(cls):
            if k is base:
                return True
        return False

    def class_trusted(cls):
        """An item class loaded before the tests, or defined (methods and all) by protected files."""
        for k in mro_of(cls):
            if k is Function or k is _object:
                return True
            found = False
            for v in dict_of_type(k).values():
                if _type(v) is FunctionType:
                    if not trusted_code(v.__code__):
                        return False
                    found = True
            if not found and k is not TestCaseFunction and not snapshot_class(k):
                return False
        return True

    trusted_classes = {}

    def snapshot_class(k):
        return trusted_classes.get(_id(k)) is k

    def unwrap_facts(fn, file_suffix, name):
        f = fn
        depth = 0
        while depth < 20:
            depth = depth + 1
            if _type(f) is not FunctionType:
                return False
            co = f.__code__
            if co.co_name == name and (co.co_filename == file_suffix or co.co_filename.endswith("/" + file_suffix)):
                return True
            f = function_dict(f).get("__wrapped__")
        return False

    # ---- event handlers (each returns None, or (exception class, message) to refuse) ----------------
    def on_snapshot(args):
        frame = caller_is(DEPTH, IMPL["load_initial_conftests"])
        if frame is None or state["snapshot_done"] or _len(args) != 1 or _type(args[0]) is not _dict:
            violation("forged_record", "a snapshot request not from the guard's first configure step")
            return None
        state["snapshot_done"] = True
        if state["untrusted_early"] is not None:
            # A module of the repository ran before conftests (a pytest plugin under test).
            emit("note", "repository_code_before_guard", hx(state["untrusted_early"]))
        for k, v in args[0].items():
            if _type(k) is _int and _type(v) is CodeType:
                trusted[k] = v
        return None

    def on_session(args):
        frame = caller_is(DEPTH, IMPL["sessionstart"])
        if frame is None or state["session_frame"] is not None:
            violation("forged_record", "a session start not from the guard's sessionstart")
            return None
        f = frame.f_back
        while f is not None and f.f_code is not WRAP_SESSION:
            f = f.f_back
        state["session_frame"] = f
        return None

    def on_collected(args):
        frame = caller_is(DEPTH, IMPL["itemcollected"])
        if frame is None or _len(args) != 4:
            violation("forged_record", "a collection record not from the guard's itemcollected")
            return None
        why = stack_ok(frame.f_back, state["main_frame"])
        item, fn, nodeid, xfail = args
        if _type(nodeid) is not _str or _type(xfail) is not _bool:
            violation("forged_record", "a collection record with a forged node id")
            return None
        if why is not None:
            violation("untrusted_collection", nodeid + ": " + why)
            return None
        cls = _type(item)
        kind = "function" if is_sub(cls, Function) and not is_sub(cls, TestCaseFunction) else "report"
        if kind == "function":
            if _type(fn) is MethodType:
                fn = fn.__func__
            parts = nodeid.split("::")
            name = parts[-1].split("[")[0]
            if not unwrap_facts(fn, parts[0], name):
                violation("foreign_test_function", nodeid)
                return None
            if fn.__code__.co_flags & CO_ASYNC:
                kind = "async"
        elif not class_trusted(cls):
            violation("untrusted_item_class", nodeid + ": " + qualname_of(cls))
            return None
        state["items"][_id(item)] = (item, fn, nodeid, kind, xfail)
        emit("collected", hx(nodeid), kind, "1" if xfail else "0")
        return None

    def on_call(args):
        frame = caller_is(DEPTH, SHIM_CODE)
        if frame is None or _len(args) != 3:
            violation("forged_record", "a test outcome not from the guard's shim")
            return None
        item, fn, outcome = args
        if _type(outcome) is not _str or outcome not in OUTCOMES:
            violation("forged_record", "a test outcome that is not one of the guard's")
            return None
        held = state["items"].get(_id(item))
        if held is None or held[0] is not item:
            violation("foreign_test_item", "a test outcome for an item collection did not make")
            return None
        nodeid = held[2]
        if _type(fn) is MethodType:
            fn = fn.__func__
        if fn is not held[1]:
            violation("foreign_test_function", nodeid + ": the shim called another function than collection found")
            return None
        why = stack_ok(frame.f_back, state["session_frame"])
        if why is not None:
            violation("untrusted_call", nodeid + ": " + why)
            return None
        state["calls"] = state["calls"] + 1
        emit("call", hx(nodeid), outcome)
        return None

    def on_unguarded(args):
        frame = caller_is(DEPTH, IMPL["pyfunc_call"])
        if frame is None or _len(args) != 1:
            violation("forged_record", "an unguarded-test record not from the guard")
            return None
        held = state["items"].get(_id(args[0]))
        if held is None or held[0] is not args[0] or held[3] != "async":
            violation("forged_record", "an unguarded-test record for a test that is not async")
            return None
        emit("unguarded", hx(held[2]), "async")
        return None

    def on_report(args):
        frame = caller_is(DEPTH, IMPL["makereport"])
        if frame is None or _len(args) != 4:
            violation("forged_record", "a report record not from the guard")
            return None
        item, when, outcome, wasxfail = args
        held = state["items"].get(_id(item))
        if held is None or held[0] is not item or held[3] != "report":
            return None
        if _type(when) is not _str or _type(outcome) is not _str or _type(wasxfail) is not _bool:
            violation("forged_record", "a report record with forged fields")
            return None
        if when not in ("setup", "call", "teardown") or outcome not in ("passed", "failed", "skipped"):
            violation("forged_record", "a report record with forged fields")
            return None
        below = frame.f_back
        if below is None or below.f_code is not IMPL["makereport_wrapper"]:
            violation("forged_record", "a report record not from the guard's makereport wrapper")
            return None
        why = stack_ok(below.f_back, state["session_frame"])
        if why is not None:
            violation("untrusted_call", held[2] + ": " + why)
            return None
        emit("report", hx(held[2]), when, outcome, "1" if wasxfail else "0")
        return None

    def on_end(args):
        frame = caller_is(DEPTH, IMPL["sessionfinish"])
        if frame is None or _len(args) != 1 or _type(args[0]) is not _int:
            violation("forged_record", "an end record not from the guard")
            return None
        why = stack_ok(frame.f_back, state["session_frame"])
        if why is not None:
            violation("untrusted_call", "session end: " + why)
        for label in integrity_changes():
            violation("runner_modified", label)
        emit("end", _str(args[0]), _str(state["calls"]), _str(state["violations"]))
        return None

    def value_trusted(v, depth=0):
        """A value pytest itself may put in place: code loaded before the tests, data, a C function."""
        t = _type(v)
        if t is FunctionType:
            return trusted_code(v.__code__)
        if depth > 3:
            return False
        if t is MethodType or t is _staticmethod or t is _classmethod:
            return value_trusted(v.__func__, depth + 1)
        if t is _property:
            for f in (v.fget, v.fset, v.fdel):
                if f is not None and not value_trusted(f, depth + 1):
                    return False
            return True
        if snapshot_class(v) or t is BuiltinType or not _callable(v):
            return True
        return False

    def integrity_changes():
        """What changed since the guard loaded into something pytest's own code did not put there."""
        changed = []
        for m, entries, classes in state["integrity"]:
            if _type(m) is not ModuleType:
                changed.append(_str(_id(m)) + " (module replaced)")
                continue
            now = m.__dict__
            name = now.get("__name__")
            name = name if _type(name) is _str else "?"
            for k, v in entries.items():
                w = now.get(k, _missing)
                if w is not v and (w is _missing or not value_trusted(w)):
                    changed.append(name + "." + k)
            for label, cls, attrs in classes:
                current = dict_of_type(cls)
                for k, v in attrs.items():
                    w = current.get(k, _missing)
                    if w is not v and (w is _missing or not value_trusted(w)):
                        changed.append(label + "." + k)
                for k in current:
                    if _type(k) is _str and k not in attrs and not value_trusted(current[k]):
                        changed.append(label + "." + k + " (added)")
        return changed

    def importer_of(depth):
        """The file of an installed library that imports (None: the repository's code, or made-up code)."""
        f = _getframe(depth)
        while f is not None:
            file = f.f_code.co_filename
            if not file.startswith("<frozen importlib"):
                if file.startswith(root_slash) or file.startswith("<"):
                    return None
                return file
            f = f.f_back
        return None

    def on_import(args):
        name = args[0]
        if _type(name) is not _str:
            return None
        base = name.split(".")[0]
        if base not in DENIED_IMPORTS:
            return None
        importer = importer_of(3)
        if importer is not None:
            # An installed library (numpy imports ctypes): allowed, and said, for from now on the
            # code under test finds the module loaded and memory is open to it (docs/evaluators.md).
            emit("note", "memory_module_loaded", hx(name + " by " + importer))
            return None
        violation("refused_import", name)
        return (_ImportError, "polar runner guard: importing " + name + " is refused (it reads and writes memory unaudited)")

    def on_compile(args):
        if _len(args) < 2:
            return None
        source, filename = args[0], args[1]
        if _type(filename) is not _str:
            return None
        expected = manifest.get(filename)
        if expected is None:
            return None
        t = _type(source)
        if t is _bytes or t is _str:
            data = source if t is _bytes else source.encode("utf-8", "surrogateescape")
            if digest_of_c(data) != expected:
                violation("protected_file_changed", filename)
                return (_RuntimeError, "polar runner guard: " + filename + " no longer has its protected content")
            # Counted when compiled by the import system or pytest's rewriter, from this content.
            f = _getframe(2)
            depth = 0
            while f is not None and depth < 3:
                if f.f_code is SOURCE_TO_CODE or f.f_code is REWRITE_TEST:
                    state["verified"][filename] = state["verified"].get(filename, 0) + 1
                    break
                f = f.f_back
                depth = depth + 1
            return None
        # A syntax tree: only pytest's rewriter compiles a protected file from one (its own parse).
        f = _getframe(2)
        if f is None or f.f_code is not REWRITE_TEST:
            violation("protected_file_forged", filename)
            return (_RuntimeError, "polar runner guard: compiling a tree as " + filename + " is refused")
        return None

    def on_exec(args):
        co = args[0] if _len(args) else None
        if _type(co) is not CodeType:
            return None
        filename = co.co_filename
        if _type(filename) is not _str or not filename.startswith(root_slash):
            return None
        if not state["snapshot_done"] and state["untrusted_early"] is None:
            state["untrusted_early"] = filename
        expected = manifest.get(filename)
        if expected is None or co.co_name != "<module>":
            return None
        if rewrite_globals.get("_read_pyc") is not no_cached_rewrite:
            violation("runner_modified", "_pytest.assertion.rewrite._read_pyc")
        count = state["verified"].get(filename, 0)
        if count > 0:
            state["verified"][filename] = count - 1
        else:
            # Bytecode from a cache: it must be what this file's verified source compiles to.
            try:
                with_fd = os_open(filename, 0)
                try:
                    data = read_all(with_fd)
                finally:
                    os_close(with_fd)
            except _OSError:
                data = None
            if data is None or digest_of_c(data) != expected or compile_(data, filename, "exec", 0, True) != co:
                violation("protected_file_forged", filename)
                return (_RuntimeError, "polar runner guard: " + filename + " was not compiled from its source")
        f = _getframe(2)
        why = stack_ok(f, state["main_frame"])
        if why is not None:
            violation("untrusted_import", filename + ": " + why)
            return None
        add_code(co)
        return None

    def on_open(args):
        path = args[0]
        t = _type(path)
        if (t is not _str and t is not _bytes) or PROC_DEV is None:
            return None
        try:
            st = stat(path)
        except (_OSError, _ValueError):
            return None
        if st.st_dev != PROC_DEV:
            return None
        pid = _str(getpid())
        secret = _set()
        for name in ("mem", "environ"):
            try:
                s = stat("/proc/" + pid + "/" + name)
                secret.add((s.st_dev, s.st_ino))
            except _OSError:
                pass
        try:
            for tid in listdir("/proc/" + pid + "/task"):
                for name in ("mem", "environ"):
                    try:
                        s = stat("/proc/" + pid + "/task/" + tid + "/" + name)
                        secret.add((s.st_dev, s.st_ino))
                    except _OSError:
                        pass
        except _OSError:
            pass
        if (st.st_dev, st.st_ino) in secret:
            shown = path if t is _str else path.decode("utf-8", "surrogateescape")
            violation("proc_memory", shown)
            return (_RuntimeError, "polar runner guard: opening this process's memory or environment is refused")
        return None

    def on_getframe(args):
        if _len(args) and _type(args[0]) is FrameType:
            co = args[0].f_code
            if HOOK_CODES.get(_id(co)) is co:
                violation("guard_frame", "sys._getframe reached the guard's audit hook")
                return (_RuntimeError, "polar runner guard: the guard's frames are not reachable")
        return None

    def on_setattr(args):
        if _len(args) < 2:
            return None
        obj, name = args[0], args[1]
        if _type(obj) is not FunctionType or _type(name) is not _str:
            return None
        if name not in ("__code__", "__defaults__", "__kwdefaults__", "__globals__"):
            return None
        co = obj.__code__
        if OUR_CODES.get(_id(co)) is co:
            violation("guard_patched", name + " of " + co.co_name)
            return (_RuntimeError, "polar runner guard: the guard's functions cannot be changed")
        if name == "__code__" and _len(args) > 2 and _type(args[2]) is CodeType and args[2].co_filename in manifest:
            violation("protected_file_forged", args[2].co_filename)
            return (_RuntimeError, "polar runner guard: code of a protected file cannot be reassigned")
        return None

    def on_code_new(args):
        if _len(args) > 1 and _type(args[1]) is _str and args[1] in manifest:
            violation("protected_file_forged", args[1])
            return (_RuntimeError, "polar runner guard: code objects claiming a protected file are refused")
        return None

    def on_function_new(args):
        co = args[0] if _len(args) else None
        if _type(co) is CodeType and co.co_filename in manifest and trusted_code(co):
            violation("protected_file_forged", co.co_filename + ":" + co.co_name)
            return (_RuntimeError, "polar runner guard: functions from a protected file's code are refused")
        return None

    def on_denied(event):
        violation("refused", event)
        return (_RuntimeError, "polar runner guard: " + event + " is refused during a guarded test run")

    def on_error(event):
        """A handler failed: what it was to check went unchecked, so the run cannot be trusted."""
        try:
            violation("guard_error", event)
        except _BaseException:
            pass

    handlers = {
        "polar.guard.snapshot": on_snapshot,
        "polar.guard.session": on_session,
        "polar.guard.collected": on_collected,
        "polar.guard.call": on_call,
        "polar.guard.unguarded": on_unguarded,
        "polar.guard.report": on_report,
        "polar.guard.end": on_end,
        "import": on_import,
        "compile": on_compile,
        "exec": on_exec,
        "open": on_open,
        "sys._getframe": on_getframe,
        "object.__setattr__": on_setattr,
        "code.__new__": on_code_new,
        "function.__new__": on_function_new,
    }
    for event in DENIED_EVENTS:
        handlers[event] = None

    def read_all(fd):
        chunks = []
        while True:
            b = os_read(fd, 1 << 20)
            if not b:
                return b"".join(chunks)
            chunks.append(b)

    def digest_of_c(data):
        return sha256(data).hexdigest()

    # The hook has no free variables: what it holds arrives as defaults, which it deletes before it
    # raises, so the traceback of a refusal shows nothing of the guard's state.
    def hook(
        event,
        args,
        _handlers=handlers,
        _denied=DENIED_EVENTS,
        _busy=state["busy"],
        _on_denied=on_denied,
        _on_error=on_error,
        _type=type,
        _str=str,
        _ident=get_ident,
        _gc=(gc_isenabled, gc_disable, gc_enable),
        _miss=object(),
        _error=BaseException,
    ):
        if _type(event) is not _str:
            return
        h = _handlers.get(event, _miss)
        if h is _miss:
            return
        tid = _ident()
        nested = tid in _busy
        if nested and event != "sys._getframe":
            return
        enabled = _gc[0]()
        _gc[1]()
        if not nested:
            _busy.add(tid)
        refuse = None
        try:
            refuse = _on_denied(event) if event in _denied else h(args)
        except _error:
            refuse = None
            _on_error(event)
        finally:
            if not nested:
                _busy.discard(tid)
            if enabled:
                _gc[2]()
        if refuse is not None:
            kind, message = refuse
            del _handlers, _denied, _busy, _on_denied, _on_error, _type, _str, _ident, _gc, _miss, _error, h, refuse
            raise kind(message)

    # Codes of the guard: its frames are the only ones allowed to hold the key.
    for f in (hook, emit, sign, violation, stack_ok, caller_is, on_denied, on_error, integrity_changes, value_trusted, importer_of,
              read_all, digest_of_c, hx, where, trusted_code, is_sub, class_trusted, unwrap_facts, snapshot_class) + tuple(
        handlers[e] for e in handlers if handlers[e] is not None
    ):
        HOOK_CODES[id(f.__code__)] = f.__code__

    audit = getattr(sys, "audit", None)
    has_audit = audit is not None and hasattr(sys, "addaudithook")
    # How far up a handler finds the frame that asked: caller_is, the handler, the hook, then the
    # caller of sys.audit (a C function, no frame) -- or of the stand-in below.
    DEPTH = 3
    if not has_audit:  # Python < 3.8: the records are signed, nothing else holds
        DEPTH = 4

        def audit(event, *args):
            hook(event, args)

    # ---- the plugin: pytest hooks ------------------------------------------------------------------
    Skipped = _pytest.outcomes.Skipped
    XFailed = _pytest.outcomes.XFailed

    def make_shim(item, fn):
        def polar_guarded_test(
            _pg_item=item,
            _pg_fn=fn,
            _pg_audit=audit,
            _pg_skipped=Skipped,
            _pg_xfailed=XFailed,
            _pg_issubclass=issubclass,
            _pg_type=type,
            _pg_hasattr=hasattr,
            _pg_base=BaseException,
            *args,
            **kwargs,
        ):
            __tracebackhide__ = True
            try:
                result = _pg_fn(*args, **kwargs)
            except _pg_base as e:
                t = _pg_type(e)
                kind = (
                    "xfailed"
                    if _pg_issubclass(t, _pg_xfailed)
                    else "skipped"
                    if _pg_issubclass(t, _pg_skipped)
                    else "failed"
                )
                _pg_audit("polar.guard.call", _pg_item, _pg_fn, kind)
                raise
            awaitable = result is not None and (_pg_hasattr(result, "__await__") or _pg_hasattr(result, "__aiter__"))
            _pg_audit("polar.guard.call", _pg_item, _pg_fn, "awaitable" if awaitable else "passed")
            return result

        return polar_guarded_test

    SHIM_CODE = make_shim(None, None).__code__

    def gather_now():
        before = _len(trusted)
        gather(sys.modules, gathered)
        return {k: v for k, v in _tuple(trusted.items())[before:]}

    @pytest.hookimpl(tryfirst=True)
    def pytest_load_initial_conftests(early_config):
        audit("polar.guard.snapshot", gather_now())

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(session):
        audit("polar.guard.session")

    @pytest.hookimpl(tryfirst=True)
    def pytest_itemcollected(item):
        fn = item.obj if isinstance(item, Function) else None
        try:
            xfail = item.get_closest_marker("xfail") is not None
        except Exception:
            xfail = False
        audit("polar.guard.collected", item, fn, str(item.nodeid), bool(xfail))

    def report_of(item, rep):
        try:
            when, result, wasxfail = str(rep.when), str(rep.outcome), hasattr(rep, "wasxfail")
        except Exception:
            return
        audit("polar.guard.report", item, when, result, bool(wasxfail))

    try:  # pluggy >= 1.1: wrappers that get the result (old-style hookwrappers are deprecated)
        pytest.hookimpl(wrapper=True)
        new_style = True
    except TypeError:
        new_style = False

    if new_style:

        @pytest.hookimpl(wrapper=True, tryfirst=True)
        def pytest_pyfunc_call(pyfuncitem):
            fn = pyfuncitem.obj
            if fn is not None and getattr(getattr(fn, "__code__", None), "co_flags", 0) & CO_ASYNC:
                audit("polar.guard.unguarded", pyfuncitem)
                return (yield)
            pyfuncitem.obj = make_shim(pyfuncitem, fn)
            try:
                return (yield)
            finally:
                pyfuncitem.obj = fn

        @pytest.hookimpl(wrapper=True, tryfirst=True)
        def pytest_runtest_makereport(item, call):
            rep = yield
            report_of(item, rep)
            return rep

    else:

        @pytest.hookimpl(hookwrapper=True, tryfirst=True)
        def pytest_pyfunc_call(pyfuncitem):
            fn = pyfuncitem.obj
            if fn is not None and getattr(getattr(fn, "__code__", None), "co_flags", 0) & CO_ASYNC:
                audit("polar.guard.unguarded", pyfuncitem)
                yield
                return
            pyfuncitem.obj = make_shim(pyfuncitem, fn)
            try:
                yield
            finally:
                pyfuncitem.obj = fn

        @pytest.hookimpl(hookwrapper=True, tryfirst=True)
        def pytest_runtest_makereport(item, call):
            outcome = yield
            try:
                rep = outcome.get_result()
            except Exception:
                return
            report_of(item, rep)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(session, exitstatus):
        audit("polar.guard.end", int(exitstatus))

    plugin = {
        "pytest_load_initial_conftests": pytest_load_initial_conftests,
        "pytest_sessionstart": pytest_sessionstart,
        "pytest_itemcollected": pytest_itemcollected,
        "pytest_pyfunc_call": pytest_pyfunc_call,
        "pytest_runtest_makereport": pytest_runtest_makereport,
        "pytest_sessionfinish": pytest_sessionfinish,
    }
    IMPL = {
        "load_initial_conftests": pytest_load_initial_conftests.__code__,
        "sessionstart": pytest_sessionstart.__code__,
        "itemcollected": pytest_itemcollected.__code__,
        "pyfunc_call": pytest_pyfunc_call.__code__,
        "makereport": report_of.__code__,
        "makereport_wrapper": pytest_runtest_makereport.__code__,
        "sessionfinish": pytest_sessionfinish.__code__,
    }
    for co in (SHIM_CODE, make_shim.__code__, no_cached_rewrite.__code__, *IMPL.values()):
        OUR_CODES[id(co)] = co
    for co in HOOK_CODES.values():
        OUR_CODES[id(co)] = co

    # Everything loaded now is trusted (pytest, pluggy, the standard library, this module), and the
    # frame of pytest's main() is where record requests must come from.
    gather(sys.modules, gathered)
    for co in OUR_CODES.values():  # the guard's own codes count as trusted frames nowhere
        trusted.pop(id(co), None)
    for name, m in list(sys.modules.items()):
        if isinstance(m, ModuleType):
            for v in list(vars(m).values()):
                if isinstance(v, type):
                    trusted_classes[id(v)] = v
    f = sys._getframe()
    while f is not None and f.f_code is not CONFIG_MAIN:
        f = f.f_back
    state["main_frame"] = f
    inert = runner_under_test or f is None
    emit(
        "start",
        "1",
        hx(sys.version.split()[0]),
        hx(getattr(pytest, "__version__", "?")),
        "1" if has_audit else "0",
        _str(measures["dumpable"]),
        _str(measures["landlock"]),
        hx(measures["ctypes"]),
        "1" if runner_under_test else "0",
        "1" if f is not None else "0",
        hx(root),
    )
    if inert:
        # Nothing to stand on: pytest itself is the code under test, or there is no main() to
        # anchor the stack checks. The gateway reads the start record and says so.
        return None
    # The integrity snapshot includes the plugin functions, once they are module attributes.
    module = sys.modules[__name__]
    for k, v in plugin.items():
        setattr(module, k, v)
    state["integrity"] = [
        snapshot_of(m) for name, m in list(sys.modules.items()) if isinstance(m, ModuleType) and watched(name)
    ]
    if has_audit:
        sys.addaudithook(hook)
    return plugin


def _landlock(ctypes, libc, os):
    """No process of the run may write under /proc: every other top-level folder stays writable.

    Returns the Landlock ABI version used, 0 when the kernel has none.
    """
    create, add_rule, restrict = 444, 445, 446  # the same numbers on every Linux architecture
    abi = libc.syscall(create, None, 0, 1)  # LANDLOCK_CREATE_RULESET_VERSION
    if abi < 1:
        return 0
    write_file = 1 << 1  # LANDLOCK_ACCESS_FS_WRITE_FILE
    attr = (ctypes.c_uint64 * 1)(write_file)
    ruleset = libc.syscall(create, ctypes.byref(attr), ctypes.sizeof(attr), 0)
    if ruleset < 0:
        return 0

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    try:
        for name in os.listdir("/"):
            if name == "proc":
                continue
            try:
                fd = os.open("/" + name, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                rule = PathBeneath(write_file, fd)
                libc.syscall(add_rule, ruleset, 1, ctypes.byref(rule), 0)  # LANDLOCK_RULE_PATH_BENEATH
            finally:
                os.close(fd)
        if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
            return 0
        if libc.syscall(restrict, ruleset, 0) != 0:
            return 0
        return abi
    finally:
        os.close(ruleset)


_plugin = _install()
if _plugin is not None:
    _plugin = None
del _install, _landlock, _plugin
