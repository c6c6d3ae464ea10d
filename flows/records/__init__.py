"""What Thermostat writes outside Python, typed both ways: one writer and one reader per record.

Version records (:mod:`flows.records.versions`: the tags of a registered version and the
monitor's state on it), the runs beside the checks and refits (:mod:`flows.records.runs`: a
check's run, a refit's record, the links between them), the payloads of the Prefect events
(:mod:`flows.records.events`), what a flow run ends with (:mod:`flows.records.outcomes`) and a
version's MLflow description (:mod:`flows.records.descriptions`). No MLflow and no Prefect here: the MLflow side
(:mod:`flows.registry`) stores them, the Prefect side (:mod:`flows.orchestration`) emits them, the
dashboard reads them back.
"""
