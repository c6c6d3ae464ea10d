"""The pipelines: the three sibling flows — post-finetune, monitor, refit — and what they share.

``post_finetune`` (:mod:`flows.pipelines.post_finetune`), ``monitor`` (:mod:`flows.pipelines.monitor`)
and ``refit`` (:mod:`flows.pipelines.refit`) are the Prefect flows the deployments run
(``prefect.yaml``); no flow imports another. They share the steps of a registration as pure
functions (:mod:`flows.pipelines.steps`), the monitor's rules as a pure function
(:mod:`flows.pipelines.monitor_rules`), the tasks and retry policy (:mod:`flows.pipelines.tasks`),
the recoverable registration (:mod:`flows.pipelines.registration`) and the per-model lock
(:mod:`flows.pipelines.locks`). They reach MLflow through :mod:`flows.registry` and Prefect's
events through :mod:`flows.orchestration`, and write the records of :mod:`flows.records`.
"""
