"""The Prefect side, and where work runs: the embedded API, events, alert automations, Dask.

:mod:`flows.orchestration.embedded` starts the temporary Prefect API of a run without
``PREFECT_API_URL``; :mod:`flows.orchestration.events` emits the typed events of
:mod:`flows.records.events`; :mod:`flows.orchestration.alerts` installs the automations that
notify the person on call; :mod:`flows.orchestration.engines` and
:mod:`flows.orchestration.cluster` run per-partition work in this process or on a Dask cluster;
:mod:`flows.orchestration.local_only` keeps a run on this machine. No MLflow, no pipeline.
"""
