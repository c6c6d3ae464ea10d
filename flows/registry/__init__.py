"""The MLflow side: the registry adapter, candidate checkpoints, the calibrated pyfunc and serving.

:class:`flows.registry.adapter.MlflowRegistry` is the one place that talks to MLflow (tracking
and model registry; it returns Thermostat's records, never MLflow's entities);
:mod:`flows.registry.checkpoint` reads a candidate checkpoint and its digest;
:mod:`flows.registry.model` is the calibrated pyfunc logged as a model from code;
:mod:`flows.registry.serving` serves a registered version and logs what it served. No Prefect.
"""
