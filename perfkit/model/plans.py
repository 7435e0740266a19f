"""A rung's launches as the model sees them: planned for the target GPU with stand-in
buffers of the real shapes (nothing allocated), its traffic model evaluated for that target,
and the compiled kernel of each launch (:mod:`perfkit.anatomy`)."""
from __future__ import annotations

import functools


def array_bytes(args) -> tuple[int, int, float]:
    """(array args, scalar args, bytes of the arrays) of a launch's arguments."""
    import numpy as np

    arrays = scalars = 0
    nbytes = 0.0
    for a in args:
        shape = getattr(a, "shape", None)
        if shape is not None and hasattr(a, "dtype") and len(shape) > 0:
            arrays += 1
            nbytes += float(np.prod(shape)) * np.dtype(a.dtype).itemsize
        else:
            scalars += 1
    return arrays, scalars, nbytes


def planning_for_target(r):
    """A context in which :func:`perfkit.backend.device` answers the target GPU of the rates
    ``r`` (its SM count and compute capability), for plans and traffic models that size their
    grids or workspaces from the device."""
    from .. import backend

    info = backend.DeviceInfo(name=f"model target ({r['sm_count']['value']} SMs)", simulated=False,
                              compute_capability=tuple(r["compute_capability"]["value"]),
                              sm_count=int(r["sm_count"]["value"]))
    return backend.planning_for(info)


def plan_launches(variant, problem, r=None):
    """The rung's launches with stand-in buffers of the real shapes (nothing allocated), planned
    for the target GPU of the rates ``r`` (its SM count and compute capability, for plans that
    size their grids from the device)."""
    if r is None:
        return _plan_launches_here(variant, problem)
    with planning_for_target(r):
        return _plan_launches_here(variant, problem)


def traffic_for(variant, problem, r):
    """The rung's traffic model evaluated for the target GPU of the rates ``r``: a rung whose
    launch shape follows the device (a persistent grid of a few blocks per SM, one partial-sum
    row per slot) sizes its workspace, and so its traffic, from the target's SM count, as its
    launch plan does (:func:`plan_launches`), not from the machine the model runs on."""
    with planning_for_target(r):
        return variant.traffic(problem)


def is_dense(problem) -> bool:
    """A dense op (a matrix product, a convolution): more than 8 FLOPs per byte of its arrays."""
    return problem.flops / max(problem.bytes, 1.0) > 8.0


def _plan_launches_here(variant, problem):
    import numpy as np

    specs = {**problem.input_specs(), **problem.output_specs(), **variant.workspace(problem)}

    work = set(variant.workspace(problem))
    inputs = set(problem.input_specs())

    class _Buf:  # shape and dtype only, like a device array's (and whether it is workspace or an input)
        def __init__(self, shape, dtype, workspace=False, is_input=False):
            self.shape, self.dtype = tuple(shape), np.dtype(dtype)
            self.ndim = len(self.shape)
            self.size = int(np.prod(self.shape))
            self.workspace, self.is_input = workspace, is_input

        def reshape(self, *shape):
            shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
            shape = tuple(int(x) for x in shape)
            if -1 in shape:
                known = int(np.prod([x for x in shape if x != -1]))
                shape = tuple(self.size // max(known, 1) if x == -1 else x for x in shape)
            if int(np.prod(shape)) != self.size:
                raise ValueError(f"cannot reshape {self.shape} to {shape}")
            return _Buf(shape, self.dtype, self.workspace, self.is_input)

        def ravel(self):
            return _Buf((self.size,), self.dtype, self.workspace, self.is_input)

    try:
        return variant.plan(problem, {n: _Buf(s, d, n in work, n in inputs) for n, (s, d) in specs.items()})
    except Exception:  # noqa: BLE001  (a plan that needs real arrays: host stand-ins)
        hb = variant.host_buffers(problem)
        launches = variant.plan(problem, hb)

        def real(a):
            for n, b in hb.items():
                if a is b:
                    return _Buf(*specs[n], n in work, n in inputs)
            return a

        class _L:
            def __init__(self, l):
                self.grid, self.block, self.shared_bytes = l.grid, l.block, l.shared_bytes
                self.args = tuple(real(a) for a in l.args)

        return [_L(l) for l in launches]


def _kernel_key(variant, problem):
    launches = variant.plan(problem, variant.host_buffers(problem))
    return [(id(getattr(l.kernel, "py_func", l.kernel)), tuple(l.block), int(l.shared_bytes),
             tuple((getattr(a, "dtype", type(a)), getattr(a, "ndim", 0)) for a in l.args)) for l in launches]


@functools.lru_cache(maxsize=4096)
def compile_problem(variant, problem):
    """The problem to compile for: a small twin (:func:`perfkit.banks.small_problem`) when its
    plan launches the very same kernels with the same blocks, shared memory and argument
    types (the SASS then cannot differ: sizes are run-time arguments), so that every size of a
    rung shares one compile; else the problem itself."""
    from .. import banks

    try:
        small = banks.small_problem(variant, problem)
        if small != problem and _kernel_key(variant, small) == _kernel_key(variant, problem):
            return small
    except Exception:  # noqa: BLE001
        pass
    return problem


def inspect_launch(variant, problem, cc, k):
    from .. import anatomy

    return anatomy.inspect(variant, compile_problem(variant, problem), cc=cc, kernel=k)
