"""The pipelines: the Prefect flows the deployments run, and what they share.

Each module here that defines a ``@flow`` (post-finetune, monitor, refit, ...) is run by a
deployment of ``prefect.yaml``, and no such module imports another: an import-linter contract
in ``pyproject.toml`` keeps them apart, and a test checks that it names every module with a
flow. They share the steps of a registration as pure functions (:mod:`flows.pipelines.steps`),
the monitor's rules as a pure function (:mod:`flows.pipelines.monitor_rules`), the tasks and
retry policy (:mod:`flows.pipelines.tasks`), the recoverable registration
(:mod:`flows.pipelines.registration`) and what it records (:mod:`flows.pipelines.reports`).
They hold the model's lease (:mod:`flows.orchestration.locks`) while they write, reach MLflow
through :mod:`flows.registry` and Prefect's events through :mod:`flows.orchestration`, and
write the records of :mod:`flows.records`.
"""
