"""The ``--json`` keys each command prints, as ``thermostat COMMAND --help`` lists them.

Generated, then kept here so that ``--help`` imports no model and runs no command:
``tests/flows/cli/test_cli_startup.py`` generates the table anew and fails, printing it, when it
differs from this copy. A command whose output is one model (``export``, ``prune``, ``setup-db``,
``alerts install``, ``lock``, ``log``, ``labels attach``) is described by :func:`model_keys` from
that model's fields; an analysis command (its output joins several results) by running it on a
small example with each of its options that adds keys.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal

__all__ = ["JSON_KEYS", "model_keys"]


def _described(name: str, annotation: Any) -> str:
    """``name`` with what its value holds: ``{keys}`` for a model, ``[{keys}]`` for a list of them,
    ``(a|b)`` for a choice of words."""
    args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        return _described(name, args[0])
    if typing.get_origin(annotation) is Literal:
        return f"{name} ({'|'.join(map(str, args))})"
    if typing.get_origin(annotation) in (tuple, list) and args and _is_model(args[0]):
        return f"{name} [{{{model_keys(args[0])}}}]"
    return f"{name} {{{model_keys(annotation)}}}" if _is_model(annotation) else name


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and (hasattr(annotation, "model_fields") or dataclasses.is_dataclass(annotation))


def model_keys(model: type) -> str:
    """The keys of ``model``'s JSON form, in order: a pydantic model's fields and computed
    fields (its ``model_dump``), or a dataclass's fields (its ``JsonResult.to_dict``). Imports nothing: the
    command line reads the table, and only its test calls this.

    >>> from flows.cli.database_setup import DatabaseSetup
    >>> model_keys(DatabaseSetup)
    'steps [{subject, action (created|updated|unchanged), detail}], urls, changed'
    """
    if dataclasses.is_dataclass(model):
        hints = typing.get_type_hints(model)
        return ", ".join(_described(item.name, hints[item.name]) for item in dataclasses.fields(model))
    pydantic: Any = model
    keys = [_described(name, info.annotation) for name, info in pydantic.model_fields.items()]
    keys += [_described(name, info.return_type) for name, info in pydantic.model_computed_fields.items()]
    return ", ".join(keys)


JSON_KEYS: dict[str, str] = {
    "fit": (
        "data, temperature, nll_before, nll_after, at_bound, n, n_classes, bounds, nll_reduction, "
        "temperature_low, temperature_high, confidence_level, ece_before, ece_after, n_bins, scheme, accuracy, "
        "in_sample, engine, n_partitions, n_workers; with --priors also priors, reference_priors, prior_basis, "
        "corrected {temperature, nll, ece, mce, brier, accuracy, mean_confidence}"
    ),
    "evaluate": (
        "data, n, n_classes, temperature, nll, ece, mce, brier, accuracy, mean_confidence, n_bins, scheme, "
        "min_count, bins [{lower, upper, count, mean_confidence, accuracy, gap, sparse}], engine, n_partitions, "
        "n_workers; with --by-group also groups [{group, n, ece, accuracy, mean_confidence}], "
        "group_weighted_ece; with --estimator also estimators [{estimator, estimate, low, high, "
        "confidence_level, n, n_bins, temperature, binning, convention, method, squared_estimate, bandwidth, "
        "p_calibrated}]; with --priors --reference-priors also priors, reference_priors, prior_basis, "
        "uncorrected {temperature, nll, ece, mce, brier, accuracy, mean_confidence}"
    ),
    "sweep": (
        "data, temperature, n, threshold, met, target_accuracy, coverage, accepted_count, accepted_accuracy, "
        "accuracy_lower_bound, confidence_level, reason, table [{threshold, coverage, accepted_count, "
        "accepted_accuracy, accuracy_lower_bound}]"
    ),
    "qualify": (
        "data, training_ids, reference, passed, failures, warnings, n, n_classes, class_counts, n_errors, "
        "id_overlap, tv_distance, min_total, min_per_class, max_tv_distance"
    ),
    "compare": (
        "fit_data, eval_data, temperature, at_bound, bounds, temperature_low, temperature_high, "
        "temperature_confidence_level, fit_n, eval_n, n_classes, n_bins, scheme, before {temperature, nll, ece, "
        "mce, brier, accuracy, mean_confidence}, after {temperature, nll, ece, mce, brier, accuracy, "
        "mean_confidence}, nll_difference {estimate, low, high, verdict, temperature_before, temperature_after, "
        "n, n_resamples, confidence_level, seed}, verdict, id_overlap, interval, engine, n_partitions, n_workers"
    ),
    "drift": (
        "reference, window, reference_n, verdict, rows_to_decide, drift_detected, reasons, tests_fired, fired, temperature, n_bins, "
        "scheme, n, overall_drift, temperature_drift, temperature_margin, temperature_test {temperature, n, "
        "window_temperature, window_temperature_low, window_temperature_high, reference_n, "
        "reference_temperature, ratio, ratio_low, ratio_high, log_ratio, standard_error, window_standard_error, "
        "reference_standard_error, z, margin, margin_z, p_value, p_value_no_margin, level, drifted, direction, "
        "confidence_level, information_ratio, expected_errors, reference_expected_errors, min_expected_errors, "
        "enough_errors, equivalence_p_value, within_margin, equivalence_margin, equivalence_level}, temperature_stats {temperature, n, gradient_sum, gradient_square_sum, curvature_sum, "
        "expected_errors, mean_gradient, direction, window_temperature, window_temperature_low, "
        "window_temperature_high}, reference_stats {temperature, n, gradient_sum, gradient_square_sum, "
        "curvature_sum, expected_errors, mean_gradient, direction, window_temperature, window_temperature_low, "
        "window_temperature_high}, ece_drift, ece_estimator, ece_estimate, ece_low, ece_high, confidence_level, "
        "ece, baseline_ece, baseline_ece_low, baseline_ece_high, ece_excess, ece_tolerance, p_value, "
        "p_threshold, test_level, consistency_p_value, null_quantile_95, seed, nll, baseline_nll, accuracy, "
        "mean_confidence, brier, mce, threshold, coverage, accepted_accuracy, output_collapsed, groups [{scope, "
        "group, n, tested, drifted, collapsed, temperature_drift, window_temperature, window_temperature_low, "
        "window_temperature_high, temperature_ratio, temperature_z, temperature_p_value, ece_drift, "
        "ece_estimate, ece_low, ece_high, ece_excess, p_value, ece, baseline_ece, p_threshold, nll, accuracy, "
        "mean_confidence, coverage, accepted_accuracy}], drifted_groups, skipped_groups, min_group_size, "
        "group_weighted_ece, reliability [{lower, upper, count, mean_confidence, accuracy, gap, sparse}], "
        "sequential, early_warning, change_point, refit_window_start, tests [{test, scope, label, fired, "
        "p_value, level, effect, effect_low, effect_high, sentence, compares, statistic, refused, "
        "metrics {output_collapsed}, detail}], policy {min_window, p_threshold, tests, temperature_margin, "
        "equivalence_margin, equivalence_level, min_expected_errors, ece_tolerance, ece_estimator, collapse_spread_ratio, min_group_size, "
        "confidence_level, n_resamples, seed, min_bin_count, cooldown, cusum_reference, cusum_threshold, "
        "sequential_min_rows, sequential_escalate_after, label_settle_time, confidence_shift_level, "
        "shift_min_rows, diagnosis_level, prior_shift_level, prior_min_rows, prior_sample_capacity, insufficient_data_streak, undetermined_streak}, "
        "shift_kind, shift_fix, diagnosis, prior_test, estimators [{estimator, window {estimator, estimate, low, "
        "high, confidence_level, n, n_bins, temperature, binning, convention, method, squared_estimate, "
        "bandwidth, p_calibrated}, reference {estimator, estimate, low, high, confidence_level, n, n_bins, "
        "temperature, binning, convention, method, squared_estimate, bandwidth, p_calibrated}}]"
    ),
    "diagnose": (
        "reference, window, served, reference_n, window_n, served_n, temperature, verdict, kind, fix, confirmed, "
        "priors_moved, prior_p_value, prior_shift, prior_shift_low, prior_shift_high, priors, reference_priors, "
        "tests_fired, reweighted_tests_fired, gain, gain_z, accuracy, accuracy_floor, confidence_shifted, "
        "reasons, priors_low, priors_high, em_iterations, em_converged, prior_test {fired, p_value, level, "
        "statistic, df, effect, effect_low, effect_high, n, reference_n, confidence_level}, "
        "class_accuracy {fired, p_value, level, statistic, df, n, accuracy, expected_accuracy}, "
        "early_warning {temperature, n, labelled, tested, shifted, direction, predicted_accuracy, "
        "predicted_accuracy_low, predicted_accuracy_high, mean_confidence, reference_n, "
        "reference_mean_confidence, reference_accuracy, confidence_shift, statistic, bins, p_value, level, "
        "min_rows, labelled_accuracy, labelled_predicted_accuracy, confidence_level, test, rebinned, "
        "accuracy_method}, policy {min_window, p_threshold, tests, temperature_margin, equivalence_margin, "
        "equivalence_level, min_expected_errors, "
        "ece_tolerance, ece_estimator, collapse_spread_ratio, min_group_size, confidence_level, n_resamples, "
        "seed, min_bin_count, cooldown, cusum_reference, cusum_threshold, sequential_min_rows, "
        "sequential_escalate_after, label_settle_time, confidence_shift_level, shift_min_rows, "
        "diagnosis_level, prior_shift_level, prior_min_rows, prior_sample_capacity, insufficient_data_streak, undetermined_streak}"
    ),
    "export": (
        "directory, model_name, model_version, until, n_classes, days_written, days_skipped, rows_written"
    ),
    "prune": (
        "retention, cutoff, dry_run, log {cutoff, archive, dry_run, versions [{model_name, model_version, "
        "rows_deleted, days_archived, rows_archived, days_already_archived, rows_kept}]}, check_runs_deleted"
    ),
    "setup-db": (
        "steps [{subject, action (created|updated|unchanged), detail}], urls, changed"
    ),
    "alerts install": (
        "api_url, block, block_id, block_status (saved|existing), destination, automations [{key, name, event, "
        "id, status (created|updated), removed_duplicates}]"
    ),
    "lock": (
        "action, model_name, holder {name, holder, machine, pid, description, acquired_at, expires_at, expired, "
        "alive}"
    ),
    "log": (
        "file, received, written, unchanged, refused [{index, request_id, reason}]"
    ),
    "labels attach": (
        "file, received, attached, unchanged, conflicts [{request_id, existing_label, new_label}], unknown, "
        "refused [{index, request_id, reason}]"
    ),
}
