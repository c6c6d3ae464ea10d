"""The Prefect side, and where and when work runs: the embedded API, events, alerts, Dask, leases.

:mod:`flows.orchestration.embedded` starts the temporary Prefect API of a run without
``PREFECT_API_URL``; :mod:`flows.orchestration.events` emits the typed events of
:mod:`flows.records.events`; :mod:`flows.orchestration.alerts` installs the automations that
notify the person on call; :mod:`flows.orchestration.engines` and
:mod:`flows.orchestration.cluster` run per-partition work in this process or on a Dask cluster;
:mod:`flows.orchestration.local_only` keeps a run on this machine; :mod:`flows.orchestration.locks`
is the per-model lease that lets one worker at a time write a model's versions (on the
prediction log's database, not Prefect's, and with its own ``thermostat lock`` command);
:mod:`flows.orchestration.outcomes` ends a flow run with its outcome; :mod:`flows.orchestration.rollout`
watches the ``refitted`` events a serving hook rolls on. No MLflow, no pipeline.
"""
