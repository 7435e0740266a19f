"""Analytical models of a rung's work and time.

Two layers: :class:`Traffic` (declared by each rung) and :func:`predict`, the plain roofline
bound of FLOPs and bytes per memory level; and :func:`estimate` (``estimate(variant, problem,
gpu="h100-sxm") -> Estimate``), a prediction of the median time of one launch sequence of the
rung on a GPU from static inputs only: the kernels compiled for that GPU (:mod:`perfkit.anatomy`),
the launch shapes, the rung's :class:`Traffic`, the simulated accesses of a small twin of the
problem (:mod:`perfkit.banks`), the datasheet (``data/devices.yaml``) and effective rates
(``data/rates.yaml``).  ``Estimate.inputs`` lists every number used with its source.

The package, in the order an estimate is made (each module's docstring has its rules):

* :mod:`~perfkit.model.equations`: the equations: legs per resource, combination, launch
  sequence; the roofline bound; ``Estimate``
* :mod:`~perfkit.model.inputs`: the rates of a GPU (datasheet, ``rates.yaml``, fitted
  constants) and the Nsight Compute tables
* :mod:`~perfkit.model.plans`: a rung's launches planned for the target GPU, its traffic, its
  compiled kernels
* :mod:`~perfkit.model.pipes`: SASS instructions -> per-pipe and per-level counts
* :mod:`~perfkit.model.branches`: branch rules: which arm of an if/else runs, guarded blocks
* :mod:`~perfkit.model.trips`: trip-count rules: each loop's warp-iterations (the dynamic mix)
* :mod:`~perfkit.model.memory`: memory-level traffic from the access simulation (shared
  wavefronts, lines per request, each launch's bytes) and a tiled product's DRAM panels
* :mod:`~perfkit.model.latency`: latencies by kind and the in-order scoreboard of one warp
* :mod:`~perfkit.model.launch`: one launch's estimate and the sequence's (:func:`estimate`)
* :mod:`~perfkit.model.whatif`: one rung on every device
* :mod:`~perfkit.model.validation`: ``perfkit model validate`` against the records and
  Nsight Compute

Fitted constants (``data/rates.yaml`` ``fitted``): ``dram_efficiency``, ``overlap``,
``launch_latency_s`` and ``dram_latency_spread_clk``, nothing per rung or per op.
"""
from __future__ import annotations

from .branches import bodies, data_guard, forward_spans, guarded, one_path, zero_guard
from .equations import LEGS, Estimate, Prediction, Traffic, flush_seconds, predict, write_seconds
from .inputs import NCU_PATH, RATES_PATH, Inputs, ncu_table, ncu_tables, rates, spec_key
from .latency import latencies, warp_cycles
from .launch import estimate, launch_estimate, library_estimate
from .memory import (bank_degrees, bank_per_access, bank_report, coalesce_factor, dirty_at_end, guarded_activity,
                     launch_weights, lines_per_request, mixed_merge, panel_reads, requested_bytes, shared_wavefronts,
                     simulated_launch, wide_global)
from .pipes import add_counts, opcode, pipe_counts
from .plans import array_bytes, compile_problem, inspect_launch, is_dense, plan_launches, traffic_for
from .trips import dynamic_mix, elements_per_iteration, elements_per_thread, nested_in, remainder_blocks, \
    remainder_factor
from .validation import levels_line, levels_table, record_ahead, repeat_line, summary_line, validate, validate_cli, \
    variant_as_recorded
from .whatif import plot_what_if, what_if

__all__ = ["Traffic", "Prediction", "predict", "Estimate", "estimate", "flush_seconds", "what_if", "plot_what_if",
           "validate", "summary_line", "levels_line", "levels_table", "repeat_line", "record_ahead", "dynamic_mix", "rates",
           "LEGS", "RATES_PATH"]

# the names these had when the model was one module (tests and notebooks use them)
_Inputs = Inputs
_spec_key = spec_key
_opcode = opcode
_pipe_counts = pipe_counts
_add = add_counts
_array_bytes = array_bytes
_plan_launches = plan_launches
_traffic_for = traffic_for
_is_dense = is_dense
_zero_guard = zero_guard
_data_guard = data_guard
_one_path = one_path
_forward_spans = forward_spans
_guarded = guarded
_bodies = bodies
_panel_reads = panel_reads
_elements_per_thread = elements_per_thread
_elements_per_iteration = elements_per_iteration
_nested_in = nested_in
_remainder_factor = remainder_factor
_remainder_blocks = remainder_blocks
_wavefronts = shared_wavefronts
_bank_report = bank_report
_bank_per_access = bank_per_access
_bank_degrees = bank_degrees
_compile_problem = compile_problem
_inspect = inspect_launch
_latencies = latencies
_warp_cycles = warp_cycles
_launch_estimate = launch_estimate
_lines_per_request = lines_per_request
_launch_weights = launch_weights
_requested_bytes = requested_bytes
_guarded_activity = guarded_activity
_wide_global = wide_global
_simulated_launch = simulated_launch
_coalesce_factor = coalesce_factor
_library_estimate = library_estimate
_write_seconds = write_seconds
_variant_as_recorded = variant_as_recorded
