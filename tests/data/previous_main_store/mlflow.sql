BEGIN TRANSACTION;
CREATE TABLE alembic_version (
	version_num VARCHAR(32) NOT NULL, 
	CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
);
INSERT INTO "alembic_version" VALUES('dc11669786a5');
CREATE TABLE "assessments" (
	assessment_id VARCHAR(50) NOT NULL, 
	trace_id VARCHAR(50) NOT NULL, 
	name VARCHAR(250) NOT NULL, 
	assessment_type VARCHAR(20) NOT NULL, 
	value TEXT NOT NULL, 
	error TEXT, 
	created_timestamp BIGINT NOT NULL, 
	last_updated_timestamp BIGINT NOT NULL, 
	source_type VARCHAR(50) NOT NULL, 
	source_id VARCHAR(250), 
	run_id VARCHAR(32), 
	span_id VARCHAR(50), 
	rationale TEXT, 
	overrides VARCHAR(50), 
	valid BOOLEAN NOT NULL, 
	assessment_metadata TEXT, 
	experiment_id INTEGER, 
	trace_timestamp_ms BIGINT, 
	aggregate_value FLOAT, 
	is_numeric_value BOOLEAN DEFAULT 0 NOT NULL, 
	CONSTRAINT assessments_pk PRIMARY KEY (assessment_id), 
	CONSTRAINT fk_assessments_trace_id FOREIGN KEY(trace_id) REFERENCES trace_info (request_id) ON DELETE CASCADE
);
CREATE TABLE budget_policies (
	budget_policy_id VARCHAR(36) NOT NULL, 
	budget_unit VARCHAR(32) NOT NULL, 
	budget_amount FLOAT NOT NULL, 
	duration_unit VARCHAR(32) NOT NULL, 
	duration_value INTEGER NOT NULL, 
	target_scope VARCHAR(32) NOT NULL, 
	budget_action VARCHAR(32) NOT NULL, 
	created_by VARCHAR(255), 
	created_at BIGINT NOT NULL, 
	last_updated_by VARCHAR(255), 
	last_updated_at BIGINT NOT NULL, 
	workspace VARCHAR(63) DEFAULT 'default' NOT NULL, target_value VARCHAR(255), 
	CONSTRAINT budget_policies_pk PRIMARY KEY (budget_policy_id)
);
CREATE TABLE "datasets" (
	dataset_uuid VARCHAR(36) NOT NULL, 
	experiment_id INTEGER NOT NULL, 
	name VARCHAR(500) NOT NULL, 
	digest VARCHAR(36) NOT NULL, 
	dataset_source_type VARCHAR(36) NOT NULL, 
	dataset_source TEXT NOT NULL, 
	dataset_schema TEXT, 
	dataset_profile TEXT, 
	CONSTRAINT dataset_pk PRIMARY KEY (experiment_id, name, digest), 
	CONSTRAINT fk_datasets_experiment_id_experiments FOREIGN KEY(experiment_id) REFERENCES experiments (experiment_id) ON DELETE CASCADE
);
CREATE TABLE endpoint_bindings (
	endpoint_id VARCHAR(36) NOT NULL, 
	resource_type VARCHAR(50) NOT NULL, 
	resource_id VARCHAR(255) NOT NULL, 
	created_at BIGINT NOT NULL, 
	created_by VARCHAR(255), 
	last_updated_at BIGINT NOT NULL, 
	last_updated_by VARCHAR(255), display_name VARCHAR(255), 
	CONSTRAINT endpoint_bindings_pk PRIMARY KEY (endpoint_id, resource_type, resource_id), 
	CONSTRAINT fk_endpoint_bindings_endpoint_id FOREIGN KEY(endpoint_id) REFERENCES endpoints (endpoint_id) ON DELETE CASCADE
);
CREATE TABLE endpoint_model_mappings (
	mapping_id VARCHAR(36) NOT NULL, 
	endpoint_id VARCHAR(36) NOT NULL, 
	model_definition_id VARCHAR(36) NOT NULL, 
	weight FLOAT NOT NULL, 
	created_by VARCHAR(255), 
	created_at BIGINT NOT NULL, linkage_type VARCHAR(64) DEFAULT 'PRIMARY' NOT NULL, fallback_order INTEGER, 
	CONSTRAINT endpoint_model_mappings_pk PRIMARY KEY (mapping_id), 
	CONSTRAINT fk_endpoint_model_mappings_endpoint_id FOREIGN KEY(endpoint_id) REFERENCES endpoints (endpoint_id) ON DELETE CASCADE, 
	CONSTRAINT fk_endpoint_model_mappings_model_definition_id FOREIGN KEY(model_definition_id) REFERENCES model_definitions (model_definition_id)
);
CREATE TABLE endpoint_tags (
	"key" VARCHAR(250) NOT NULL, 
	value VARCHAR(5000), 
	endpoint_id VARCHAR(36) NOT NULL, 
	CONSTRAINT endpoint_tag_pk PRIMARY KEY ("key", endpoint_id), 
	CONSTRAINT fk_endpoint_tags_endpoint_id FOREIGN KEY(endpoint_id) REFERENCES endpoints (endpoint_id) ON DELETE CASCADE
);
CREATE TABLE "endpoints" (
	endpoint_id VARCHAR(36) NOT NULL, 
	name VARCHAR(255), 
	created_by VARCHAR(255), 
	created_at BIGINT NOT NULL, 
	last_updated_by VARCHAR(255), 
	last_updated_at BIGINT NOT NULL, 
	routing_strategy VARCHAR(64), 
	fallback_config_json TEXT, 
	experiment_id INTEGER, 
	usage_tracking BOOLEAN DEFAULT '0' NOT NULL, 
	workspace VARCHAR(63) DEFAULT 'default' NOT NULL, 
	CONSTRAINT endpoints_pk PRIMARY KEY (endpoint_id), 
	CONSTRAINT fk_endpoints_experiment_id FOREIGN KEY(experiment_id) REFERENCES experiments (experiment_id) ON DELETE SET NULL, 
	CONSTRAINT uq_endpoints_workspace_name UNIQUE (workspace, name)
);
CREATE TABLE entity_associations (
	association_id VARCHAR(36) NOT NULL, 
	source_type VARCHAR(36) NOT NULL, 
	source_id VARCHAR(36) NOT NULL, 
	destination_type VARCHAR(36) NOT NULL, 
	destination_id VARCHAR(36) NOT NULL, 
	created_time BIGINT, 
	CONSTRAINT entity_associations_pk PRIMARY KEY (source_type, source_id, destination_type, destination_id)
);
CREATE TABLE "evaluation_dataset_records" (
	dataset_record_id VARCHAR(36) NOT NULL, 
	dataset_id VARCHAR(36) NOT NULL, 
	inputs JSON NOT NULL, 
	expectations JSON, 
	tags JSON, 
	source JSON, 
	source_id VARCHAR(36), 
	source_type VARCHAR(255), 
	created_time BIGINT, 
	last_update_time BIGINT, 
	created_by VARCHAR(255), 
	last_updated_by VARCHAR(255), 
	input_hash VARCHAR(64) NOT NULL, outputs JSON, 
	CONSTRAINT evaluation_dataset_records_pk PRIMARY KEY (dataset_record_id), 
	CONSTRAINT fk_evaluation_dataset_records_dataset_id FOREIGN KEY(dataset_id) REFERENCES evaluation_datasets (dataset_id) ON DELETE CASCADE, 
	CONSTRAINT unique_dataset_input UNIQUE (dataset_id, input_hash)
);
CREATE TABLE evaluation_dataset_tags (
	dataset_id VARCHAR(36) NOT NULL, 
	"key" VARCHAR(255) NOT NULL, 
	value VARCHAR(5000), 
	CONSTRAINT evaluation_dataset_tags_pk PRIMARY KEY (dataset_id, "key"), 
	CONSTRAINT fk_evaluation_dataset_tags_dataset_id FOREIGN KEY(dataset_id) REFERENCES evaluation_datasets (dataset_id) ON DELETE CASCADE
);
CREATE TABLE "evaluation_datasets" (
	dataset_id VARCHAR(36) NOT NULL, 
	name VARCHAR(255) NOT NULL, 
	schema TEXT, 
	profile TEXT, 
	digest VARCHAR(64), 
	created_time BIGINT, 
	last_update_time BIGINT, 
	created_by VARCHAR(255), 
	last_updated_by VARCHAR(255), 
	workspace VARCHAR(63) DEFAULT 'default' NOT NULL, 
	CONSTRAINT evaluation_datasets_pk PRIMARY KEY (dataset_id)
);
CREATE TABLE "experiment_tags" (
	"key" VARCHAR(250) NOT NULL, 
	value TEXT, 
	experiment_id INTEGER NOT NULL, 
	CONSTRAINT experiment_tag_pk PRIMARY KEY ("key", experiment_id), 
	FOREIGN KEY(experiment_id) REFERENCES experiments (experiment_id)
);
CREATE TABLE "experiments" (
	experiment_id INTEGER NOT NULL, 
	name VARCHAR(256) NOT NULL, 
	artifact_location VARCHAR(256), 
	lifecycle_stage VARCHAR(32), 
	creation_time BIGINT, 
	last_update_time BIGINT, 
	workspace VARCHAR(63) DEFAULT 'default' NOT NULL, 
	CONSTRAINT experiment_pk PRIMARY KEY (experiment_id), 
	CONSTRAINT experiments_lifecycle_stage CHECK (lifecycle_stage IN ('active', 'deleted')), 
	CONSTRAINT uq_experiments_workspace_name UNIQUE (workspace, name)
);
INSERT INTO "experiments" VALUES(0,'Default','/tmp/mlruns/0','active',1796144733878,1796144733878,'default');
INSERT INTO "experiments" VALUES(1,'thermostat-demo-finetunes','file://@STATE_DIR@/artifacts/thermostat-demo-finetunes','active',1796144733947,1796144733947,'default');
INSERT INTO "experiments" VALUES(2,'thermostat','file://@STATE_DIR@/artifacts','active',1796144760619,1796144760619,'default');
INSERT INTO "experiments" VALUES(3,'thermostat-monitoring','file://@STATE_DIR@/artifacts/thermostat-monitoring','active',1796144773235,1796144773235,'default');
CREATE TABLE guardrail_configs (
	endpoint_id VARCHAR(36) NOT NULL, 
	guardrail_id VARCHAR(36) NOT NULL, 
	execution_order INTEGER, 
	created_by VARCHAR(255), 
	created_at BIGINT NOT NULL, 
	workspace VARCHAR(63) DEFAULT 'default' NOT NULL, 
	CONSTRAINT guardrail_configs_pk PRIMARY KEY (endpoint_id, guardrail_id), 
	CONSTRAINT fk_guardrail_configs_endpoint_id FOREIGN KEY(endpoint_id) REFERENCES endpoints (endpoint_id) ON DELETE CASCADE, 
	CONSTRAINT fk_guardrail_configs_guardrail_id FOREIGN KEY(guardrail_id) REFERENCES guardrails (guardrail_id) ON DELETE CASCADE
);
CREATE TABLE guardrails (
	guardrail_id VARCHAR(36) NOT NULL, 
	name VARCHAR(255) NOT NULL, 
	scorer_id VARCHAR(36) NOT NULL, 
	scorer_version INTEGER NOT NULL, 
	stage VARCHAR(32) NOT NULL, 
	action VARCHAR(32) NOT NULL, 
	action_endpoint_id VARCHAR(36), 
	created_by VARCHAR(255), 
	created_at BIGINT NOT NULL, 
	last_updated_by VARCHAR(255), 
	last_updated_at BIGINT NOT NULL, 
	workspace VARCHAR(63) DEFAULT 'default' NOT NULL, 
	CONSTRAINT guardrails_pk PRIMARY KEY (guardrail_id), 
	CONSTRAINT fk_guardrails_scorer_version FOREIGN KEY(scorer_id, scorer_version) REFERENCES scorer_versions (scorer_id, scorer_version), 
	CONSTRAINT fk_guardrails_action_endpoint_id FOREIGN KEY(action_endpoint_id) REFERENCES endpoints (endpoint_id) ON DELETE SET NULL
);
CREATE TABLE input_tags (
	input_uuid VARCHAR(36) NOT NULL, 
	name VARCHAR(255) NOT NULL, 
	value VARCHAR(500) NOT NULL, 
	CONSTRAINT input_tags_pk PRIMARY KEY (input_uuid, name)
);
CREATE TABLE inputs (
	input_uuid VARCHAR(36) NOT NULL, 
	source_type VARCHAR(36) NOT NULL, 
	source_id VARCHAR(36) NOT NULL, 
	destination_type VARCHAR(36) NOT NULL, 
	destination_id VARCHAR(36) NOT NULL, step BIGINT DEFAULT '0' NOT NULL, 
	CONSTRAINT inputs_pk PRIMARY KEY (source_type, source_id, destination_type, destination_id)
);
CREATE TABLE issues (
	issue_id VARCHAR(36) NOT NULL, 
	experiment_id INTEGER NOT NULL, 
	name VARCHAR(250) NOT NULL, 
	description TEXT NOT NULL, 
	status VARCHAR(50) NOT NULL, 
	severity VARCHAR(50), 
	root_causes TEXT, 
	source_run_id VARCHAR(32), 
	categories TEXT, 
	created_timestamp BIGINT NOT NULL, 
	last_updated_timestamp BIGINT NOT NULL, 
	created_by VARCHAR(255), 
	CONSTRAINT issues_pk PRIMARY KEY (issue_id), 
	CONSTRAINT fk_issues_experiment_id FOREIGN KEY(experiment_id) REFERENCES experiments (experiment_id) ON DELETE CASCADE, 
	CONSTRAINT fk_issues_source_run_id FOREIGN KEY(source_run_id) REFERENCES runs (run_uuid) ON DELETE SET NULL
);
CREATE TABLE job_locks (
	lock_key VARCHAR(255) NOT NULL, 
	job_id VARCHAR(36) NOT NULL, 
	acquired_at BIGINT NOT NULL, 
	CONSTRAINT job_locks_pk PRIMARY KEY (lock_key), 
	CONSTRAINT fk_job_locks_job_id FOREIGN KEY(job_id) REFERENCES jobs (id) ON DELETE CASCADE
);
CREATE TABLE "jobs" (
	id VARCHAR(36) NOT NULL, 
	creation_time BIGINT NOT NULL, 
	job_name VARCHAR(500) NOT NULL, 
	params TEXT NOT NULL, 
	timeout FLOAT, 
	status INTEGER NOT NULL, 
	result TEXT, 
	retry_count INTEGER NOT NULL, 
	last_update_time BIGINT NOT NULL, 
	workspace VARCHAR(63) DEFAULT 'default' NOT NULL, status_details JSON, creator VARCHAR(255), executor_backend VARCHAR(255), lease_expires_at BIGINT, status_message TEXT, progress JSON, progress_updated_at BIGINT, token_hash VARCHAR(64), scoped_permissions JSON, next_attempt_at BIGINT, 
	CONSTRAINT jobs_pk PRIMARY KEY (id)
);
CREATE TABLE label_schemas (
	schema_id VARCHAR(36) NOT NULL, 
	experiment_id INTEGER NOT NULL, 
	name VARCHAR(250) NOT NULL, 
	type VARCHAR(16) NOT NULL, 
	instruction TEXT, 
	enable_comment BOOLEAN DEFAULT '0' NOT NULL, 
	input_type VARCHAR(32) NOT NULL, 
	input_config TEXT NOT NULL, 
	created_by VARCHAR(255), 
	created_time BIGINT NOT NULL, 
	last_update_time BIGINT NOT NULL, 
	is_default BOOLEAN DEFAULT 0 NOT NULL, 
	CONSTRAINT label_schemas_pk PRIMARY KEY (schema_id), 
	CONSTRAINT fk_label_schemas_experiment_id FOREIGN KEY(experiment_id) REFERENCES experiments (experiment_id) ON DELETE CASCADE, 
	CONSTRAINT uq_label_schemas_exp_name UNIQUE (experiment_id, name)
);
CREATE TABLE "latest_metrics" (
	"key" VARCHAR(250) NOT NULL, 
	value FLOAT NOT NULL, 
	timestamp BIGINT, 
	step BIGINT NOT NULL, 
	is_nan BOOLEAN NOT NULL, 
	run_uuid VARCHAR(32) NOT NULL, 
	CONSTRAINT latest_metric_pk PRIMARY KEY ("key", run_uuid), 
	FOREIGN KEY(run_uuid) REFERENCES runs (run_uuid), 
	CHECK (is_nan IN (0, 1))
);
INSERT INTO "latest_metrics" VALUES('temperature',2.69878921739241217636e+00,1796144761278,0,0,'1c83edbface6451b9e8789937764352c');
INSERT INTO "latest_metrics" VALUES('temperature_low',2.19351211518730471183e+00,1796144761278,0,0,'1c83edbface6451b9e8789937764352c');
INSERT INTO "latest_metrics" VALUES('temperature_high',3.32045726553537212666e+00,1796144761278,0,0,'1c83edbface6451b9e8789937764352c');
INSERT INTO "latest_metrics" VALUES('reference_ece',1.87333871503739327057e-02,1796144761278,0,0,'1c83edbface6451b9e8789937764352c');
INSERT INTO "latest_metrics" VALUES('reference_ece_low',7.13795444382346599976e-04,1796144761278,0,0,'1c83edbface6451b9e8789937764352c');
INSERT INTO "latest_metrics" VALUES('reference_ece_high',3.09197068773552768972e-02,1796144761278,0,0,'1c83edbface6451b9e8789937764352c');
INSERT INTO "latest_metrics" VALUES('calibration_n',449.0,1796144761278,0,0,'1c83edbface6451b9e8789937764352c');
INSERT INTO "latest_metrics" VALUES('calibration_nll_before',2.2309316207957413658e-01,1796144761278,0,0,'1c83edbface6451b9e8789937764352c');
INSERT INTO "latest_metrics" VALUES('calibration_nll_after',1.32555918952140916466e-01,1796144761278,0,0,'1c83edbface6451b9e8789937764352c');
INSERT INTO "latest_metrics" VALUES('holdout_accuracy',9.53281423804226868412e-01,1796144761278,0,0,'1c83edbface6451b9e8789937764352c');
INSERT INTO "latest_metrics" VALUES('holdout_nll_before',3.37577193355287796805e-01,1796144761278,0,0,'1c83edbface6451b9e8789937764352c');
INSERT INTO "latest_metrics" VALUES('holdout_nll_after',1.7786953389579840401e-01,1796144761278,0,0,'1c83edbface6451b9e8789937764352c');
INSERT INTO "latest_metrics" VALUES('holdout_ece_before',0.0358362765394411,1796144761278,0,0,'1c83edbface6451b9e8789937764352c');
INSERT INTO "latest_metrics" VALUES('holdout_ece_after',2.49548910126014232557e-02,1796144761278,0,0,'1c83edbface6451b9e8789937764352c');
INSERT INTO "latest_metrics" VALUES('holdout_brier_before',8.20260161452567165829e-02,1796144761278,0,0,'1c83edbface6451b9e8789937764352c');
INSERT INTO "latest_metrics" VALUES('holdout_brier_after',7.3297128994985957795e-02,1796144761278,0,0,'1c83edbface6451b9e8789937764352c');
INSERT INTO "latest_metrics" VALUES('bootstrap_nll_change',-1.59707659459489448305e-01,1796144761278,0,0,'1c83edbface6451b9e8789937764352c');
INSERT INTO "latest_metrics" VALUES('bootstrap_nll_change_low',-2.82168104382927442674e-01,1796144761278,0,0,'1c83edbface6451b9e8789937764352c');
INSERT INTO "latest_metrics" VALUES('bootstrap_nll_change_high',-5.39895876534691246395e-02,1796144761278,0,0,'1c83edbface6451b9e8789937764352c');
INSERT INTO "latest_metrics" VALUES('gate_threshold',8.58764695004023859148e-01,1796144761278,0,0,'1c83edbface6451b9e8789937764352c');
INSERT INTO "latest_metrics" VALUES('gate_coverage',8.9555555555555554914e-01,1796144761278,0,0,'1c83edbface6451b9e8789937764352c');
INSERT INTO "latest_metrics" VALUES('gate_accepted_accuracy',9.87593052109181135378e-01,1796144761278,0,0,'1c83edbface6451b9e8789937764352c');
INSERT INTO "latest_metrics" VALUES('gate_accuracy_lower_bound',9.71289082498009936905e-01,1796144761278,0,0,'1c83edbface6451b9e8789937764352c');
INSERT INTO "latest_metrics" VALUES('temperature',1.04900317574198886916e+00,1796144767949,0,0,'203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "latest_metrics" VALUES('temperature_low',7.87964575594307437e-01,1796144767949,0,0,'203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "latest_metrics" VALUES('temperature_high',1.39651920505032367536e+00,1796144767949,0,0,'203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "latest_metrics" VALUES('reference_ece',7.14780294961844461787e-03,1796144767949,0,0,'203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "latest_metrics" VALUES('reference_ece_low',0.0,1796144767949,0,0,'203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "latest_metrics" VALUES('reference_ece_high',1.74859754390408045354e-02,1796144767949,0,0,'203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "latest_metrics" VALUES('calibration_n',449.0,1796144767949,0,0,'203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "latest_metrics" VALUES('calibration_nll_before',1.20752299240994870332e-01,1796144767949,0,0,'203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "latest_metrics" VALUES('calibration_nll_after',1.20483364759937441879e-01,1796144767949,0,0,'203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "latest_metrics" VALUES('holdout_accuracy',9.66629588431590636155e-01,1796144767949,0,0,'203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "latest_metrics" VALUES('holdout_nll_before',1.82626775264628449235e-01,1796144767949,0,0,'203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "latest_metrics" VALUES('holdout_nll_after',1.79769126251828836871e-01,1796144767949,0,0,'203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "latest_metrics" VALUES('holdout_ece_before',1.30571193729916556341e-02,1796144767949,0,0,'203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "latest_metrics" VALUES('holdout_ece_after',0.0150742098304299,1796144767949,0,0,'203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "latest_metrics" VALUES('holdout_brier_before',6.19538285081565401335e-02,1796144767949,0,0,'203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "latest_metrics" VALUES('holdout_brier_after',6.20661707027313144791e-02,1796144767949,0,0,'203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "latest_metrics" VALUES('bootstrap_nll_change',-2.85764901279959111432e-03,1796144767949,0,0,'203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "latest_metrics" VALUES('bootstrap_nll_change_low',-7.48704192655524382316e-03,1796144767949,0,0,'203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "latest_metrics" VALUES('bootstrap_nll_change_high',0.000973719844415144,1796144767949,0,0,'203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "latest_metrics" VALUES('gate_threshold',8.86268400262124167454e-01,1796144767949,0,0,'203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "latest_metrics" VALUES('gate_coverage',9.04444444444444495267e-01,1796144767949,0,0,'203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "latest_metrics" VALUES('gate_accepted_accuracy',9.87714987714987668887e-01,1796144767949,0,0,'203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "latest_metrics" VALUES('gate_accuracy_lower_bound',0.971568016532396,1796144767949,0,0,'203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "latest_metrics" VALUES('ece',2.49374145248872809699e-02,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('ece_estimate',2.30352540642707603879e-02,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('ece_low',1.26046506727700118044e-02,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('ece_high',0.0339857935112509,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('ece_excess',4.30186691389682768216e-03,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('nll',1.62051239446048322978e-01,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('accuracy',0.955,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('mean_confidence',0.955707310684492,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('brier',7.24724939298560105749e-02,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('coverage',9.08333333333333325931e-01,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('accepted_accuracy',9.83486238532110146337e-01,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('p_value',9.5182264047881626201e-01,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('n',1200.0,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('drift',0.0,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('temperature_drift',0.0,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('ece_drift',0.0,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('refit_recommended',0.0,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('window_temperature',3.0457603435395759206e+00,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('window_temperature_low',2.61479363201239767278e+00,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('window_temperature_high',3.5477583992503514132e+00,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('temperature_ratio',1.1285654781452,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('temperature_z',1.00902387244977975733e+00,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('temperature_p_value',0.273592535374081,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('cusum_upper',0.0,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('cusum_lower',0.0,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('sequential_alarm',0.0,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('predicted_accuracy',9.57203062088101352955e-01,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('predicted_accuracy_low',9.37994517148226680802e-01,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('predicted_accuracy_high',0.976411607027976,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('served_n',1200.0,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('confidence_shift_p_value',0.976464158604336,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('confidence_shifted',0.0,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('ece.group.camera',2.49374145248872809699e-02,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('temperature_z.group.camera',1.00902387244977975733e+00,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('temperature',2.69878921739241217636e+00,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('baseline_ece',1.87333871503739327057e-02,1796144772972,0,0,'da0c753a91494ec68ecb937ba0055841');
INSERT INTO "latest_metrics" VALUES('ece',1.69746058262055764254e-02,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('ece_estimate',1.25122242627778296197e-02,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('ece_low',0.0,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('ece_high',0.0212555159278814,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('ece_excess',5.36442131315938500191e-03,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('nll',1.07573268774246694201e-01,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('accuracy',9.68333333333333379222e-01,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('mean_confidence',9.68410717142031862714e-01,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('brier',0.0454694342565673,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('coverage',9.16666666666666629659e-01,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('accepted_accuracy',9.94545454545454510331e-01,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('p_value',9.81437984540066254979e-01,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('n',600.0,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('drift',0.0,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('temperature_drift',0.0,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('ece_drift',0.0,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('refit_recommended',0.0,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('window_temperature',1.04585448673718750534e+00,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('window_temperature_low',8.5760950898535326381e-01,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('window_temperature_high',1.27541916917689701627e+00,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('temperature_ratio',9.96998398977606337112e-01,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('temperature_z',-1.54958488675619489305e-02,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('temperature_p_value',5.93286194763736340895e-01,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('cusum_upper',0.0,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('cusum_lower',0.0,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('sequential_alarm',0.0,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('predicted_accuracy',0.978684559402917,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('predicted_accuracy_low',9.59564207523762480178e-01,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('predicted_accuracy_high',9.97804911282071493872e-01,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('served_n',600.0,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('confidence_shift_p_value',9.85916821980242663592e-01,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('confidence_shifted',0.0,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('ece.group.scanner',1.69746058262055764254e-02,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('temperature_z.group.scanner',-1.54958488675619489305e-02,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('temperature',1.04900317574198886916e+00,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('baseline_ece',7.14780294961844461787e-03,1796144772972,0,0,'2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "latest_metrics" VALUES('ece',6.64376184858958690471e-02,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('ece_estimate',6.44692290152909242006e-02,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('ece_low',4.78085187238415226795e-02,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('ece_high',0.0803697150793797,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('ece_excess',4.57358418649169914949e-02,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('nll',5.86660372010079256277e-01,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('accuracy',8.60833333333333339254e-01,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('mean_confidence',9.25870118239300432527e-01,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('brier',2.13537606497807397332e-01,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('coverage',8.19166666666666709595e-01,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('accepted_accuracy',9.38962360122075234691e-01,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('p_value',1.15613583301417723048e-02,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('n',1200.0,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('drift',1.0,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('temperature_drift',1.0,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('ece_drift',0.0,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('refit_recommended',1.0,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('window_temperature',4.71685082459276472377e+00,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('window_temperature_low',4.09407609701012908942e+00,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('window_temperature_high',5.43435959036264115695e+00,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('temperature_ratio',1.74776555137945144302e+00,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('temperature_z',5.14237146343696238659e+00,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('temperature_p_value',1.34608933831770637449e-06,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('cusum_upper',1.58225779027396740161e+01,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('cusum_lower',0.0,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('sequential_alarm',1.0,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('predicted_accuracy',9.27365869642909679271e-01,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('predicted_accuracy_low',9.06606111532111458295e-01,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('predicted_accuracy_high',9.48125627753707900247e-01,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('served_n',1200.0,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('confidence_shift_p_value',6.83027199975012e-05,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('confidence_shifted',1.0,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('ece.group.camera',6.64376184858958690471e-02,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('temperature_z.group.camera',5.14237146343696238659e+00,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('temperature',2.69878921739241217636e+00,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('baseline_ece',1.87333871503739327057e-02,1796144777648,0,0,'b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "latest_metrics" VALUES('ece',5.47183968177696766765e-01,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('ece_estimate',5.46886575839757083095e-01,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('ece_low',5.12649588634286446087e-01,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('ece_high',5.82564521842153681951e-01,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('ece_excess',5.39738772890138607252e-01,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('nll',1.14043430448166791533e+01,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('accuracy',0.295,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('mean_confidence',8.42183968177696695711e-01,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('brier',1.20453371471463244191e+00,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('coverage',5.66666666666666651863e-01,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('accepted_accuracy',3.58823529411764707841e-01,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('p_value',4.09824065878423400436e-176,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('n',600.0,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('drift',1.0,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('temperature_drift',1.0,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('ece_drift',1.0,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('refit_recommended',1.0,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('window_temperature',2.74991705342113901266e+00,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('window_temperature_low',2.4910558121904831097e+00,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('window_temperature_high',3.03567819062504140603e+00,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('temperature_ratio',2.62145731968451567439e+00,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('temperature_z',6.59193744493405731077e+00,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('temperature_p_value',1.94708573700821887478e-10,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('cusum_upper',2.69085431761912730053e+02,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('cusum_lower',0.0,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('sequential_alarm',1.0,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('predicted_accuracy',8.52457810438581820022e-01,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('predicted_accuracy_low',0.82304194352904,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('predicted_accuracy_high',8.81873677348123607977e-01,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('served_n',600.0,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('confidence_shift_p_value',1.97957531483305428773e-41,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('confidence_shifted',1.0,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('ece.group.scanner',5.47183968177696766765e-01,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('temperature_z.group.scanner',6.59193744493405731077e+00,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('temperature',1.04900317574198886916e+00,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('baseline_ece',7.14780294961844461787e-03,1796144777648,0,0,'c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "latest_metrics" VALUES('temperature',4.70202771178343237323e+00,1796144780482,0,0,'871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "latest_metrics" VALUES('temperature_low',4.20444636582570563376e+00,1796144780482,0,0,'871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "latest_metrics" VALUES('temperature_high',5.25849604886977051165e+00,1796144780482,0,0,'871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "latest_metrics" VALUES('reference_ece',2.25710776690744713279e-02,1796144780482,0,0,'871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "latest_metrics" VALUES('reference_ece_low',0.0,1796144780482,0,0,'871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "latest_metrics" VALUES('reference_ece_high',4.07419518079982639902e-02,1796144780482,0,0,'871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "latest_metrics" VALUES('calibration_n',600.0,1796144780482,0,0,'871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "latest_metrics" VALUES('calibration_nll_before',1.31388277471791936612e+00,1796144780482,0,0,'871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "latest_metrics" VALUES('calibration_nll_after',4.69973544976557411345e-01,1796144780482,0,0,'871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "latest_metrics" VALUES('holdout_accuracy',8.60833333333333339254e-01,1796144780482,0,0,'871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "latest_metrics" VALUES('holdout_nll_before',6.02802727367214408182e-01,1796144780482,0,0,'871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "latest_metrics" VALUES('holdout_nll_after',4.90650947229220257828e-01,1796144780482,0,0,'871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "latest_metrics" VALUES('holdout_ece_before',7.56376320341426156002e-02,1796144780482,0,0,'871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "latest_metrics" VALUES('holdout_ece_after',3.55036172896092058759e-02,1796144780482,0,0,'871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "latest_metrics" VALUES('holdout_brier_before',2.25772534742564090493e-01,1796144780482,0,0,'871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "latest_metrics" VALUES('holdout_brier_after',2.12781904822441803037e-01,1796144780482,0,0,'871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "latest_metrics" VALUES('bootstrap_nll_change',-1.12151780137994122599e-01,1796144780482,0,0,'871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "latest_metrics" VALUES('bootstrap_nll_change_low',-1.66217450834915153601e-01,1796144780482,0,0,'871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "latest_metrics" VALUES('bootstrap_nll_change_high',-5.92896772140240474469e-02,1796144780482,0,0,'871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "latest_metrics" VALUES('gate_threshold',9.093421746161302055e-01,1796144780482,0,0,'871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "latest_metrics" VALUES('gate_coverage',5.36666666666666625218e-01,1796144780482,0,0,'871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "latest_metrics" VALUES('gate_accepted_accuracy',9.906832298136646342e-01,1796144780482,0,0,'871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "latest_metrics" VALUES('gate_accuracy_lower_bound',9.72970290545467797471e-01,1796144780482,0,0,'871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "latest_metrics" VALUES('temperature',1.04900317574198886916e+00,1796144784976,0,0,'b6733d8092bd47f087b2692c92b788a7');
INSERT INTO "latest_metrics" VALUES('baseline_ece',0.0150742098304299,1796144784976,0,0,'b6733d8092bd47f087b2692c92b788a7');
INSERT INTO "latest_metrics" VALUES('ece',4.80873115282198837494e-01,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('ece_estimate',4.80663425147179634855e-01,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('ece_low',4.42593225996348038631e-01,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('ece_high',5.18899830144798679398e-01,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('ece_excess',4.73515622197561214523e-01,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('nll',9.28096300978847565943e+00,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('accuracy',3.48333333333333328152e-01,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('mean_confidence',8.29206448615532165646e-01,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('brier',1.09597168262831035079e+00,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('coverage',0.555,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('accepted_accuracy',4.41441441441441428938e-01,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('p_value',1.83234512935854251102e-114,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('n',600.0,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('drift',1.0,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('temperature_drift',1.0,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('ece_drift',1.0,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('refit_recommended',0.0,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('window_temperature',2.72367839090237540133e+00,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('window_temperature_low',2.45006774841269692188e+00,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('window_temperature_high',3.02784442669989850571e+00,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('temperature_ratio',2.59644437108194869878e+00,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('temperature_z',6.525322055239406005e+00,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('temperature_p_value',2.976895745650660576e-10,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('cusum_upper',2.12041459089851059617e+02,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('cusum_lower',0.0,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('sequential_alarm',1.0,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('predicted_accuracy',8.39480290876416845868e-01,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('predicted_accuracy_low',8.09428115867411590578e-01,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('predicted_accuracy_high',8.69532465885422101159e-01,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('served_n',600.0,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('confidence_shift_p_value',2.56237179867688758764e-47,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('confidence_shifted',1.0,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('ece.group.scanner',4.80873115282198837494e-01,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('temperature_z.group.scanner',6.525322055239406005e+00,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('temperature',1.04900317574198886916e+00,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('baseline_ece',7.14780294961844461787e-03,1796144787838,0,0,'4e20b4d7456842089a553b4b579391d2');
INSERT INTO "latest_metrics" VALUES('ece',0.038080440865459,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('ece_estimate',3.30137858695710162404e-02,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('ece_low',1.73714340282291462846e-02,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('ece_high',0.0499677988394097,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('ece_excess',1.04427082004965449124e-02,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('nll',4.99682540921495665919e-01,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('accuracy',8.63333333333333285963e-01,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('mean_confidence',8.34510811822305909046e-01,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('brier',2.06570883067138555411e-01,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('coverage',5.21666666666666611895e-01,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('accepted_accuracy',9.92012779552715606712e-01,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('p_value',7.63626533265326479238e-01,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('n',1200.0,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('drift',0.0,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('temperature_drift',0.0,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('ece_drift',0.0,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('refit_recommended',0.0,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('window_temperature',4.68325050598022940562e+00,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('window_temperature_low',4.31659585347077623396e+00,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('window_temperature_high',5.08104905955670815842e+00,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('temperature_ratio',9.9600657270561243628e-01,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('temperature_z',-5.73485963204352841571e-02,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('temperature_p_value',7.39535688663592871705e-01,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('cusum_upper',0.0,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('cusum_lower',0.0,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('sequential_alarm',0.0,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('predicted_accuracy',8.55035201363107622007e-01,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('predicted_accuracy_low',8.24193846375969485507e-01,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('predicted_accuracy_high',8.85876556350245758508e-01,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('served_n',1200.0,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('confidence_shift_p_value',1.23177513612923339447e-01,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('confidence_shifted',0.0,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('ece.group.camera',0.038080440865459,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('temperature_z.group.camera',-5.73485963204352841571e-02,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('temperature',4.70202771178343237323e+00,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('baseline_ece',2.25710776690744713279e-02,1796144787838,0,0,'680bf72048354f038f25c95f37066be0');
INSERT INTO "latest_metrics" VALUES('n',0.0,1796144791250,0,0,'c11f2e238dc7450badb31ff8b05e5cdb');
INSERT INTO "latest_metrics" VALUES('drift',0.0,1796144791250,0,0,'c11f2e238dc7450badb31ff8b05e5cdb');
INSERT INTO "latest_metrics" VALUES('temperature_drift',0.0,1796144791250,0,0,'c11f2e238dc7450badb31ff8b05e5cdb');
INSERT INTO "latest_metrics" VALUES('ece_drift',0.0,1796144791250,0,0,'c11f2e238dc7450badb31ff8b05e5cdb');
INSERT INTO "latest_metrics" VALUES('refit_recommended',0.0,1796144791250,0,0,'c11f2e238dc7450badb31ff8b05e5cdb');
INSERT INTO "latest_metrics" VALUES('served_n',0.0,1796144791250,0,0,'c11f2e238dc7450badb31ff8b05e5cdb');
INSERT INTO "latest_metrics" VALUES('confidence_shifted',0.0,1796144791250,0,0,'c11f2e238dc7450badb31ff8b05e5cdb');
INSERT INTO "latest_metrics" VALUES('temperature',1.04900317574198886916e+00,1796144791250,0,0,'c11f2e238dc7450badb31ff8b05e5cdb');
INSERT INTO "latest_metrics" VALUES('baseline_ece',7.14780294961844461787e-03,1796144791250,0,0,'c11f2e238dc7450badb31ff8b05e5cdb');
INSERT INTO "latest_metrics" VALUES('n',0.0,1796144791250,0,0,'46ef0db0b12346aebdfea4d3c74e5c7f');
INSERT INTO "latest_metrics" VALUES('drift',0.0,1796144791250,0,0,'46ef0db0b12346aebdfea4d3c74e5c7f');
INSERT INTO "latest_metrics" VALUES('temperature_drift',0.0,1796144791250,0,0,'46ef0db0b12346aebdfea4d3c74e5c7f');
INSERT INTO "latest_metrics" VALUES('ece_drift',0.0,1796144791250,0,0,'46ef0db0b12346aebdfea4d3c74e5c7f');
INSERT INTO "latest_metrics" VALUES('refit_recommended',0.0,1796144791250,0,0,'46ef0db0b12346aebdfea4d3c74e5c7f');
INSERT INTO "latest_metrics" VALUES('served_n',0.0,1796144791250,0,0,'46ef0db0b12346aebdfea4d3c74e5c7f');
INSERT INTO "latest_metrics" VALUES('confidence_shifted',0.0,1796144791250,0,0,'46ef0db0b12346aebdfea4d3c74e5c7f');
INSERT INTO "latest_metrics" VALUES('temperature',4.70202771178343237323e+00,1796144791250,0,0,'46ef0db0b12346aebdfea4d3c74e5c7f');
INSERT INTO "latest_metrics" VALUES('baseline_ece',2.25710776690744713279e-02,1796144791250,0,0,'46ef0db0b12346aebdfea4d3c74e5c7f');
INSERT INTO "latest_metrics" VALUES('n',0.0,1796144793411,0,0,'a96b9dfe9a524c1397f50d219aa7666d');
INSERT INTO "latest_metrics" VALUES('drift',0.0,1796144793411,0,0,'a96b9dfe9a524c1397f50d219aa7666d');
INSERT INTO "latest_metrics" VALUES('temperature_drift',0.0,1796144793411,0,0,'a96b9dfe9a524c1397f50d219aa7666d');
INSERT INTO "latest_metrics" VALUES('ece_drift',0.0,1796144793411,0,0,'a96b9dfe9a524c1397f50d219aa7666d');
INSERT INTO "latest_metrics" VALUES('refit_recommended',0.0,1796144793411,0,0,'a96b9dfe9a524c1397f50d219aa7666d');
INSERT INTO "latest_metrics" VALUES('served_n',0.0,1796144793411,0,0,'a96b9dfe9a524c1397f50d219aa7666d');
INSERT INTO "latest_metrics" VALUES('confidence_shifted',0.0,1796144793411,0,0,'a96b9dfe9a524c1397f50d219aa7666d');
INSERT INTO "latest_metrics" VALUES('temperature',1.04900317574198886916e+00,1796144793411,0,0,'a96b9dfe9a524c1397f50d219aa7666d');
INSERT INTO "latest_metrics" VALUES('baseline_ece',7.14780294961844461787e-03,1796144793411,0,0,'a96b9dfe9a524c1397f50d219aa7666d');
INSERT INTO "latest_metrics" VALUES('n',0.0,1796144793411,0,0,'3f5ccebd58d0452b9bd967e6c469b5a0');
INSERT INTO "latest_metrics" VALUES('drift',0.0,1796144793411,0,0,'3f5ccebd58d0452b9bd967e6c469b5a0');
INSERT INTO "latest_metrics" VALUES('temperature_drift',0.0,1796144793411,0,0,'3f5ccebd58d0452b9bd967e6c469b5a0');
INSERT INTO "latest_metrics" VALUES('ece_drift',0.0,1796144793411,0,0,'3f5ccebd58d0452b9bd967e6c469b5a0');
INSERT INTO "latest_metrics" VALUES('refit_recommended',0.0,1796144793411,0,0,'3f5ccebd58d0452b9bd967e6c469b5a0');
INSERT INTO "latest_metrics" VALUES('served_n',0.0,1796144793411,0,0,'3f5ccebd58d0452b9bd967e6c469b5a0');
INSERT INTO "latest_metrics" VALUES('confidence_shifted',0.0,1796144793411,0,0,'3f5ccebd58d0452b9bd967e6c469b5a0');
INSERT INTO "latest_metrics" VALUES('temperature',4.70202771178343237323e+00,1796144793411,0,0,'3f5ccebd58d0452b9bd967e6c469b5a0');
INSERT INTO "latest_metrics" VALUES('baseline_ece',2.25710776690744713279e-02,1796144793411,0,0,'3f5ccebd58d0452b9bd967e6c469b5a0');
INSERT INTO "latest_metrics" VALUES('n',0.0,1796144795579,0,0,'6a6c715b781241199a18cea2dfae6f32');
INSERT INTO "latest_metrics" VALUES('drift',0.0,1796144795579,0,0,'6a6c715b781241199a18cea2dfae6f32');
INSERT INTO "latest_metrics" VALUES('temperature_drift',0.0,1796144795579,0,0,'6a6c715b781241199a18cea2dfae6f32');
INSERT INTO "latest_metrics" VALUES('ece_drift',0.0,1796144795579,0,0,'6a6c715b781241199a18cea2dfae6f32');
INSERT INTO "latest_metrics" VALUES('refit_recommended',0.0,1796144795579,0,0,'6a6c715b781241199a18cea2dfae6f32');
INSERT INTO "latest_metrics" VALUES('served_n',0.0,1796144795579,0,0,'6a6c715b781241199a18cea2dfae6f32');
INSERT INTO "latest_metrics" VALUES('confidence_shifted',0.0,1796144795579,0,0,'6a6c715b781241199a18cea2dfae6f32');
INSERT INTO "latest_metrics" VALUES('temperature',1.04900317574198886916e+00,1796144795579,0,0,'6a6c715b781241199a18cea2dfae6f32');
INSERT INTO "latest_metrics" VALUES('baseline_ece',7.14780294961844461787e-03,1796144795579,0,0,'6a6c715b781241199a18cea2dfae6f32');
INSERT INTO "latest_metrics" VALUES('n',0.0,1796144795579,0,0,'bad62edf2d8d4e77a404bbf5ea0edd60');
INSERT INTO "latest_metrics" VALUES('drift',0.0,1796144795579,0,0,'bad62edf2d8d4e77a404bbf5ea0edd60');
INSERT INTO "latest_metrics" VALUES('temperature_drift',0.0,1796144795579,0,0,'bad62edf2d8d4e77a404bbf5ea0edd60');
INSERT INTO "latest_metrics" VALUES('ece_drift',0.0,1796144795579,0,0,'bad62edf2d8d4e77a404bbf5ea0edd60');
INSERT INTO "latest_metrics" VALUES('refit_recommended',0.0,1796144795579,0,0,'bad62edf2d8d4e77a404bbf5ea0edd60');
INSERT INTO "latest_metrics" VALUES('served_n',0.0,1796144795579,0,0,'bad62edf2d8d4e77a404bbf5ea0edd60');
INSERT INTO "latest_metrics" VALUES('confidence_shifted',0.0,1796144795579,0,0,'bad62edf2d8d4e77a404bbf5ea0edd60');
INSERT INTO "latest_metrics" VALUES('temperature',4.70202771178343237323e+00,1796144795579,0,0,'bad62edf2d8d4e77a404bbf5ea0edd60');
INSERT INTO "latest_metrics" VALUES('baseline_ece',2.25710776690744713279e-02,1796144795579,0,0,'bad62edf2d8d4e77a404bbf5ea0edd60');
CREATE TABLE logged_model_metrics (
	model_id VARCHAR(36) NOT NULL, 
	metric_name VARCHAR(500) NOT NULL, 
	metric_timestamp_ms BIGINT NOT NULL, 
	metric_step BIGINT NOT NULL, 
	metric_value FLOAT, 
	experiment_id INTEGER NOT NULL, 
	run_id VARCHAR(32) NOT NULL, 
	dataset_uuid VARCHAR(36), 
	dataset_name VARCHAR(500), 
	dataset_digest VARCHAR(36), 
	CONSTRAINT logged_model_metrics_pk PRIMARY KEY (model_id, metric_name, metric_timestamp_ms, metric_step, run_id), 
	CONSTRAINT fk_logged_model_metrics_experiment_id FOREIGN KEY(experiment_id) REFERENCES experiments (experiment_id), 
	CONSTRAINT fk_logged_model_metrics_model_id FOREIGN KEY(model_id) REFERENCES logged_models (model_id) ON DELETE CASCADE, 
	CONSTRAINT fk_logged_model_metrics_run_id FOREIGN KEY(run_id) REFERENCES runs (run_uuid) ON DELETE CASCADE
);
CREATE TABLE logged_model_params (
	model_id VARCHAR(36) NOT NULL, 
	experiment_id INTEGER NOT NULL, 
	param_key VARCHAR(255) NOT NULL, 
	param_value TEXT NOT NULL, 
	CONSTRAINT logged_model_params_pk PRIMARY KEY (model_id, param_key), 
	CONSTRAINT fk_logged_model_params_experiment_id FOREIGN KEY(experiment_id) REFERENCES experiments (experiment_id), 
	CONSTRAINT fk_logged_model_params_model_id FOREIGN KEY(model_id) REFERENCES logged_models (model_id) ON DELETE CASCADE
);
CREATE TABLE logged_model_tags (
	model_id VARCHAR(36) NOT NULL, 
	experiment_id INTEGER NOT NULL, 
	tag_key VARCHAR(255) NOT NULL, 
	tag_value TEXT NOT NULL, 
	CONSTRAINT logged_model_tags_pk PRIMARY KEY (model_id, tag_key), 
	CONSTRAINT fk_logged_model_tags_experiment_id FOREIGN KEY(experiment_id) REFERENCES experiments (experiment_id), 
	CONSTRAINT fk_logged_model_tags_model_id FOREIGN KEY(model_id) REFERENCES logged_models (model_id) ON DELETE CASCADE
);
CREATE TABLE logged_models (
	model_id VARCHAR(36) NOT NULL, 
	experiment_id INTEGER NOT NULL, 
	name VARCHAR(500) NOT NULL, 
	artifact_location VARCHAR(1000) NOT NULL, 
	creation_timestamp_ms BIGINT NOT NULL, 
	last_updated_timestamp_ms BIGINT NOT NULL, 
	status INTEGER NOT NULL, 
	lifecycle_stage VARCHAR(32), 
	model_type VARCHAR(500), 
	source_run_id VARCHAR(32), 
	status_message VARCHAR(1000), 
	CONSTRAINT logged_models_pk PRIMARY KEY (model_id), 
	CONSTRAINT logged_models_lifecycle_stage_check CHECK (lifecycle_stage IN ('active', 'deleted')), 
	CONSTRAINT fk_logged_models_experiment_id FOREIGN KEY(experiment_id) REFERENCES experiments (experiment_id) ON DELETE CASCADE
);
CREATE TABLE mcp_access_endpoints (
	id VARCHAR(36) NOT NULL, 
	workspace VARCHAR(63) DEFAULT 'default' NOT NULL, 
	server_name VARCHAR(256) NOT NULL, 
	server_version VARCHAR(128), 
	server_alias VARCHAR(256), 
	url VARCHAR(2048) NOT NULL, 
	transport_type VARCHAR(32) DEFAULT 'streamable-http' NOT NULL, 
	created_by VARCHAR(256), 
	last_updated_by VARCHAR(256), 
	created_at BIGINT NOT NULL, 
	last_updated_at BIGINT NOT NULL, 
	CONSTRAINT mcp_access_endpoints_pk PRIMARY KEY (id), 
	CONSTRAINT mcp_access_endpoints_server_fkey FOREIGN KEY(workspace, server_name) REFERENCES mcp_servers (workspace, name) ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE TABLE mcp_server_aliases (
	workspace VARCHAR(63) DEFAULT 'default' NOT NULL, 
	name VARCHAR(256) NOT NULL, 
	alias VARCHAR(256) NOT NULL, 
	version VARCHAR(128) NOT NULL, 
	CONSTRAINT mcp_server_aliases_pk PRIMARY KEY (workspace, name, alias), 
	CONSTRAINT mcp_server_aliases_server_fkey FOREIGN KEY(workspace, name) REFERENCES mcp_servers (workspace, name) ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE TABLE mcp_server_tags (
	workspace VARCHAR(63) DEFAULT 'default' NOT NULL, 
	name VARCHAR(256) NOT NULL, 
	"key" VARCHAR(250) NOT NULL, 
	value VARCHAR(5000), 
	CONSTRAINT mcp_server_tags_pk PRIMARY KEY (workspace, name, "key"), 
	CONSTRAINT mcp_server_tags_server_fkey FOREIGN KEY(workspace, name) REFERENCES mcp_servers (workspace, name) ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE TABLE mcp_server_version_tags (
	workspace VARCHAR(63) DEFAULT 'default' NOT NULL, 
	name VARCHAR(256) NOT NULL, 
	version VARCHAR(128) NOT NULL, 
	"key" VARCHAR(250) NOT NULL, 
	value VARCHAR(5000), 
	CONSTRAINT mcp_server_version_tags_pk PRIMARY KEY (workspace, name, version, "key"), 
	CONSTRAINT mcp_server_version_tags_version_fkey FOREIGN KEY(workspace, name, version) REFERENCES mcp_server_versions (workspace, name, version) ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE TABLE mcp_server_versions (
	workspace VARCHAR(63) DEFAULT 'default' NOT NULL, 
	name VARCHAR(256) NOT NULL, 
	version VARCHAR(128) NOT NULL, 
	version_major INTEGER NOT NULL, 
	version_minor INTEGER NOT NULL, 
	version_patch INTEGER NOT NULL, 
	version_prerelease_sort_key VARCHAR(512) NOT NULL, 
	server_json JSON NOT NULL, 
	status VARCHAR(20) DEFAULT 'draft' NOT NULL, 
	tools JSON, 
	source VARCHAR(512), 
	connect_options JSON, 
	created_by VARCHAR(256), 
	last_updated_by VARCHAR(256), 
	created_at BIGINT NOT NULL, 
	last_updated_at BIGINT NOT NULL, 
	CONSTRAINT mcp_server_versions_pk PRIMARY KEY (workspace, name, version), 
	CONSTRAINT mcp_server_versions_server_fkey FOREIGN KEY(workspace, name) REFERENCES mcp_servers (workspace, name) ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE TABLE mcp_servers (
	workspace VARCHAR(63) DEFAULT 'default' NOT NULL, 
	name VARCHAR(256) NOT NULL, 
	display_name VARCHAR(256), 
	description TEXT, 
	icons JSON, 
	created_by VARCHAR(256), 
	last_updated_by VARCHAR(256), 
	created_at BIGINT NOT NULL, 
	last_updated_at BIGINT NOT NULL, 
	CONSTRAINT mcp_servers_pk PRIMARY KEY (workspace, name)
);
CREATE TABLE "metrics" (
	"key" VARCHAR(250) NOT NULL, 
	value FLOAT NOT NULL, 
	timestamp BIGINT NOT NULL, 
	run_uuid VARCHAR(32) NOT NULL, 
	step BIGINT DEFAULT '0' NOT NULL, 
	is_nan BOOLEAN DEFAULT '0' NOT NULL, 
	CONSTRAINT metric_pk PRIMARY KEY ("key", timestamp, step, run_uuid, value, is_nan), 
	FOREIGN KEY(run_uuid) REFERENCES runs (run_uuid), 
	CHECK (is_nan IN (0, 1))
);
INSERT INTO "metrics" VALUES('temperature',2.69878921739241217636e+00,1796144761278,'1c83edbface6451b9e8789937764352c',0,0);
INSERT INTO "metrics" VALUES('temperature_low',2.19351211518730471183e+00,1796144761278,'1c83edbface6451b9e8789937764352c',0,0);
INSERT INTO "metrics" VALUES('temperature_high',3.32045726553537212666e+00,1796144761278,'1c83edbface6451b9e8789937764352c',0,0);
INSERT INTO "metrics" VALUES('reference_ece',1.87333871503739327057e-02,1796144761278,'1c83edbface6451b9e8789937764352c',0,0);
INSERT INTO "metrics" VALUES('reference_ece_low',7.13795444382346599976e-04,1796144761278,'1c83edbface6451b9e8789937764352c',0,0);
INSERT INTO "metrics" VALUES('reference_ece_high',3.09197068773552768972e-02,1796144761278,'1c83edbface6451b9e8789937764352c',0,0);
INSERT INTO "metrics" VALUES('calibration_n',449.0,1796144761278,'1c83edbface6451b9e8789937764352c',0,0);
INSERT INTO "metrics" VALUES('calibration_nll_before',2.2309316207957413658e-01,1796144761278,'1c83edbface6451b9e8789937764352c',0,0);
INSERT INTO "metrics" VALUES('calibration_nll_after',1.32555918952140916466e-01,1796144761278,'1c83edbface6451b9e8789937764352c',0,0);
INSERT INTO "metrics" VALUES('holdout_accuracy',9.53281423804226868412e-01,1796144761278,'1c83edbface6451b9e8789937764352c',0,0);
INSERT INTO "metrics" VALUES('holdout_nll_before',3.37577193355287796805e-01,1796144761278,'1c83edbface6451b9e8789937764352c',0,0);
INSERT INTO "metrics" VALUES('holdout_nll_after',1.7786953389579840401e-01,1796144761278,'1c83edbface6451b9e8789937764352c',0,0);
INSERT INTO "metrics" VALUES('holdout_ece_before',0.0358362765394411,1796144761278,'1c83edbface6451b9e8789937764352c',0,0);
INSERT INTO "metrics" VALUES('holdout_ece_after',2.49548910126014232557e-02,1796144761278,'1c83edbface6451b9e8789937764352c',0,0);
INSERT INTO "metrics" VALUES('holdout_brier_before',8.20260161452567165829e-02,1796144761278,'1c83edbface6451b9e8789937764352c',0,0);
INSERT INTO "metrics" VALUES('holdout_brier_after',7.3297128994985957795e-02,1796144761278,'1c83edbface6451b9e8789937764352c',0,0);
INSERT INTO "metrics" VALUES('bootstrap_nll_change',-1.59707659459489448305e-01,1796144761278,'1c83edbface6451b9e8789937764352c',0,0);
INSERT INTO "metrics" VALUES('bootstrap_nll_change_low',-2.82168104382927442674e-01,1796144761278,'1c83edbface6451b9e8789937764352c',0,0);
INSERT INTO "metrics" VALUES('bootstrap_nll_change_high',-5.39895876534691246395e-02,1796144761278,'1c83edbface6451b9e8789937764352c',0,0);
INSERT INTO "metrics" VALUES('gate_threshold',8.58764695004023859148e-01,1796144761278,'1c83edbface6451b9e8789937764352c',0,0);
INSERT INTO "metrics" VALUES('gate_coverage',8.9555555555555554914e-01,1796144761278,'1c83edbface6451b9e8789937764352c',0,0);
INSERT INTO "metrics" VALUES('gate_accepted_accuracy',9.87593052109181135378e-01,1796144761278,'1c83edbface6451b9e8789937764352c',0,0);
INSERT INTO "metrics" VALUES('gate_accuracy_lower_bound',9.71289082498009936905e-01,1796144761278,'1c83edbface6451b9e8789937764352c',0,0);
INSERT INTO "metrics" VALUES('temperature',1.04900317574198886916e+00,1796144767949,'203318f36d3f4299916738a9ad9e7ad5',0,0);
INSERT INTO "metrics" VALUES('temperature_low',7.87964575594307437e-01,1796144767949,'203318f36d3f4299916738a9ad9e7ad5',0,0);
INSERT INTO "metrics" VALUES('temperature_high',1.39651920505032367536e+00,1796144767949,'203318f36d3f4299916738a9ad9e7ad5',0,0);
INSERT INTO "metrics" VALUES('reference_ece',7.14780294961844461787e-03,1796144767949,'203318f36d3f4299916738a9ad9e7ad5',0,0);
INSERT INTO "metrics" VALUES('reference_ece_low',0.0,1796144767949,'203318f36d3f4299916738a9ad9e7ad5',0,0);
INSERT INTO "metrics" VALUES('reference_ece_high',1.74859754390408045354e-02,1796144767949,'203318f36d3f4299916738a9ad9e7ad5',0,0);
INSERT INTO "metrics" VALUES('calibration_n',449.0,1796144767949,'203318f36d3f4299916738a9ad9e7ad5',0,0);
INSERT INTO "metrics" VALUES('calibration_nll_before',1.20752299240994870332e-01,1796144767949,'203318f36d3f4299916738a9ad9e7ad5',0,0);
INSERT INTO "metrics" VALUES('calibration_nll_after',1.20483364759937441879e-01,1796144767949,'203318f36d3f4299916738a9ad9e7ad5',0,0);
INSERT INTO "metrics" VALUES('holdout_accuracy',9.66629588431590636155e-01,1796144767949,'203318f36d3f4299916738a9ad9e7ad5',0,0);
INSERT INTO "metrics" VALUES('holdout_nll_before',1.82626775264628449235e-01,1796144767949,'203318f36d3f4299916738a9ad9e7ad5',0,0);
INSERT INTO "metrics" VALUES('holdout_nll_after',1.79769126251828836871e-01,1796144767949,'203318f36d3f4299916738a9ad9e7ad5',0,0);
INSERT INTO "metrics" VALUES('holdout_ece_before',1.30571193729916556341e-02,1796144767949,'203318f36d3f4299916738a9ad9e7ad5',0,0);
INSERT INTO "metrics" VALUES('holdout_ece_after',0.0150742098304299,1796144767949,'203318f36d3f4299916738a9ad9e7ad5',0,0);
INSERT INTO "metrics" VALUES('holdout_brier_before',6.19538285081565401335e-02,1796144767949,'203318f36d3f4299916738a9ad9e7ad5',0,0);
INSERT INTO "metrics" VALUES('holdout_brier_after',6.20661707027313144791e-02,1796144767949,'203318f36d3f4299916738a9ad9e7ad5',0,0);
INSERT INTO "metrics" VALUES('bootstrap_nll_change',-2.85764901279959111432e-03,1796144767949,'203318f36d3f4299916738a9ad9e7ad5',0,0);
INSERT INTO "metrics" VALUES('bootstrap_nll_change_low',-7.48704192655524382316e-03,1796144767949,'203318f36d3f4299916738a9ad9e7ad5',0,0);
INSERT INTO "metrics" VALUES('bootstrap_nll_change_high',0.000973719844415144,1796144767949,'203318f36d3f4299916738a9ad9e7ad5',0,0);
INSERT INTO "metrics" VALUES('gate_threshold',8.86268400262124167454e-01,1796144767949,'203318f36d3f4299916738a9ad9e7ad5',0,0);
INSERT INTO "metrics" VALUES('gate_coverage',9.04444444444444495267e-01,1796144767949,'203318f36d3f4299916738a9ad9e7ad5',0,0);
INSERT INTO "metrics" VALUES('gate_accepted_accuracy',9.87714987714987668887e-01,1796144767949,'203318f36d3f4299916738a9ad9e7ad5',0,0);
INSERT INTO "metrics" VALUES('gate_accuracy_lower_bound',0.971568016532396,1796144767949,'203318f36d3f4299916738a9ad9e7ad5',0,0);
INSERT INTO "metrics" VALUES('ece',2.49374145248872809699e-02,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('ece_estimate',2.30352540642707603879e-02,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('ece_low',1.26046506727700118044e-02,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('ece_high',0.0339857935112509,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('ece_excess',4.30186691389682768216e-03,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('nll',1.62051239446048322978e-01,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('accuracy',0.955,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('mean_confidence',0.955707310684492,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('brier',7.24724939298560105749e-02,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('coverage',9.08333333333333325931e-01,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('accepted_accuracy',9.83486238532110146337e-01,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('p_value',9.5182264047881626201e-01,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('n',1200.0,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('drift',0.0,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('temperature_drift',0.0,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('ece_drift',0.0,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('refit_recommended',0.0,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('window_temperature',3.0457603435395759206e+00,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('window_temperature_low',2.61479363201239767278e+00,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('window_temperature_high',3.5477583992503514132e+00,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('temperature_ratio',1.1285654781452,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('temperature_z',1.00902387244977975733e+00,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('temperature_p_value',0.273592535374081,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('cusum_upper',0.0,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('cusum_lower',0.0,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('sequential_alarm',0.0,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('predicted_accuracy',9.57203062088101352955e-01,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('predicted_accuracy_low',9.37994517148226680802e-01,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('predicted_accuracy_high',0.976411607027976,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('served_n',1200.0,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('confidence_shift_p_value',0.976464158604336,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('confidence_shifted',0.0,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('ece.group.camera',2.49374145248872809699e-02,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('temperature_z.group.camera',1.00902387244977975733e+00,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('temperature',2.69878921739241217636e+00,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('baseline_ece',1.87333871503739327057e-02,1796144772972,'da0c753a91494ec68ecb937ba0055841',0,0);
INSERT INTO "metrics" VALUES('ece',1.69746058262055764254e-02,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('ece_estimate',1.25122242627778296197e-02,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('ece_low',0.0,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('ece_high',0.0212555159278814,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('ece_excess',5.36442131315938500191e-03,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('nll',1.07573268774246694201e-01,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('accuracy',9.68333333333333379222e-01,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('mean_confidence',9.68410717142031862714e-01,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('brier',0.0454694342565673,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('coverage',9.16666666666666629659e-01,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('accepted_accuracy',9.94545454545454510331e-01,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('p_value',9.81437984540066254979e-01,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('n',600.0,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('drift',0.0,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('temperature_drift',0.0,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('ece_drift',0.0,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('refit_recommended',0.0,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('window_temperature',1.04585448673718750534e+00,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('window_temperature_low',8.5760950898535326381e-01,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('window_temperature_high',1.27541916917689701627e+00,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('temperature_ratio',9.96998398977606337112e-01,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('temperature_z',-1.54958488675619489305e-02,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('temperature_p_value',5.93286194763736340895e-01,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('cusum_upper',0.0,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('cusum_lower',0.0,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('sequential_alarm',0.0,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('predicted_accuracy',0.978684559402917,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('predicted_accuracy_low',9.59564207523762480178e-01,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('predicted_accuracy_high',9.97804911282071493872e-01,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('served_n',600.0,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('confidence_shift_p_value',9.85916821980242663592e-01,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('confidence_shifted',0.0,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('ece.group.scanner',1.69746058262055764254e-02,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('temperature_z.group.scanner',-1.54958488675619489305e-02,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('temperature',1.04900317574198886916e+00,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('baseline_ece',7.14780294961844461787e-03,1796144772972,'2a8118dca97e4548803ca2e53a8b7b95',0,0);
INSERT INTO "metrics" VALUES('ece',6.64376184858958690471e-02,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('ece_estimate',6.44692290152909242006e-02,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('ece_low',4.78085187238415226795e-02,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('ece_high',0.0803697150793797,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('ece_excess',4.57358418649169914949e-02,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('nll',5.86660372010079256277e-01,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('accuracy',8.60833333333333339254e-01,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('mean_confidence',9.25870118239300432527e-01,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('brier',2.13537606497807397332e-01,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('coverage',8.19166666666666709595e-01,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('accepted_accuracy',9.38962360122075234691e-01,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('p_value',1.15613583301417723048e-02,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('n',1200.0,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('drift',1.0,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('temperature_drift',1.0,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('ece_drift',0.0,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('refit_recommended',1.0,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('window_temperature',4.71685082459276472377e+00,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('window_temperature_low',4.09407609701012908942e+00,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('window_temperature_high',5.43435959036264115695e+00,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('temperature_ratio',1.74776555137945144302e+00,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('temperature_z',5.14237146343696238659e+00,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('temperature_p_value',1.34608933831770637449e-06,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('cusum_upper',1.58225779027396740161e+01,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('cusum_lower',0.0,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('sequential_alarm',1.0,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('predicted_accuracy',9.27365869642909679271e-01,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('predicted_accuracy_low',9.06606111532111458295e-01,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('predicted_accuracy_high',9.48125627753707900247e-01,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('served_n',1200.0,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('confidence_shift_p_value',6.83027199975012e-05,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('confidence_shifted',1.0,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('ece.group.camera',6.64376184858958690471e-02,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('temperature_z.group.camera',5.14237146343696238659e+00,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('temperature',2.69878921739241217636e+00,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('baseline_ece',1.87333871503739327057e-02,1796144777648,'b9cf265e03554b1f92cb6cf2345973dc',0,0);
INSERT INTO "metrics" VALUES('ece',5.47183968177696766765e-01,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('ece_estimate',5.46886575839757083095e-01,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('ece_low',5.12649588634286446087e-01,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('ece_high',5.82564521842153681951e-01,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('ece_excess',5.39738772890138607252e-01,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('nll',1.14043430448166791533e+01,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('accuracy',0.295,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('mean_confidence',8.42183968177696695711e-01,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('brier',1.20453371471463244191e+00,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('coverage',5.66666666666666651863e-01,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('accepted_accuracy',3.58823529411764707841e-01,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('p_value',4.09824065878423400436e-176,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('n',600.0,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('drift',1.0,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('temperature_drift',1.0,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('ece_drift',1.0,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('refit_recommended',1.0,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('window_temperature',2.74991705342113901266e+00,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('window_temperature_low',2.4910558121904831097e+00,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('window_temperature_high',3.03567819062504140603e+00,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('temperature_ratio',2.62145731968451567439e+00,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('temperature_z',6.59193744493405731077e+00,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('temperature_p_value',1.94708573700821887478e-10,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('cusum_upper',2.69085431761912730053e+02,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('cusum_lower',0.0,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('sequential_alarm',1.0,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('predicted_accuracy',8.52457810438581820022e-01,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('predicted_accuracy_low',0.82304194352904,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('predicted_accuracy_high',8.81873677348123607977e-01,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('served_n',600.0,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('confidence_shift_p_value',1.97957531483305428773e-41,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('confidence_shifted',1.0,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('ece.group.scanner',5.47183968177696766765e-01,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('temperature_z.group.scanner',6.59193744493405731077e+00,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('temperature',1.04900317574198886916e+00,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('baseline_ece',7.14780294961844461787e-03,1796144777648,'c2a36c9e20264c91a5896bead3763ce7',0,0);
INSERT INTO "metrics" VALUES('temperature',4.70202771178343237323e+00,1796144780482,'871d5d3174fd46319d3fd8232a9bf0b2',0,0);
INSERT INTO "metrics" VALUES('temperature_low',4.20444636582570563376e+00,1796144780482,'871d5d3174fd46319d3fd8232a9bf0b2',0,0);
INSERT INTO "metrics" VALUES('temperature_high',5.25849604886977051165e+00,1796144780482,'871d5d3174fd46319d3fd8232a9bf0b2',0,0);
INSERT INTO "metrics" VALUES('reference_ece',2.25710776690744713279e-02,1796144780482,'871d5d3174fd46319d3fd8232a9bf0b2',0,0);
INSERT INTO "metrics" VALUES('reference_ece_low',0.0,1796144780482,'871d5d3174fd46319d3fd8232a9bf0b2',0,0);
INSERT INTO "metrics" VALUES('reference_ece_high',4.07419518079982639902e-02,1796144780482,'871d5d3174fd46319d3fd8232a9bf0b2',0,0);
INSERT INTO "metrics" VALUES('calibration_n',600.0,1796144780482,'871d5d3174fd46319d3fd8232a9bf0b2',0,0);
INSERT INTO "metrics" VALUES('calibration_nll_before',1.31388277471791936612e+00,1796144780482,'871d5d3174fd46319d3fd8232a9bf0b2',0,0);
INSERT INTO "metrics" VALUES('calibration_nll_after',4.69973544976557411345e-01,1796144780482,'871d5d3174fd46319d3fd8232a9bf0b2',0,0);
INSERT INTO "metrics" VALUES('holdout_accuracy',8.60833333333333339254e-01,1796144780482,'871d5d3174fd46319d3fd8232a9bf0b2',0,0);
INSERT INTO "metrics" VALUES('holdout_nll_before',6.02802727367214408182e-01,1796144780482,'871d5d3174fd46319d3fd8232a9bf0b2',0,0);
INSERT INTO "metrics" VALUES('holdout_nll_after',4.90650947229220257828e-01,1796144780482,'871d5d3174fd46319d3fd8232a9bf0b2',0,0);
INSERT INTO "metrics" VALUES('holdout_ece_before',7.56376320341426156002e-02,1796144780482,'871d5d3174fd46319d3fd8232a9bf0b2',0,0);
INSERT INTO "metrics" VALUES('holdout_ece_after',3.55036172896092058759e-02,1796144780482,'871d5d3174fd46319d3fd8232a9bf0b2',0,0);
INSERT INTO "metrics" VALUES('holdout_brier_before',2.25772534742564090493e-01,1796144780482,'871d5d3174fd46319d3fd8232a9bf0b2',0,0);
INSERT INTO "metrics" VALUES('holdout_brier_after',2.12781904822441803037e-01,1796144780482,'871d5d3174fd46319d3fd8232a9bf0b2',0,0);
INSERT INTO "metrics" VALUES('bootstrap_nll_change',-1.12151780137994122599e-01,1796144780482,'871d5d3174fd46319d3fd8232a9bf0b2',0,0);
INSERT INTO "metrics" VALUES('bootstrap_nll_change_low',-1.66217450834915153601e-01,1796144780482,'871d5d3174fd46319d3fd8232a9bf0b2',0,0);
INSERT INTO "metrics" VALUES('bootstrap_nll_change_high',-5.92896772140240474469e-02,1796144780482,'871d5d3174fd46319d3fd8232a9bf0b2',0,0);
INSERT INTO "metrics" VALUES('gate_threshold',9.093421746161302055e-01,1796144780482,'871d5d3174fd46319d3fd8232a9bf0b2',0,0);
INSERT INTO "metrics" VALUES('gate_coverage',5.36666666666666625218e-01,1796144780482,'871d5d3174fd46319d3fd8232a9bf0b2',0,0);
INSERT INTO "metrics" VALUES('gate_accepted_accuracy',9.906832298136646342e-01,1796144780482,'871d5d3174fd46319d3fd8232a9bf0b2',0,0);
INSERT INTO "metrics" VALUES('gate_accuracy_lower_bound',9.72970290545467797471e-01,1796144780482,'871d5d3174fd46319d3fd8232a9bf0b2',0,0);
INSERT INTO "metrics" VALUES('temperature',1.04900317574198886916e+00,1796144784976,'b6733d8092bd47f087b2692c92b788a7',0,0);
INSERT INTO "metrics" VALUES('baseline_ece',0.0150742098304299,1796144784976,'b6733d8092bd47f087b2692c92b788a7',0,0);
INSERT INTO "metrics" VALUES('ece',4.80873115282198837494e-01,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('ece_estimate',4.80663425147179634855e-01,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('ece_low',4.42593225996348038631e-01,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('ece_high',5.18899830144798679398e-01,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('ece_excess',4.73515622197561214523e-01,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('nll',9.28096300978847565943e+00,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('accuracy',3.48333333333333328152e-01,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('mean_confidence',8.29206448615532165646e-01,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('brier',1.09597168262831035079e+00,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('coverage',0.555,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('accepted_accuracy',4.41441441441441428938e-01,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('p_value',1.83234512935854251102e-114,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('n',600.0,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('drift',1.0,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('temperature_drift',1.0,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('ece_drift',1.0,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('refit_recommended',0.0,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('window_temperature',2.72367839090237540133e+00,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('window_temperature_low',2.45006774841269692188e+00,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('window_temperature_high',3.02784442669989850571e+00,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('temperature_ratio',2.59644437108194869878e+00,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('temperature_z',6.525322055239406005e+00,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('temperature_p_value',2.976895745650660576e-10,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('cusum_upper',2.12041459089851059617e+02,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('cusum_lower',0.0,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('sequential_alarm',1.0,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('predicted_accuracy',8.39480290876416845868e-01,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('predicted_accuracy_low',8.09428115867411590578e-01,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('predicted_accuracy_high',8.69532465885422101159e-01,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('served_n',600.0,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('confidence_shift_p_value',2.56237179867688758764e-47,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('confidence_shifted',1.0,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('ece.group.scanner',4.80873115282198837494e-01,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('temperature_z.group.scanner',6.525322055239406005e+00,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('temperature',1.04900317574198886916e+00,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('baseline_ece',7.14780294961844461787e-03,1796144787838,'4e20b4d7456842089a553b4b579391d2',0,0);
INSERT INTO "metrics" VALUES('ece',0.038080440865459,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('ece_estimate',3.30137858695710162404e-02,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('ece_low',1.73714340282291462846e-02,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('ece_high',0.0499677988394097,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('ece_excess',1.04427082004965449124e-02,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('nll',4.99682540921495665919e-01,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('accuracy',8.63333333333333285963e-01,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('mean_confidence',8.34510811822305909046e-01,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('brier',2.06570883067138555411e-01,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('coverage',5.21666666666666611895e-01,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('accepted_accuracy',9.92012779552715606712e-01,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('p_value',7.63626533265326479238e-01,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('n',1200.0,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('drift',0.0,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('temperature_drift',0.0,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('ece_drift',0.0,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('refit_recommended',0.0,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('window_temperature',4.68325050598022940562e+00,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('window_temperature_low',4.31659585347077623396e+00,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('window_temperature_high',5.08104905955670815842e+00,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('temperature_ratio',9.9600657270561243628e-01,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('temperature_z',-5.73485963204352841571e-02,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('temperature_p_value',7.39535688663592871705e-01,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('cusum_upper',0.0,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('cusum_lower',0.0,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('sequential_alarm',0.0,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('predicted_accuracy',8.55035201363107622007e-01,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('predicted_accuracy_low',8.24193846375969485507e-01,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('predicted_accuracy_high',8.85876556350245758508e-01,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('served_n',1200.0,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('confidence_shift_p_value',1.23177513612923339447e-01,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('confidence_shifted',0.0,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('ece.group.camera',0.038080440865459,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('temperature_z.group.camera',-5.73485963204352841571e-02,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('temperature',4.70202771178343237323e+00,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('baseline_ece',2.25710776690744713279e-02,1796144787838,'680bf72048354f038f25c95f37066be0',0,0);
INSERT INTO "metrics" VALUES('n',0.0,1796144791250,'c11f2e238dc7450badb31ff8b05e5cdb',0,0);
INSERT INTO "metrics" VALUES('drift',0.0,1796144791250,'c11f2e238dc7450badb31ff8b05e5cdb',0,0);
INSERT INTO "metrics" VALUES('temperature_drift',0.0,1796144791250,'c11f2e238dc7450badb31ff8b05e5cdb',0,0);
INSERT INTO "metrics" VALUES('ece_drift',0.0,1796144791250,'c11f2e238dc7450badb31ff8b05e5cdb',0,0);
INSERT INTO "metrics" VALUES('refit_recommended',0.0,1796144791250,'c11f2e238dc7450badb31ff8b05e5cdb',0,0);
INSERT INTO "metrics" VALUES('served_n',0.0,1796144791250,'c11f2e238dc7450badb31ff8b05e5cdb',0,0);
INSERT INTO "metrics" VALUES('confidence_shifted',0.0,1796144791250,'c11f2e238dc7450badb31ff8b05e5cdb',0,0);
INSERT INTO "metrics" VALUES('temperature',1.04900317574198886916e+00,1796144791250,'c11f2e238dc7450badb31ff8b05e5cdb',0,0);
INSERT INTO "metrics" VALUES('baseline_ece',7.14780294961844461787e-03,1796144791250,'c11f2e238dc7450badb31ff8b05e5cdb',0,0);
INSERT INTO "metrics" VALUES('n',0.0,1796144791250,'46ef0db0b12346aebdfea4d3c74e5c7f',0,0);
INSERT INTO "metrics" VALUES('drift',0.0,1796144791250,'46ef0db0b12346aebdfea4d3c74e5c7f',0,0);
INSERT INTO "metrics" VALUES('temperature_drift',0.0,1796144791250,'46ef0db0b12346aebdfea4d3c74e5c7f',0,0);
INSERT INTO "metrics" VALUES('ece_drift',0.0,1796144791250,'46ef0db0b12346aebdfea4d3c74e5c7f',0,0);
INSERT INTO "metrics" VALUES('refit_recommended',0.0,1796144791250,'46ef0db0b12346aebdfea4d3c74e5c7f',0,0);
INSERT INTO "metrics" VALUES('served_n',0.0,1796144791250,'46ef0db0b12346aebdfea4d3c74e5c7f',0,0);
INSERT INTO "metrics" VALUES('confidence_shifted',0.0,1796144791250,'46ef0db0b12346aebdfea4d3c74e5c7f',0,0);
INSERT INTO "metrics" VALUES('temperature',4.70202771178343237323e+00,1796144791250,'46ef0db0b12346aebdfea4d3c74e5c7f',0,0);
INSERT INTO "metrics" VALUES('baseline_ece',2.25710776690744713279e-02,1796144791250,'46ef0db0b12346aebdfea4d3c74e5c7f',0,0);
INSERT INTO "metrics" VALUES('n',0.0,1796144793411,'a96b9dfe9a524c1397f50d219aa7666d',0,0);
INSERT INTO "metrics" VALUES('drift',0.0,1796144793411,'a96b9dfe9a524c1397f50d219aa7666d',0,0);
INSERT INTO "metrics" VALUES('temperature_drift',0.0,1796144793411,'a96b9dfe9a524c1397f50d219aa7666d',0,0);
INSERT INTO "metrics" VALUES('ece_drift',0.0,1796144793411,'a96b9dfe9a524c1397f50d219aa7666d',0,0);
INSERT INTO "metrics" VALUES('refit_recommended',0.0,1796144793411,'a96b9dfe9a524c1397f50d219aa7666d',0,0);
INSERT INTO "metrics" VALUES('served_n',0.0,1796144793411,'a96b9dfe9a524c1397f50d219aa7666d',0,0);
INSERT INTO "metrics" VALUES('confidence_shifted',0.0,1796144793411,'a96b9dfe9a524c1397f50d219aa7666d',0,0);
INSERT INTO "metrics" VALUES('temperature',1.04900317574198886916e+00,1796144793411,'a96b9dfe9a524c1397f50d219aa7666d',0,0);
INSERT INTO "metrics" VALUES('baseline_ece',7.14780294961844461787e-03,1796144793411,'a96b9dfe9a524c1397f50d219aa7666d',0,0);
INSERT INTO "metrics" VALUES('n',0.0,1796144793411,'3f5ccebd58d0452b9bd967e6c469b5a0',0,0);
INSERT INTO "metrics" VALUES('drift',0.0,1796144793411,'3f5ccebd58d0452b9bd967e6c469b5a0',0,0);
INSERT INTO "metrics" VALUES('temperature_drift',0.0,1796144793411,'3f5ccebd58d0452b9bd967e6c469b5a0',0,0);
INSERT INTO "metrics" VALUES('ece_drift',0.0,1796144793411,'3f5ccebd58d0452b9bd967e6c469b5a0',0,0);
INSERT INTO "metrics" VALUES('refit_recommended',0.0,1796144793411,'3f5ccebd58d0452b9bd967e6c469b5a0',0,0);
INSERT INTO "metrics" VALUES('served_n',0.0,1796144793411,'3f5ccebd58d0452b9bd967e6c469b5a0',0,0);
INSERT INTO "metrics" VALUES('confidence_shifted',0.0,1796144793411,'3f5ccebd58d0452b9bd967e6c469b5a0',0,0);
INSERT INTO "metrics" VALUES('temperature',4.70202771178343237323e+00,1796144793411,'3f5ccebd58d0452b9bd967e6c469b5a0',0,0);
INSERT INTO "metrics" VALUES('baseline_ece',2.25710776690744713279e-02,1796144793411,'3f5ccebd58d0452b9bd967e6c469b5a0',0,0);
INSERT INTO "metrics" VALUES('n',0.0,1796144795579,'6a6c715b781241199a18cea2dfae6f32',0,0);
INSERT INTO "metrics" VALUES('drift',0.0,1796144795579,'6a6c715b781241199a18cea2dfae6f32',0,0);
INSERT INTO "metrics" VALUES('temperature_drift',0.0,1796144795579,'6a6c715b781241199a18cea2dfae6f32',0,0);
INSERT INTO "metrics" VALUES('ece_drift',0.0,1796144795579,'6a6c715b781241199a18cea2dfae6f32',0,0);
INSERT INTO "metrics" VALUES('refit_recommended',0.0,1796144795579,'6a6c715b781241199a18cea2dfae6f32',0,0);
INSERT INTO "metrics" VALUES('served_n',0.0,1796144795579,'6a6c715b781241199a18cea2dfae6f32',0,0);
INSERT INTO "metrics" VALUES('confidence_shifted',0.0,1796144795579,'6a6c715b781241199a18cea2dfae6f32',0,0);
INSERT INTO "metrics" VALUES('temperature',1.04900317574198886916e+00,1796144795579,'6a6c715b781241199a18cea2dfae6f32',0,0);
INSERT INTO "metrics" VALUES('baseline_ece',7.14780294961844461787e-03,1796144795579,'6a6c715b781241199a18cea2dfae6f32',0,0);
INSERT INTO "metrics" VALUES('n',0.0,1796144795579,'bad62edf2d8d4e77a404bbf5ea0edd60',0,0);
INSERT INTO "metrics" VALUES('drift',0.0,1796144795579,'bad62edf2d8d4e77a404bbf5ea0edd60',0,0);
INSERT INTO "metrics" VALUES('temperature_drift',0.0,1796144795579,'bad62edf2d8d4e77a404bbf5ea0edd60',0,0);
INSERT INTO "metrics" VALUES('ece_drift',0.0,1796144795579,'bad62edf2d8d4e77a404bbf5ea0edd60',0,0);
INSERT INTO "metrics" VALUES('refit_recommended',0.0,1796144795579,'bad62edf2d8d4e77a404bbf5ea0edd60',0,0);
INSERT INTO "metrics" VALUES('served_n',0.0,1796144795579,'bad62edf2d8d4e77a404bbf5ea0edd60',0,0);
INSERT INTO "metrics" VALUES('confidence_shifted',0.0,1796144795579,'bad62edf2d8d4e77a404bbf5ea0edd60',0,0);
INSERT INTO "metrics" VALUES('temperature',4.70202771178343237323e+00,1796144795579,'bad62edf2d8d4e77a404bbf5ea0edd60',0,0);
INSERT INTO "metrics" VALUES('baseline_ece',2.25710776690744713279e-02,1796144795579,'bad62edf2d8d4e77a404bbf5ea0edd60',0,0);
CREATE TABLE "model_definitions" (
	model_definition_id VARCHAR(36) NOT NULL, 
	name VARCHAR(255) NOT NULL, 
	secret_id VARCHAR(36), 
	provider VARCHAR(64) NOT NULL, 
	model_name VARCHAR(256) NOT NULL, 
	created_by VARCHAR(255), 
	created_at BIGINT NOT NULL, 
	last_updated_by VARCHAR(255), 
	last_updated_at BIGINT NOT NULL, 
	workspace VARCHAR(63) DEFAULT 'default' NOT NULL, 
	CONSTRAINT model_definitions_pk PRIMARY KEY (model_definition_id), 
	CONSTRAINT fk_model_definitions_secret_id FOREIGN KEY(secret_id) REFERENCES secrets (secret_id) ON DELETE SET NULL, 
	CONSTRAINT uq_model_definitions_workspace_name UNIQUE (workspace, name)
);
CREATE TABLE "model_version_tags" (
	"key" VARCHAR(250) NOT NULL, 
	value TEXT, 
	name VARCHAR(256) NOT NULL, 
	version INTEGER NOT NULL, 
	workspace VARCHAR(63) DEFAULT 'default' NOT NULL, 
	CONSTRAINT model_version_tag_pk PRIMARY KEY (workspace, "key", name, version), 
	CONSTRAINT fk_model_version_tags_model_versions FOREIGN KEY(workspace, name, version) REFERENCES model_versions (workspace, name, version) ON UPDATE CASCADE
);
INSERT INTO "model_version_tags" VALUES('temperature','2.698789217392412','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('temperature_bounds','0.05,20.0','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('gate_threshold','0.8587646950040239','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('gate_target_accuracy','0.97','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('gate_confidence_level','0.95','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('gate_coverage','0.8955555555555555','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('gate_accepted_accuracy','0.9875930521091811','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('checkpoint_uri','runs:/af83a0edf4b7455a9116c04d7879dc9e/checkpoint','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('checkpoint_digest','e62ebc90463caab1742c344785491335cb9d339d9e2391a4e7c4b0795c6ed5e9','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('calibration_data_version','ca0e4c7613a82d3a','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('calibration_n','449','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('holdout_data_version','220a5af88ff7a5ad','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('holdout_accuracy','0.9532814238042269','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('holdout_metrics_n','450','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('holdout_metrics_split','evaluation part of the holdout (not used to fit T)','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('holdout_nll_before','0.3375771933552878','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('holdout_nll_after','0.1778695338957984','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('holdout_ece_before','0.0358362765394411','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('holdout_ece_after','0.024954891012601423','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('nll_reduction','mean','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('bootstrap_nll_change','-0.15970765945948945','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('bootstrap_nll_change_low','-0.28216810438292744','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('bootstrap_nll_change_high','-0.053989587653469125','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('bootstrap_confidence_level','0.95','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('bootstrap_verdict','improved','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('ece_scheme','equal-width','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('ece_n_bins','15','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('fitted_at','2026-12-01T17:06:01+00:00','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('idempotency_key','de0a910649afd1c4c22851a7145c061457f123235ec0dca75c1fbddcea20305c','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('pipeline_run_id','1c83edbface6451b9e8789937764352c','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('checkpoint_output','logits','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('train_steps','16','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('train_data_version','sklearn-digits/train-898-seed-0','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('temperature_low','2.1935121151873047','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('temperature_high','3.320457265535372','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('temperature_confidence_level','0.95','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('reference_n','449','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('reference_gradient_sum','-1.2434497875801753e-13','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('reference_gradient_square_sum','724.8879107782933','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('reference_curvature_sum','687.0500028204402','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('reference_ece_estimator','debiased_l1','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('reference_ece','0.018733387150373933','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('reference_ece_low','0.0007137954443823466','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('reference_ece_high','0.030919706877355277','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('reference_confidence_profile','{"format":1,"temperature":2.698789217392412,"edges":[0.0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,0.9437658674809651,0.9683772233983162,0.9822172058996108,0.99,0.9943765867480965,0.9968377223398316,0.9982217205899611,0.999,0.9994376586748096,0.9996837722339832,0.9998221720589962,0.9999,1.0],"count":[0,0,0,2,3,9,13,10,25,16,15,20,22,36,29,24,32,23,39,31,24,76],"confidence_sum":428.3284076197794,"confidence_square_sum":414.15334025791265,"labelled":449,"correct":429,"labelled_confidence_sum":428.3284076197794}','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('ece_binning','equal-width, 15 bins, top-label confidence, bin m = (m/M, (m+1)/M], 0 in the first bin','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('thermostat.alias','champion','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('thermostat.alias_previous_version','none','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('thermostat.registration','complete','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('temperature','1.0490031757419889','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('temperature_bounds','0.05,20.0','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('gate_threshold','0.8862684002621242','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('gate_target_accuracy','0.97','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('gate_confidence_level','0.95','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('gate_coverage','0.9044444444444445','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('gate_accepted_accuracy','0.9877149877149877','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('checkpoint_uri','runs:/90194e27fbb74c1b991e14c5900e1991/checkpoint','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('checkpoint_digest','31a7f23737ff869e726d9f9e5f7e86af25f0c0a3cbb74e2fba18148f434f1c6b','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('calibration_data_version','ca0e4c7613a82d3a','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('calibration_n','449','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('holdout_data_version','220a5af88ff7a5ad','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('holdout_accuracy','0.9666295884315906','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('holdout_metrics_n','450','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('holdout_metrics_split','evaluation part of the holdout (not used to fit T)','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('holdout_nll_before','0.18262677526462845','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('holdout_nll_after','0.17976912625182884','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('holdout_ece_before','0.013057119372991656','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('holdout_ece_after','0.0150742098304299','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('nll_reduction','mean','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('bootstrap_nll_change','-0.002857649012799591','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('bootstrap_nll_change_low','-0.007487041926555244','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('bootstrap_nll_change_high','0.000973719844415144','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('bootstrap_confidence_level','0.95','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('bootstrap_verdict','not established','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('ece_scheme','equal-width','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('ece_n_bins','15','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('fitted_at','2026-12-01T17:06:07+00:00','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('idempotency_key','2db3aa37c5ac2c68a871cf8212fe85a1b3fa50a1337541b278fe8b0fc83440a6','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('pipeline_run_id','203318f36d3f4299916738a9ad9e7ad5','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('checkpoint_output','logits','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('train_steps','196','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('train_data_version','sklearn-digits/train-898-seed-0','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('temperature_low','0.7879645755943074','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('temperature_high','1.3965192050503237','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('temperature_confidence_level','0.95','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('reference_n','449','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('reference_gradient_sum','-1.7763568394002505e-15','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('reference_gradient_square_sum','272.95349122873023','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('reference_curvature_sum','118.70987601321153','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('reference_ece_estimator','debiased_l1','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('reference_ece','0.007147802949618445','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('reference_ece_low','0.0','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('reference_ece_high','0.017485975439040805','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('reference_confidence_profile','{"format":1,"temperature":1.0490031757419889,"edges":[0.0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,0.9437658674809651,0.9683772233983162,0.9822172058996108,0.99,0.9943765867480965,0.9968377223398316,0.9982217205899611,0.999,0.9994376586748096,0.9996837722339832,0.9998221720589962,0.9999,1.0],"count":[0,0,0,1,4,6,7,9,24,15,15,16,20,33,33,39,40,40,38,31,18,60],"confidence_sum":432.38704482486276,"confidence_square_sum":420.6608832886487,"labelled":449,"correct":437,"labelled_confidence_sum":432.38704482486276}','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('ece_binning','equal-width, 15 bins, top-label confidence, bin m = (m/M, (m+1)/M], 0 in the first bin','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('thermostat.alias','challenger','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('thermostat.alias_previous_version','none','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('thermostat.registration','complete','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('thermostat.sequential_state','{"format":1,"temperature":2.698789217392412,"upper":0.0,"lower":0.0,"upper_since":null,"lower_since":null,"upper_segment":[0,0.0,0.0,0.0],"lower_segment":[0,0.0,0.0,0.0],"pending":[0,0.0,0.0,0.0],"pending_since":null,"last_end":"2026-12-01T17:06:17.727408+00:00","checks":2,"increments":2,"rows":2400,"alarms":1,"last_alarm_at":"2026-12-01T17:06:17.727408+00:00","last_change_point":"2026-12-01T17:06:13.138092+00:00","upper_served_from":null,"lower_served_from":null,"pending_served_from":null}','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('thermostat.sequential_state','{"format":1,"temperature":1.0490031757419889,"upper":0.0,"lower":0.0,"upper_since":null,"lower_since":null,"upper_segment":[0,0.0,0.0,0.0],"lower_segment":[0,0.0,0.0,0.0],"pending":[0,0.0,0.0,0.0],"pending_since":null,"last_end":"2026-12-01T17:06:28.003306+00:00","checks":3,"increments":3,"rows":1800,"alarms":2,"last_alarm_at":"2026-12-01T17:06:28.003306+00:00","last_change_point":"2026-12-01T17:06:18.607002+00:00","upper_served_from":null,"lower_served_from":null,"pending_served_from":null}','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('thermostat.last_drift_event_at','2026-12-01T17:06:18.434059+00:00','digits',1,'default');
INSERT INTO "model_version_tags" VALUES('thermostat.last_drift_event_at','2026-12-01T17:06:18.966144+00:00','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('temperature','4.702027711783432','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('temperature_bounds','0.05,20.0','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('gate_threshold','0.9093421746161302','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('gate_target_accuracy','0.97','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('gate_confidence_level','0.95','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('gate_coverage','0.5366666666666666','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('gate_accepted_accuracy','0.9906832298136646','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('checkpoint_uri','runs:/af83a0edf4b7455a9116c04d7879dc9e/checkpoint','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('checkpoint_digest','e62ebc90463caab1742c344785491335cb9d339d9e2391a4e7c4b0795c6ed5e9','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('calibration_data_version','ba7adac140b5e336','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('calibration_n','600','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('holdout_data_version','7915f4c43529c7be','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('holdout_accuracy','0.8608333333333333','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('holdout_metrics_n','600','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('holdout_metrics_split','newer part of the refit''s traffic window (not used to fit T); before = parent''s T','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('holdout_nll_before','0.6028027273672144','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('holdout_nll_after','0.49065094722922026','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('holdout_ece_before','0.07563763203414262','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('holdout_ece_after','0.035503617289609206','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('nll_reduction','mean','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('bootstrap_nll_change','-0.11215178013799412','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('bootstrap_nll_change_low','-0.16621745083491515','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('bootstrap_nll_change_high','-0.05928967721402405','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('bootstrap_confidence_level','0.95','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('bootstrap_verdict','improved','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('ece_scheme','equal-width','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('ece_n_bins','15','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('fitted_at','2026-12-01T17:06:20+00:00','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('idempotency_key','f6ddf63b54c77c08e98602f079ca8407a392666815b54fb72f1d1287237589fa','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('pipeline_run_id','871d5d3174fd46319d3fd8232a9bf0b2','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('checkpoint_output','logits','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('train_steps','16','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('train_data_version','sklearn-digits/train-898-seed-0','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('temperature_before','2.698789217392412','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('holdout_accuracy_source','recent labelled traffic of the parent version','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('temperature_low','4.204446365825706','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('temperature_high','5.2584960488697705','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('temperature_confidence_level','0.95','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('reference_n','600','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('reference_gradient_sum','-2.1316282072803006e-14','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('reference_gradient_square_sum','12411.703537554758','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('reference_curvature_sum','9179.269556235493','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('reference_ece_estimator','debiased_l1','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('reference_ece','0.02257107766907447','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('reference_ece_low','0.0','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('reference_ece_high','0.040741951807998264','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('reference_confidence_profile','{"format":1,"temperature":4.702027711783432,"edges":[0.0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,0.9437658674809651,0.9683772233983162,0.9822172058996108,0.99,0.9943765867480965,0.9968377223398316,0.9982217205899611,0.999,0.9994376586748096,0.9996837722339832,0.9998221720589962,0.9999,1.0],"count":[0,0,3,11,31,40,43,53,68,63,75,59,55,36,21,8,14,4,3,6,2,5],"confidence_sum":507.68536627551896,"confidence_square_sum":449.37575559505984,"labelled":600,"correct":520,"labelled_confidence_sum":507.68536627551896}','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('refit_parent_version','1','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('refit_parent_temperature','2.698789217392412','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('refit_parent_gate_threshold','0.8587646950040239','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('refit_parent_baseline_ece','0.024954891012601423','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('refit_alias','champion','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('refit_traffic_window','[2026-12-01T17:06:15.985028+00:00, 2026-12-01T17:06:17.648000+00:00)','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('refit_traffic_first_served_at','2026-12-01T17:06:15.985028+00:00','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('refit_traffic_last_served_at','2026-12-01T17:06:17.414561+00:00','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('refit_traffic_n','1200','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('refit_fit_n','600','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('refit_verify_n','600','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('refit_split','by serving time: the older 50% fits T, the newer rest verifies','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('refit_verification','verification passed on the newer 600 rows: new T 4.702 outside the parent''s interval [2.194, 3.32]; NLL change -0.1122 [-0.1662, -0.0593] (improved); ECE 0.0756 at T=2.699 -> 0.0355 at T=4.702 (baseline 0.0187, tolerance 0.0200, p = 0.894); reliability curve: calibrated','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('refit_verification_p_value','0.8941979369997767','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('refit_verification_shape','calibrated','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('ece_binning','equal-width, 15 bins, top-label confidence, bin m = (m/M, (m+1)/M], 0 in the first bin','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('thermostat.alias','champion','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('thermostat.alias_previous_version','1','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('refit_drift_event_id','01a23292-4cbc-7a90-9d2b-a211f8bb3bc1','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('refit_drift_run_id','b9cf265e03554b1f92cb6cf2345973dc','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('thermostat.registration','complete','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('thermostat.last_confidence_shift_at','2026-12-01T17:06:28.596703+00:00','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('thermostat.sequential_state','{"format":1,"temperature":4.702027711783432,"upper":0.0,"lower":0.0,"upper_since":null,"lower_since":null,"upper_segment":[0,0.0,0.0,0.0],"lower_segment":[0,0.0,0.0,0.0],"pending":[0,0.0,0.0,0.0],"pending_since":null,"last_end":"2026-12-01T17:06:29.105676+00:00","checks":1,"increments":1,"rows":1200,"alarms":0,"last_alarm_at":null,"last_change_point":null,"upper_served_from":null,"lower_served_from":null,"pending_served_from":null}','digits',3,'default');
INSERT INTO "model_version_tags" VALUES('thermostat.insufficient_data_streak','3','digits',2,'default');
INSERT INTO "model_version_tags" VALUES('thermostat.insufficient_data_streak','3','digits',3,'default');
CREATE TABLE "model_versions" (
	name VARCHAR(256) NOT NULL, 
	version INTEGER NOT NULL, 
	creation_time BIGINT, 
	last_updated_time BIGINT, 
	description VARCHAR(5000), 
	user_id VARCHAR(256), 
	current_stage VARCHAR(20), 
	source VARCHAR(500), 
	run_id VARCHAR(32), 
	status VARCHAR(20), 
	status_message VARCHAR(500), 
	run_link VARCHAR(500), 
	storage_location VARCHAR(500), 
	workspace VARCHAR(63) DEFAULT 'default' NOT NULL, 
	CONSTRAINT model_version_pk PRIMARY KEY (workspace, name, version), 
	CONSTRAINT fk_model_versions_registered_models FOREIGN KEY(workspace, name) REFERENCES registered_models (workspace, name) ON UPDATE CASCADE
);
INSERT INTO "model_versions" VALUES('digits',1,1796144762600,1796144762600,NULL,NULL,'None','runs:/1c83edbface6451b9e8789937764352c/calibrated_model','1c83edbface6451b9e8789937764352c','READY',NULL,NULL,'runs:/1c83edbface6451b9e8789937764352c/calibrated_model','default');
INSERT INTO "model_versions" VALUES('digits',2,1796144769351,1796144769351,NULL,NULL,'None','runs:/203318f36d3f4299916738a9ad9e7ad5/calibrated_model','203318f36d3f4299916738a9ad9e7ad5','READY',NULL,NULL,'runs:/203318f36d3f4299916738a9ad9e7ad5/calibrated_model','default');
INSERT INTO "model_versions" VALUES('digits',3,1796144783090,1796144783090,NULL,NULL,'None','runs:/871d5d3174fd46319d3fd8232a9bf0b2/calibrated_model','871d5d3174fd46319d3fd8232a9bf0b2','READY',NULL,NULL,'runs:/871d5d3174fd46319d3fd8232a9bf0b2/calibrated_model','default');
CREATE TABLE online_scoring_configs (
	online_scoring_config_id VARCHAR(36) NOT NULL, 
	scorer_id VARCHAR(36) NOT NULL, 
	sample_rate FLOAT NOT NULL, 
	experiment_id INTEGER NOT NULL, 
	filter_string TEXT, 
	CONSTRAINT online_scoring_config_pk PRIMARY KEY (online_scoring_config_id), 
	CONSTRAINT fk_online_scoring_configs_scorer_id FOREIGN KEY(scorer_id) REFERENCES scorers (scorer_id) ON DELETE CASCADE, 
	CONSTRAINT fk_online_scoring_configs_experiment_id FOREIGN KEY(experiment_id) REFERENCES experiments (experiment_id)
);
CREATE TABLE "params" (
	"key" VARCHAR(250) NOT NULL, 
	value VARCHAR(8000) NOT NULL, 
	run_uuid VARCHAR(32) NOT NULL, 
	CONSTRAINT param_pk PRIMARY KEY ("key", run_uuid), 
	FOREIGN KEY(run_uuid) REFERENCES runs (run_uuid)
);
INSERT INTO "params" VALUES('estimator','Pipeline(steps=[(''standardscaler'', StandardScaler()),
                (''logisticregression'',
                 LogisticRegression(C=10000.0, max_iter=5000))])','af83a0edf4b7455a9116c04d7879dc9e');
INSERT INTO "params" VALUES('train_steps','16','af83a0edf4b7455a9116c04d7879dc9e');
INSERT INTO "params" VALUES('n_train','898','af83a0edf4b7455a9116c04d7879dc9e');
INSERT INTO "params" VALUES('checkpoint_uri','runs:/af83a0edf4b7455a9116c04d7879dc9e/checkpoint','1c83edbface6451b9e8789937764352c');
INSERT INTO "params" VALUES('checkpoint_digest','e62ebc90463caab1742c344785491335cb9d339d9e2391a4e7c4b0795c6ed5e9','1c83edbface6451b9e8789937764352c');
INSERT INTO "params" VALUES('train_steps','16','1c83edbface6451b9e8789937764352c');
INSERT INTO "params" VALUES('train_data_version','sklearn-digits/train-898-seed-0','1c83edbface6451b9e8789937764352c');
INSERT INTO "params" VALUES('calibration_data_version','ca0e4c7613a82d3a','1c83edbface6451b9e8789937764352c');
INSERT INTO "params" VALUES('holdout_data_version','220a5af88ff7a5ad','1c83edbface6451b9e8789937764352c');
INSERT INTO "params" VALUES('gate_target_accuracy','0.97','1c83edbface6451b9e8789937764352c');
INSERT INTO "params" VALUES('gate_confidence_level','0.95','1c83edbface6451b9e8789937764352c');
INSERT INTO "params" VALUES('bounds','0.05,20.0','1c83edbface6451b9e8789937764352c');
INSERT INTO "params" VALUES('n_bins','15','1c83edbface6451b9e8789937764352c');
INSERT INTO "params" VALUES('binning','equal-width','1c83edbface6451b9e8789937764352c');
INSERT INTO "params" VALUES('bootstrap_resamples','2000','1c83edbface6451b9e8789937764352c');
INSERT INTO "params" VALUES('estimator','Pipeline(steps=[(''standardscaler'', StandardScaler()),
                (''mlpclassifier'',
                 MLPClassifier(alpha=1e-06, hidden_layer_sizes=(64,),
                               max_iter=500, random_state=0))])','90194e27fbb74c1b991e14c5900e1991');
INSERT INTO "params" VALUES('train_steps','196','90194e27fbb74c1b991e14c5900e1991');
INSERT INTO "params" VALUES('n_train','898','90194e27fbb74c1b991e14c5900e1991');
INSERT INTO "params" VALUES('checkpoint_uri','runs:/90194e27fbb74c1b991e14c5900e1991/checkpoint','203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "params" VALUES('checkpoint_digest','31a7f23737ff869e726d9f9e5f7e86af25f0c0a3cbb74e2fba18148f434f1c6b','203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "params" VALUES('train_steps','196','203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "params" VALUES('train_data_version','sklearn-digits/train-898-seed-0','203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "params" VALUES('calibration_data_version','ca0e4c7613a82d3a','203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "params" VALUES('holdout_data_version','220a5af88ff7a5ad','203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "params" VALUES('gate_target_accuracy','0.97','203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "params" VALUES('gate_confidence_level','0.95','203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "params" VALUES('bounds','0.05,20.0','203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "params" VALUES('n_bins','15','203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "params" VALUES('binning','equal-width','203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "params" VALUES('bootstrap_resamples','2000','203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "params" VALUES('checkpoint_uri','runs:/af83a0edf4b7455a9116c04d7879dc9e/checkpoint','871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "params" VALUES('checkpoint_digest','e62ebc90463caab1742c344785491335cb9d339d9e2391a4e7c4b0795c6ed5e9','871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "params" VALUES('train_steps','16','871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "params" VALUES('train_data_version','sklearn-digits/train-898-seed-0','871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "params" VALUES('calibration_data_version','ba7adac140b5e336','871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "params" VALUES('holdout_data_version','7915f4c43529c7be','871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "params" VALUES('gate_target_accuracy','0.97','871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "params" VALUES('gate_confidence_level','0.95','871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "params" VALUES('bounds','0.05,20.0','871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "params" VALUES('n_bins','15','871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "params" VALUES('binning','equal-width','871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "params" VALUES('bootstrap_resamples','2000','871d5d3174fd46319d3fd8232a9bf0b2');
CREATE TABLE "registered_model_aliases" (
	alias VARCHAR(256) NOT NULL, 
	version INTEGER NOT NULL, 
	name VARCHAR(256) NOT NULL, 
	workspace VARCHAR(63) DEFAULT 'default' NOT NULL, 
	CONSTRAINT registered_model_alias_pk PRIMARY KEY (workspace, name, alias), 
	CONSTRAINT fk_registered_model_aliases_registered_models FOREIGN KEY(workspace, name) REFERENCES registered_models (workspace, name) ON DELETE CASCADE ON UPDATE CASCADE
);
INSERT INTO "registered_model_aliases" VALUES('champion',3,'digits','default');
INSERT INTO "registered_model_aliases" VALUES('challenger',2,'digits','default');
CREATE TABLE "registered_model_tags" (
	"key" VARCHAR(250) NOT NULL, 
	value VARCHAR(5000), 
	name VARCHAR(256) NOT NULL, 
	workspace VARCHAR(63) DEFAULT 'default' NOT NULL, 
	CONSTRAINT registered_model_tag_pk PRIMARY KEY (workspace, "key", name), 
	CONSTRAINT fk_registered_model_tags_registered_models FOREIGN KEY(workspace, name) REFERENCES registered_models (workspace, name) ON UPDATE CASCADE
);
CREATE TABLE "registered_models" (
	name VARCHAR(256) NOT NULL, 
	creation_time BIGINT, 
	last_updated_time BIGINT, 
	description VARCHAR(5000), 
	workspace VARCHAR(63) DEFAULT 'default' NOT NULL, 
	CONSTRAINT registered_model_pk PRIMARY KEY (workspace, name)
);
INSERT INTO "registered_models" VALUES('digits',1796144762426,1796144783090,'Calibrated checkpoints registered by Thermostat.','default');
CREATE TABLE review_queue_items (
	queue_id VARCHAR(36) NOT NULL, 
	item_type VARCHAR(16) NOT NULL, 
	item_id VARCHAR(50) NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	completed_by VARCHAR(250), 
	completed_time_ms BIGINT, 
	creation_time_ms BIGINT NOT NULL, 
	last_update_time_ms BIGINT NOT NULL, 
	CONSTRAINT review_queue_items_pk PRIMARY KEY (queue_id, item_id), 
	CONSTRAINT fk_review_queue_items_queue_id FOREIGN KEY(queue_id) REFERENCES review_queues (queue_id) ON DELETE CASCADE
);
CREATE TABLE review_queue_label_schemas (
	queue_id VARCHAR(36) NOT NULL, 
	schema_id VARCHAR(36) NOT NULL, 
	CONSTRAINT review_queue_label_schemas_pk PRIMARY KEY (queue_id, schema_id), 
	CONSTRAINT fk_review_queue_label_schemas_queue_id FOREIGN KEY(queue_id) REFERENCES review_queues (queue_id) ON DELETE CASCADE
);
CREATE TABLE review_queue_users (
	queue_id VARCHAR(36) NOT NULL, 
	user_id VARCHAR(250) NOT NULL, 
	CONSTRAINT review_queue_users_pk PRIMARY KEY (queue_id, user_id), 
	CONSTRAINT fk_review_queue_users_queue_id FOREIGN KEY(queue_id) REFERENCES review_queues (queue_id) ON DELETE CASCADE
);
CREATE TABLE review_queues (
	queue_id VARCHAR(36) NOT NULL, 
	experiment_id INTEGER NOT NULL, 
	name VARCHAR(250) NOT NULL, 
	queue_type VARCHAR(16) NOT NULL, 
	created_by VARCHAR(255), 
	creation_time_ms BIGINT NOT NULL, 
	last_update_time_ms BIGINT NOT NULL, 
	name_key VARCHAR(250) NOT NULL, 
	CONSTRAINT review_queues_pk PRIMARY KEY (queue_id), 
	CONSTRAINT fk_review_queues_experiment_id FOREIGN KEY(experiment_id) REFERENCES experiments (experiment_id) ON DELETE CASCADE, 
	CONSTRAINT uq_review_queues_experiment_name_key UNIQUE (experiment_id, name_key)
);
CREATE TABLE "runs" (
	run_uuid VARCHAR(32) NOT NULL, 
	name VARCHAR(250), 
	source_type VARCHAR(20), 
	source_name VARCHAR(500), 
	entry_point_name VARCHAR(50), 
	user_id VARCHAR(256), 
	status VARCHAR(9), 
	start_time BIGINT, 
	end_time BIGINT, 
	source_version VARCHAR(50), 
	lifecycle_stage VARCHAR(20), 
	artifact_uri VARCHAR(200), 
	experiment_id INTEGER, deleted_time BIGINT, 
	CONSTRAINT run_pk PRIMARY KEY (run_uuid), 
	CONSTRAINT source_type CHECK (source_type IN ('NOTEBOOK', 'JOB', 'LOCAL', 'UNKNOWN', 'PROJECT')), 
	CONSTRAINT runs_lifecycle_stage CHECK (lifecycle_stage IN ('active', 'deleted')), 
	FOREIGN KEY(experiment_id) REFERENCES experiments (experiment_id), 
	CHECK (status IN ('SCHEDULED', 'FAILED', 'FINISHED', 'RUNNING', 'KILLED'))
);
INSERT INTO "runs" VALUES('af83a0edf4b7455a9116c04d7879dc9e','fine-tune logistic-c1e4','UNKNOWN','','','unknown','FINISHED',1796144734448,1796144735655,'','active','file://@STATE_DIR@/artifacts/thermostat-demo-finetunes/af83a0edf4b7455a9116c04d7879dc9e/artifacts',1,NULL);
INSERT INTO "runs" VALUES('1c83edbface6451b9e8789937764352c','post-finetune digits','UNKNOWN','','','unknown','FINISHED',1796144761210,1796144763178,'','active','file://@STATE_DIR@/artifacts/1c83edbface6451b9e8789937764352c/artifacts',2,NULL);
INSERT INTO "runs" VALUES('90194e27fbb74c1b991e14c5900e1991','fine-tune mlp-64','UNKNOWN','','','unknown','FINISHED',1796144766471,1796144766631,'','active','file://@STATE_DIR@/artifacts/thermostat-demo-finetunes/90194e27fbb74c1b991e14c5900e1991/artifacts',1,NULL);
INSERT INTO "runs" VALUES('203318f36d3f4299916738a9ad9e7ad5','post-finetune digits','UNKNOWN','','','unknown','FINISHED',1796144767755,1796144769506,'','active','file://@STATE_DIR@/artifacts/203318f36d3f4299916738a9ad9e7ad5/artifacts',2,NULL);
INSERT INTO "runs" VALUES('da0c753a91494ec68ecb937ba0055841','check digits v1 2026-12-01T17:06:12+00:00','UNKNOWN','','','unknown','FINISHED',1796144772972,1796144773906,'','active','file://@STATE_DIR@/artifacts/thermostat-monitoring/da0c753a91494ec68ecb937ba0055841/artifacts',3,NULL);
INSERT INTO "runs" VALUES('2a8118dca97e4548803ca2e53a8b7b95','check digits v2 2026-12-01T17:06:12+00:00','UNKNOWN','','','unknown','FINISHED',1796144772972,1796144774450,'','active','file://@STATE_DIR@/artifacts/thermostat-monitoring/2a8118dca97e4548803ca2e53a8b7b95/artifacts',3,NULL);
INSERT INTO "runs" VALUES('b9cf265e03554b1f92cb6cf2345973dc','check digits v1 2026-12-01T17:06:17+00:00','UNKNOWN','','','unknown','FINISHED',1796144777648,1796144778342,'','active','file://@STATE_DIR@/artifacts/thermostat-monitoring/b9cf265e03554b1f92cb6cf2345973dc/artifacts',3,NULL);
INSERT INTO "runs" VALUES('c2a36c9e20264c91a5896bead3763ce7','check digits v2 2026-12-01T17:06:17+00:00','UNKNOWN','','','unknown','FINISHED',1796144777648,1796144778935,'','active','file://@STATE_DIR@/artifacts/thermostat-monitoring/c2a36c9e20264c91a5896bead3763ce7/artifacts',3,NULL);
INSERT INTO "runs" VALUES('871d5d3174fd46319d3fd8232a9bf0b2','post-finetune digits','UNKNOWN','','','unknown','FINISHED',1796144780307,1796144783335,'','active','file://@STATE_DIR@/artifacts/871d5d3174fd46319d3fd8232a9bf0b2/artifacts',2,NULL);
INSERT INTO "runs" VALUES('b6733d8092bd47f087b2692c92b788a7','refit digits v2 @challenger: failed','UNKNOWN','','','unknown','FINISHED',1796144784906,1796144785038,'','active','file://@STATE_DIR@/artifacts/thermostat-monitoring/b6733d8092bd47f087b2692c92b788a7/artifacts',3,NULL);
INSERT INTO "runs" VALUES('4e20b4d7456842089a553b4b579391d2','check digits v2 2026-12-01T17:06:27+00:00','UNKNOWN','','','unknown','FINISHED',1796144787838,1796144788543,'','active','file://@STATE_DIR@/artifacts/thermostat-monitoring/4e20b4d7456842089a553b4b579391d2/artifacts',3,NULL);
INSERT INTO "runs" VALUES('680bf72048354f038f25c95f37066be0','check digits v3 2026-12-01T17:06:27+00:00','UNKNOWN','','','unknown','FINISHED',1796144787838,1796144789911,'','active','file://@STATE_DIR@/artifacts/thermostat-monitoring/680bf72048354f038f25c95f37066be0/artifacts',3,NULL);
INSERT INTO "runs" VALUES('c11f2e238dc7450badb31ff8b05e5cdb','check digits v2 2026-12-01T17:06:31+00:00','UNKNOWN','','','unknown','FINISHED',1796144791250,1796144791893,'','active','file://@STATE_DIR@/artifacts/thermostat-monitoring/c11f2e238dc7450badb31ff8b05e5cdb/artifacts',3,NULL);
INSERT INTO "runs" VALUES('46ef0db0b12346aebdfea4d3c74e5c7f','check digits v3 2026-12-01T17:06:31+00:00','UNKNOWN','','','unknown','FINISHED',1796144791250,1796144792951,'','active','file://@STATE_DIR@/artifacts/thermostat-monitoring/46ef0db0b12346aebdfea4d3c74e5c7f/artifacts',3,NULL);
INSERT INTO "runs" VALUES('a96b9dfe9a524c1397f50d219aa7666d','check digits v2 2026-12-01T17:06:33+00:00','UNKNOWN','','','unknown','FINISHED',1796144793411,1796144793758,'','active','file://@STATE_DIR@/artifacts/thermostat-monitoring/a96b9dfe9a524c1397f50d219aa7666d/artifacts',3,NULL);
INSERT INTO "runs" VALUES('3f5ccebd58d0452b9bd967e6c469b5a0','check digits v3 2026-12-01T17:06:33+00:00','UNKNOWN','','','unknown','FINISHED',1796144793411,1796144794607,'','active','file://@STATE_DIR@/artifacts/thermostat-monitoring/3f5ccebd58d0452b9bd967e6c469b5a0/artifacts',3,NULL);
INSERT INTO "runs" VALUES('6a6c715b781241199a18cea2dfae6f32','check digits v2 2026-12-01T17:06:35+00:00','UNKNOWN','','','unknown','FINISHED',1796144795579,1796144796416,'','active','file://@STATE_DIR@/artifacts/thermostat-monitoring/6a6c715b781241199a18cea2dfae6f32/artifacts',3,NULL);
INSERT INTO "runs" VALUES('bad62edf2d8d4e77a404bbf5ea0edd60','check digits v3 2026-12-01T17:06:35+00:00','UNKNOWN','','','unknown','FINISHED',1796144795579,1796144797063,'','active','file://@STATE_DIR@/artifacts/thermostat-monitoring/bad62edf2d8d4e77a404bbf5ea0edd60/artifacts',3,NULL);
CREATE TABLE scheduler_leases (
	lease_key VARCHAR(255) NOT NULL, 
	acquired_at BIGINT NOT NULL, 
	ttl_seconds INTEGER NOT NULL, 
	CONSTRAINT scheduler_leases_pk PRIMARY KEY (lease_key)
);
CREATE TABLE scorer_versions (
	scorer_id VARCHAR(36) NOT NULL, 
	scorer_version INTEGER NOT NULL, 
	serialized_scorer TEXT NOT NULL, 
	creation_time BIGINT, 
	CONSTRAINT scorer_version_pk PRIMARY KEY (scorer_id, scorer_version), 
	CONSTRAINT fk_scorer_versions_scorer_id FOREIGN KEY(scorer_id) REFERENCES scorers (scorer_id) ON DELETE CASCADE
);
CREATE TABLE scorers (
	experiment_id INTEGER NOT NULL, 
	scorer_name VARCHAR(256) NOT NULL, 
	scorer_id VARCHAR(36) NOT NULL, 
	CONSTRAINT scorer_pk PRIMARY KEY (scorer_id), 
	CONSTRAINT fk_scorers_experiment_id FOREIGN KEY(experiment_id) REFERENCES experiments (experiment_id) ON DELETE CASCADE
);
CREATE TABLE "secrets" (
	secret_id VARCHAR(36) NOT NULL, 
	secret_name VARCHAR(255) NOT NULL, 
	encrypted_value BLOB NOT NULL, 
	wrapped_dek BLOB NOT NULL, 
	kek_version INTEGER NOT NULL, 
	masked_value VARCHAR(500) NOT NULL, 
	provider VARCHAR(64), 
	auth_config TEXT, 
	description TEXT, 
	created_by VARCHAR(255), 
	created_at BIGINT NOT NULL, 
	last_updated_by VARCHAR(255), 
	last_updated_at BIGINT NOT NULL, 
	workspace VARCHAR(63) DEFAULT 'default' NOT NULL, 
	CONSTRAINT secrets_pk PRIMARY KEY (secret_id), 
	CONSTRAINT uq_secrets_workspace_secret_name UNIQUE (workspace, secret_name)
);
CREATE TABLE span_metrics (
	trace_id VARCHAR(50) NOT NULL, 
	span_id VARCHAR(50) NOT NULL, 
	"key" VARCHAR(250) NOT NULL, 
	value FLOAT, 
	CONSTRAINT span_metrics_pk PRIMARY KEY (trace_id, span_id, "key"), 
	CONSTRAINT fk_span_metrics_span FOREIGN KEY(trace_id, span_id) REFERENCES spans (trace_id, span_id) ON DELETE CASCADE
);
CREATE TABLE "spans" (
	trace_id VARCHAR(50) NOT NULL, 
	experiment_id INTEGER NOT NULL, 
	span_id VARCHAR(50) NOT NULL, 
	parent_span_id VARCHAR(50), 
	name TEXT, 
	type VARCHAR(500), 
	status VARCHAR(50) NOT NULL, 
	start_time_unix_nano BIGINT NOT NULL, 
	end_time_unix_nano BIGINT, 
	duration_ns BIGINT GENERATED ALWAYS AS (end_time_unix_nano - start_time_unix_nano) STORED, 
	content TEXT NOT NULL, 
	input_cost FLOAT, 
	output_cost FLOAT, 
	total_cost FLOAT, 
	model_name VARCHAR(500), 
	model_provider VARCHAR(500), 
	CONSTRAINT spans_pk PRIMARY KEY (trace_id, span_id), 
	CONSTRAINT fk_spans_experiment_id FOREIGN KEY(experiment_id) REFERENCES experiments (experiment_id), 
	CONSTRAINT fk_spans_trace_id FOREIGN KEY(trace_id) REFERENCES trace_info (request_id) ON DELETE CASCADE
);
CREATE TABLE sql_assessment_daily_rollups (
	id INTEGER NOT NULL, 
	experiment_id INTEGER NOT NULL, 
	rollup_day DATE NOT NULL, 
	metric_name VARCHAR(250) NOT NULL, 
	grouping_set VARCHAR(50) NOT NULL, 
	sample_count BIGINT NOT NULL, 
	sum_value FLOAT, 
	min_value FLOAT, 
	max_value FLOAT, 
	CONSTRAINT sql_assessment_daily_rollups_pk PRIMARY KEY (id)
);
CREATE TABLE sql_span_cost_daily_rollups (
	id INTEGER NOT NULL, 
	experiment_id INTEGER NOT NULL, 
	rollup_day DATE NOT NULL, 
	metric_name VARCHAR(250) NOT NULL, 
	grouping_set VARCHAR(50) NOT NULL, 
	model_name VARCHAR(500), 
	model_provider VARCHAR(500), 
	sample_count BIGINT NOT NULL, 
	sum_value FLOAT, 
	min_value FLOAT, 
	max_value FLOAT, 
	CONSTRAINT sql_span_cost_daily_rollups_pk PRIMARY KEY (id)
);
CREATE TABLE sql_trace_metric_daily_rollups (
	id INTEGER NOT NULL, 
	experiment_id INTEGER NOT NULL, 
	rollup_day DATE NOT NULL, 
	metric_name VARCHAR(250) NOT NULL, 
	grouping_set VARCHAR(50) NOT NULL, 
	trace_status VARCHAR(50), 
	sample_count BIGINT NOT NULL, 
	sum_value FLOAT, 
	min_value FLOAT, 
	max_value FLOAT, 
	p50_value FLOAT, 
	p90_value FLOAT, 
	p99_value FLOAT, 
	CONSTRAINT sql_trace_metric_daily_rollups_pk PRIMARY KEY (id)
);
CREATE TABLE sql_trace_rollup_rebuild_queue (
	experiment_id INTEGER NOT NULL, 
	rollup_day DATE NOT NULL, 
	rollup_family VARCHAR(50) NOT NULL, 
	CONSTRAINT sql_trace_rollup_rebuild_queue_pk PRIMARY KEY (experiment_id, rollup_day, rollup_family)
);
CREATE TABLE "tags" (
	"key" VARCHAR(250) NOT NULL, 
	value VARCHAR(8000), 
	run_uuid VARCHAR(32) NOT NULL, 
	CONSTRAINT tag_pk PRIMARY KEY ("key", run_uuid), 
	FOREIGN KEY(run_uuid) REFERENCES runs (run_uuid)
);
INSERT INTO "tags" VALUES('thermostat.demo_checkpoint','logistic-c1e4','af83a0edf4b7455a9116c04d7879dc9e');
INSERT INTO "tags" VALUES('mlflow.runName','fine-tune logistic-c1e4','af83a0edf4b7455a9116c04d7879dc9e');
INSERT INTO "tags" VALUES('thermostat.model_name','digits','1c83edbface6451b9e8789937764352c');
INSERT INTO "tags" VALUES('checkpoint_uri','runs:/af83a0edf4b7455a9116c04d7879dc9e/checkpoint','1c83edbface6451b9e8789937764352c');
INSERT INTO "tags" VALUES('checkpoint_digest','e62ebc90463caab1742c344785491335cb9d339d9e2391a4e7c4b0795c6ed5e9','1c83edbface6451b9e8789937764352c');
INSERT INTO "tags" VALUES('idempotency_key','de0a910649afd1c4c22851a7145c061457f123235ec0dca75c1fbddcea20305c','1c83edbface6451b9e8789937764352c');
INSERT INTO "tags" VALUES('mlflow.runName','post-finetune digits','1c83edbface6451b9e8789937764352c');
INSERT INTO "tags" VALUES('thermostat.demo_checkpoint','mlp-64','90194e27fbb74c1b991e14c5900e1991');
INSERT INTO "tags" VALUES('mlflow.runName','fine-tune mlp-64','90194e27fbb74c1b991e14c5900e1991');
INSERT INTO "tags" VALUES('thermostat.model_name','digits','203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "tags" VALUES('checkpoint_uri','runs:/90194e27fbb74c1b991e14c5900e1991/checkpoint','203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "tags" VALUES('checkpoint_digest','31a7f23737ff869e726d9f9e5f7e86af25f0c0a3cbb74e2fba18148f434f1c6b','203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "tags" VALUES('idempotency_key','2db3aa37c5ac2c68a871cf8212fe85a1b3fa50a1337541b278fe8b0fc83440a6','203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "tags" VALUES('mlflow.runName','post-finetune digits','203318f36d3f4299916738a9ad9e7ad5');
INSERT INTO "tags" VALUES('thermostat.model_name','digits','da0c753a91494ec68ecb937ba0055841');
INSERT INTO "tags" VALUES('thermostat.model_version','1','da0c753a91494ec68ecb937ba0055841');
INSERT INTO "tags" VALUES('thermostat.aliases','champion','da0c753a91494ec68ecb937ba0055841');
INSERT INTO "tags" VALUES('thermostat.verdict','ok','da0c753a91494ec68ecb937ba0055841');
INSERT INTO "tags" VALUES('thermostat.window_start','2026-12-01T17:06:10.469261+00:00','da0c753a91494ec68ecb937ba0055841');
INSERT INTO "tags" VALUES('thermostat.window_end','2026-12-01T17:06:12.972479+00:00','da0c753a91494ec68ecb937ba0055841');
INSERT INTO "tags" VALUES('thermostat.refit_recommended','false','da0c753a91494ec68ecb937ba0055841');
INSERT INTO "tags" VALUES('thermostat.tests_fired','none','da0c753a91494ec68ecb937ba0055841');
INSERT INTO "tags" VALUES('temperature','2.698789217392412','da0c753a91494ec68ecb937ba0055841');
INSERT INTO "tags" VALUES('checkpoint_uri','runs:/af83a0edf4b7455a9116c04d7879dc9e/checkpoint','da0c753a91494ec68ecb937ba0055841');
INSERT INTO "tags" VALUES('checkpoint_digest','e62ebc90463caab1742c344785491335cb9d339d9e2391a4e7c4b0795c6ed5e9','da0c753a91494ec68ecb937ba0055841');
INSERT INTO "tags" VALUES('thermostat.kind','check','da0c753a91494ec68ecb937ba0055841');
INSERT INTO "tags" VALUES('thermostat.prefect_flow_run_id','f0717836-9a71-4c10-b8ac-a05f2ee5ca45','da0c753a91494ec68ecb937ba0055841');
INSERT INTO "tags" VALUES('mlflow.runName','check digits v1 2026-12-01T17:06:12+00:00','da0c753a91494ec68ecb937ba0055841');
INSERT INTO "tags" VALUES('thermostat.model_name','digits','2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "tags" VALUES('thermostat.model_version','2','2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "tags" VALUES('thermostat.aliases','challenger','2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "tags" VALUES('thermostat.verdict','ok','2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "tags" VALUES('thermostat.window_start','2026-12-01T17:06:10.469261+00:00','2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "tags" VALUES('thermostat.window_end','2026-12-01T17:06:12.972479+00:00','2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "tags" VALUES('thermostat.refit_recommended','false','2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "tags" VALUES('thermostat.tests_fired','none','2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "tags" VALUES('temperature','1.0490031757419889','2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "tags" VALUES('checkpoint_uri','runs:/90194e27fbb74c1b991e14c5900e1991/checkpoint','2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "tags" VALUES('checkpoint_digest','31a7f23737ff869e726d9f9e5f7e86af25f0c0a3cbb74e2fba18148f434f1c6b','2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "tags" VALUES('thermostat.kind','check','2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "tags" VALUES('thermostat.prefect_flow_run_id','f0717836-9a71-4c10-b8ac-a05f2ee5ca45','2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "tags" VALUES('mlflow.runName','check digits v2 2026-12-01T17:06:12+00:00','2a8118dca97e4548803ca2e53a8b7b95');
INSERT INTO "tags" VALUES('thermostat.model_name','digits','b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "tags" VALUES('thermostat.model_version','1','b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "tags" VALUES('thermostat.aliases','champion','b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "tags" VALUES('thermostat.verdict','drift','b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "tags" VALUES('thermostat.window_start','2026-12-01T17:06:15.977690+00:00','b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "tags" VALUES('thermostat.window_end','2026-12-01T17:06:17.648000+00:00','b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "tags" VALUES('thermostat.refit_recommended','true','b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "tags" VALUES('thermostat.tests_fired','temperature,group ''camera'' temperature,sequential','b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "tags" VALUES('temperature','2.698789217392412','b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "tags" VALUES('checkpoint_uri','runs:/af83a0edf4b7455a9116c04d7879dc9e/checkpoint','b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "tags" VALUES('checkpoint_digest','e62ebc90463caab1742c344785491335cb9d339d9e2391a4e7c4b0795c6ed5e9','b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "tags" VALUES('thermostat.kind','check','b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "tags" VALUES('thermostat.prefect_flow_run_id','e2337598-75d4-4504-8360-a498a16ffbad','b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "tags" VALUES('mlflow.runName','check digits v1 2026-12-01T17:06:17+00:00','b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "tags" VALUES('thermostat.model_name','digits','c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "tags" VALUES('thermostat.model_version','2','c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "tags" VALUES('thermostat.aliases','challenger','c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "tags" VALUES('thermostat.verdict','drift','c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "tags" VALUES('thermostat.window_start','2026-12-01T17:06:15.977690+00:00','c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "tags" VALUES('thermostat.window_end','2026-12-01T17:06:17.648000+00:00','c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "tags" VALUES('thermostat.refit_recommended','true','c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "tags" VALUES('thermostat.tests_fired','temperature,ece,group ''scanner'' temperature,group ''scanner'' ece,sequential','c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "tags" VALUES('temperature','1.0490031757419889','c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "tags" VALUES('checkpoint_uri','runs:/90194e27fbb74c1b991e14c5900e1991/checkpoint','c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "tags" VALUES('checkpoint_digest','31a7f23737ff869e726d9f9e5f7e86af25f0c0a3cbb74e2fba18148f434f1c6b','c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "tags" VALUES('thermostat.kind','check','c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "tags" VALUES('thermostat.prefect_flow_run_id','e2337598-75d4-4504-8360-a498a16ffbad','c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "tags" VALUES('mlflow.runName','check digits v2 2026-12-01T17:06:17+00:00','c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "tags" VALUES('thermostat.model_name','digits','871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "tags" VALUES('checkpoint_uri','runs:/af83a0edf4b7455a9116c04d7879dc9e/checkpoint','871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "tags" VALUES('checkpoint_digest','e62ebc90463caab1742c344785491335cb9d339d9e2391a4e7c4b0795c6ed5e9','871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "tags" VALUES('idempotency_key','f6ddf63b54c77c08e98602f079ca8407a392666815b54fb72f1d1287237589fa','871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "tags" VALUES('mlflow.runName','post-finetune digits','871d5d3174fd46319d3fd8232a9bf0b2');
INSERT INTO "tags" VALUES('thermostat.caused_refit.status','registered','b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "tags" VALUES('thermostat.caused_refit.flow_run_id','f8634edc-6c02-463d-b43d-fa4982c4c37a','b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "tags" VALUES('thermostat.caused_refit.new_version','3','b9cf265e03554b1f92cb6cf2345973dc');
INSERT INTO "tags" VALUES('thermostat.kind','refit','b6733d8092bd47f087b2692c92b788a7');
INSERT INTO "tags" VALUES('thermostat.model_name','digits','b6733d8092bd47f087b2692c92b788a7');
INSERT INTO "tags" VALUES('thermostat.model_version','2','b6733d8092bd47f087b2692c92b788a7');
INSERT INTO "tags" VALUES('thermostat.aliases','challenger','b6733d8092bd47f087b2692c92b788a7');
INSERT INTO "tags" VALUES('thermostat.window_start','2026-12-01T17:06:16.060619+00:00','b6733d8092bd47f087b2692c92b788a7');
INSERT INTO "tags" VALUES('thermostat.window_end','2026-12-01T17:06:17.648000+00:00','b6733d8092bd47f087b2692c92b788a7');
INSERT INTO "tags" VALUES('thermostat.refit.status','failed','b6733d8092bd47f087b2692c92b788a7');
INSERT INTO "tags" VALUES('thermostat.refit.step','acceptance','b6733d8092bd47f087b2692c92b788a7');
INSERT INTO "tags" VALUES('thermostat.refit.reason','acceptance refused: accuracy on the recent traffic is 0.2950, below the floor 0.5000; a temperature never changes which class wins, so a refit cannot help: needs retraining or a data fix','b6733d8092bd47f087b2692c92b788a7');
INSERT INTO "tags" VALUES('thermostat.refit.escalation','needs retraining or a data fix','b6733d8092bd47f087b2692c92b788a7');
INSERT INTO "tags" VALUES('thermostat.refit.new_version','none','b6733d8092bd47f087b2692c92b788a7');
INSERT INTO "tags" VALUES('thermostat.prefect_flow_run_id','85a40393-2a51-4736-910c-26f4efa526e3','b6733d8092bd47f087b2692c92b788a7');
INSERT INTO "tags" VALUES('thermostat.refit.drift_event_id','01a23292-4ed2-70e3-abe6-f40adf13db6f','b6733d8092bd47f087b2692c92b788a7');
INSERT INTO "tags" VALUES('thermostat.refit.drift_run_id','c2a36c9e20264c91a5896bead3763ce7','b6733d8092bd47f087b2692c92b788a7');
INSERT INTO "tags" VALUES('mlflow.runName','refit digits v2 @challenger: failed','b6733d8092bd47f087b2692c92b788a7');
INSERT INTO "tags" VALUES('thermostat.caused_refit.status','failed','c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "tags" VALUES('thermostat.caused_refit.flow_run_id','85a40393-2a51-4736-910c-26f4efa526e3','c2a36c9e20264c91a5896bead3763ce7');
INSERT INTO "tags" VALUES('thermostat.model_name','digits','4e20b4d7456842089a553b4b579391d2');
INSERT INTO "tags" VALUES('thermostat.model_version','2','4e20b4d7456842089a553b4b579391d2');
INSERT INTO "tags" VALUES('thermostat.aliases','challenger','4e20b4d7456842089a553b4b579391d2');
INSERT INTO "tags" VALUES('thermostat.verdict','drift','4e20b4d7456842089a553b4b579391d2');
INSERT INTO "tags" VALUES('thermostat.window_start','2026-12-01T17:06:25.719146+00:00','4e20b4d7456842089a553b4b579391d2');
INSERT INTO "tags" VALUES('thermostat.window_end','2026-12-01T17:06:27.838010+00:00','4e20b4d7456842089a553b4b579391d2');
INSERT INTO "tags" VALUES('thermostat.refit_recommended','false','4e20b4d7456842089a553b4b579391d2');
INSERT INTO "tags" VALUES('thermostat.tests_fired','temperature,ece,group ''scanner'' temperature,group ''scanner'' ece,sequential','4e20b4d7456842089a553b4b579391d2');
INSERT INTO "tags" VALUES('temperature','1.0490031757419889','4e20b4d7456842089a553b4b579391d2');
INSERT INTO "tags" VALUES('checkpoint_uri','runs:/90194e27fbb74c1b991e14c5900e1991/checkpoint','4e20b4d7456842089a553b4b579391d2');
INSERT INTO "tags" VALUES('checkpoint_digest','31a7f23737ff869e726d9f9e5f7e86af25f0c0a3cbb74e2fba18148f434f1c6b','4e20b4d7456842089a553b4b579391d2');
INSERT INTO "tags" VALUES('thermostat.kind','check','4e20b4d7456842089a553b4b579391d2');
INSERT INTO "tags" VALUES('thermostat.prefect_flow_run_id','b7bbb536-5471-4bb6-8aa9-1c060e2b7b79','4e20b4d7456842089a553b4b579391d2');
INSERT INTO "tags" VALUES('mlflow.runName','check digits v2 2026-12-01T17:06:27+00:00','4e20b4d7456842089a553b4b579391d2');
INSERT INTO "tags" VALUES('thermostat.model_name','digits','680bf72048354f038f25c95f37066be0');
INSERT INTO "tags" VALUES('thermostat.model_version','3','680bf72048354f038f25c95f37066be0');
INSERT INTO "tags" VALUES('thermostat.aliases','champion','680bf72048354f038f25c95f37066be0');
INSERT INTO "tags" VALUES('thermostat.verdict','ok','680bf72048354f038f25c95f37066be0');
INSERT INTO "tags" VALUES('thermostat.window_start','2026-12-01T17:06:25.719146+00:00','680bf72048354f038f25c95f37066be0');
INSERT INTO "tags" VALUES('thermostat.window_end','2026-12-01T17:06:27.838010+00:00','680bf72048354f038f25c95f37066be0');
INSERT INTO "tags" VALUES('thermostat.refit_recommended','false','680bf72048354f038f25c95f37066be0');
INSERT INTO "tags" VALUES('thermostat.tests_fired','none','680bf72048354f038f25c95f37066be0');
INSERT INTO "tags" VALUES('temperature','4.702027711783432','680bf72048354f038f25c95f37066be0');
INSERT INTO "tags" VALUES('checkpoint_uri','runs:/af83a0edf4b7455a9116c04d7879dc9e/checkpoint','680bf72048354f038f25c95f37066be0');
INSERT INTO "tags" VALUES('checkpoint_digest','e62ebc90463caab1742c344785491335cb9d339d9e2391a4e7c4b0795c6ed5e9','680bf72048354f038f25c95f37066be0');
INSERT INTO "tags" VALUES('thermostat.kind','check','680bf72048354f038f25c95f37066be0');
INSERT INTO "tags" VALUES('thermostat.prefect_flow_run_id','b7bbb536-5471-4bb6-8aa9-1c060e2b7b79','680bf72048354f038f25c95f37066be0');
INSERT INTO "tags" VALUES('mlflow.runName','check digits v3 2026-12-01T17:06:27+00:00','680bf72048354f038f25c95f37066be0');
INSERT INTO "tags" VALUES('thermostat.model_name','digits','c11f2e238dc7450badb31ff8b05e5cdb');
INSERT INTO "tags" VALUES('thermostat.model_version','2','c11f2e238dc7450badb31ff8b05e5cdb');
INSERT INTO "tags" VALUES('thermostat.aliases','challenger','c11f2e238dc7450badb31ff8b05e5cdb');
INSERT INTO "tags" VALUES('thermostat.verdict','insufficient_data','c11f2e238dc7450badb31ff8b05e5cdb');
INSERT INTO "tags" VALUES('thermostat.window_start','2026-12-01T17:06:29.955312+00:00','c11f2e238dc7450badb31ff8b05e5cdb');
INSERT INTO "tags" VALUES('thermostat.window_end','2026-12-01T17:06:31.250164+00:00','c11f2e238dc7450badb31ff8b05e5cdb');
INSERT INTO "tags" VALUES('thermostat.refit_recommended','false','c11f2e238dc7450badb31ff8b05e5cdb');
INSERT INTO "tags" VALUES('thermostat.tests_fired','none','c11f2e238dc7450badb31ff8b05e5cdb');
INSERT INTO "tags" VALUES('temperature','1.0490031757419889','c11f2e238dc7450badb31ff8b05e5cdb');
INSERT INTO "tags" VALUES('checkpoint_uri','runs:/90194e27fbb74c1b991e14c5900e1991/checkpoint','c11f2e238dc7450badb31ff8b05e5cdb');
INSERT INTO "tags" VALUES('checkpoint_digest','31a7f23737ff869e726d9f9e5f7e86af25f0c0a3cbb74e2fba18148f434f1c6b','c11f2e238dc7450badb31ff8b05e5cdb');
INSERT INTO "tags" VALUES('thermostat.kind','check','c11f2e238dc7450badb31ff8b05e5cdb');
INSERT INTO "tags" VALUES('thermostat.prefect_flow_run_id','60302cad-dbf4-4003-b174-f6dd88142d11','c11f2e238dc7450badb31ff8b05e5cdb');
INSERT INTO "tags" VALUES('mlflow.runName','check digits v2 2026-12-01T17:06:31+00:00','c11f2e238dc7450badb31ff8b05e5cdb');
INSERT INTO "tags" VALUES('thermostat.model_name','digits','46ef0db0b12346aebdfea4d3c74e5c7f');
INSERT INTO "tags" VALUES('thermostat.model_version','3','46ef0db0b12346aebdfea4d3c74e5c7f');
INSERT INTO "tags" VALUES('thermostat.aliases','champion','46ef0db0b12346aebdfea4d3c74e5c7f');
INSERT INTO "tags" VALUES('thermostat.verdict','insufficient_data','46ef0db0b12346aebdfea4d3c74e5c7f');
INSERT INTO "tags" VALUES('thermostat.window_start','2026-12-01T17:06:29.955312+00:00','46ef0db0b12346aebdfea4d3c74e5c7f');
INSERT INTO "tags" VALUES('thermostat.window_end','2026-12-01T17:06:31.250164+00:00','46ef0db0b12346aebdfea4d3c74e5c7f');
INSERT INTO "tags" VALUES('thermostat.refit_recommended','false','46ef0db0b12346aebdfea4d3c74e5c7f');
INSERT INTO "tags" VALUES('thermostat.tests_fired','none','46ef0db0b12346aebdfea4d3c74e5c7f');
INSERT INTO "tags" VALUES('temperature','4.702027711783432','46ef0db0b12346aebdfea4d3c74e5c7f');
INSERT INTO "tags" VALUES('checkpoint_uri','runs:/af83a0edf4b7455a9116c04d7879dc9e/checkpoint','46ef0db0b12346aebdfea4d3c74e5c7f');
INSERT INTO "tags" VALUES('checkpoint_digest','e62ebc90463caab1742c344785491335cb9d339d9e2391a4e7c4b0795c6ed5e9','46ef0db0b12346aebdfea4d3c74e5c7f');
INSERT INTO "tags" VALUES('thermostat.kind','check','46ef0db0b12346aebdfea4d3c74e5c7f');
INSERT INTO "tags" VALUES('thermostat.prefect_flow_run_id','60302cad-dbf4-4003-b174-f6dd88142d11','46ef0db0b12346aebdfea4d3c74e5c7f');
INSERT INTO "tags" VALUES('mlflow.runName','check digits v3 2026-12-01T17:06:31+00:00','46ef0db0b12346aebdfea4d3c74e5c7f');
INSERT INTO "tags" VALUES('thermostat.model_name','digits','a96b9dfe9a524c1397f50d219aa7666d');
INSERT INTO "tags" VALUES('thermostat.model_version','2','a96b9dfe9a524c1397f50d219aa7666d');
INSERT INTO "tags" VALUES('thermostat.aliases','challenger','a96b9dfe9a524c1397f50d219aa7666d');
INSERT INTO "tags" VALUES('thermostat.verdict','insufficient_data','a96b9dfe9a524c1397f50d219aa7666d');
INSERT INTO "tags" VALUES('thermostat.window_start','2026-12-01T17:06:32.256829+00:00','a96b9dfe9a524c1397f50d219aa7666d');
INSERT INTO "tags" VALUES('thermostat.window_end','2026-12-01T17:06:33.411962+00:00','a96b9dfe9a524c1397f50d219aa7666d');
INSERT INTO "tags" VALUES('thermostat.refit_recommended','false','a96b9dfe9a524c1397f50d219aa7666d');
INSERT INTO "tags" VALUES('thermostat.tests_fired','none','a96b9dfe9a524c1397f50d219aa7666d');
INSERT INTO "tags" VALUES('temperature','1.0490031757419889','a96b9dfe9a524c1397f50d219aa7666d');
INSERT INTO "tags" VALUES('checkpoint_uri','runs:/90194e27fbb74c1b991e14c5900e1991/checkpoint','a96b9dfe9a524c1397f50d219aa7666d');
INSERT INTO "tags" VALUES('checkpoint_digest','31a7f23737ff869e726d9f9e5f7e86af25f0c0a3cbb74e2fba18148f434f1c6b','a96b9dfe9a524c1397f50d219aa7666d');
INSERT INTO "tags" VALUES('thermostat.kind','check','a96b9dfe9a524c1397f50d219aa7666d');
INSERT INTO "tags" VALUES('thermostat.prefect_flow_run_id','d119ff61-14bd-45d7-8558-b6388c391444','a96b9dfe9a524c1397f50d219aa7666d');
INSERT INTO "tags" VALUES('mlflow.runName','check digits v2 2026-12-01T17:06:33+00:00','a96b9dfe9a524c1397f50d219aa7666d');
INSERT INTO "tags" VALUES('thermostat.model_name','digits','3f5ccebd58d0452b9bd967e6c469b5a0');
INSERT INTO "tags" VALUES('thermostat.model_version','3','3f5ccebd58d0452b9bd967e6c469b5a0');
INSERT INTO "tags" VALUES('thermostat.aliases','champion','3f5ccebd58d0452b9bd967e6c469b5a0');
INSERT INTO "tags" VALUES('thermostat.verdict','insufficient_data','3f5ccebd58d0452b9bd967e6c469b5a0');
INSERT INTO "tags" VALUES('thermostat.window_start','2026-12-01T17:06:32.256829+00:00','3f5ccebd58d0452b9bd967e6c469b5a0');
INSERT INTO "tags" VALUES('thermostat.window_end','2026-12-01T17:06:33.411962+00:00','3f5ccebd58d0452b9bd967e6c469b5a0');
INSERT INTO "tags" VALUES('thermostat.refit_recommended','false','3f5ccebd58d0452b9bd967e6c469b5a0');
INSERT INTO "tags" VALUES('thermostat.tests_fired','none','3f5ccebd58d0452b9bd967e6c469b5a0');
INSERT INTO "tags" VALUES('temperature','4.702027711783432','3f5ccebd58d0452b9bd967e6c469b5a0');
INSERT INTO "tags" VALUES('checkpoint_uri','runs:/af83a0edf4b7455a9116c04d7879dc9e/checkpoint','3f5ccebd58d0452b9bd967e6c469b5a0');
INSERT INTO "tags" VALUES('checkpoint_digest','e62ebc90463caab1742c344785491335cb9d339d9e2391a4e7c4b0795c6ed5e9','3f5ccebd58d0452b9bd967e6c469b5a0');
INSERT INTO "tags" VALUES('thermostat.kind','check','3f5ccebd58d0452b9bd967e6c469b5a0');
INSERT INTO "tags" VALUES('thermostat.prefect_flow_run_id','d119ff61-14bd-45d7-8558-b6388c391444','3f5ccebd58d0452b9bd967e6c469b5a0');
INSERT INTO "tags" VALUES('mlflow.runName','check digits v3 2026-12-01T17:06:33+00:00','3f5ccebd58d0452b9bd967e6c469b5a0');
INSERT INTO "tags" VALUES('thermostat.model_name','digits','6a6c715b781241199a18cea2dfae6f32');
INSERT INTO "tags" VALUES('thermostat.model_version','2','6a6c715b781241199a18cea2dfae6f32');
INSERT INTO "tags" VALUES('thermostat.aliases','challenger','6a6c715b781241199a18cea2dfae6f32');
INSERT INTO "tags" VALUES('thermostat.verdict','insufficient_data','6a6c715b781241199a18cea2dfae6f32');
INSERT INTO "tags" VALUES('thermostat.window_start','2026-12-01T17:06:34.420125+00:00','6a6c715b781241199a18cea2dfae6f32');
INSERT INTO "tags" VALUES('thermostat.window_end','2026-12-01T17:06:35.579269+00:00','6a6c715b781241199a18cea2dfae6f32');
INSERT INTO "tags" VALUES('thermostat.refit_recommended','false','6a6c715b781241199a18cea2dfae6f32');
INSERT INTO "tags" VALUES('thermostat.tests_fired','none','6a6c715b781241199a18cea2dfae6f32');
INSERT INTO "tags" VALUES('temperature','1.0490031757419889','6a6c715b781241199a18cea2dfae6f32');
INSERT INTO "tags" VALUES('checkpoint_uri','runs:/90194e27fbb74c1b991e14c5900e1991/checkpoint','6a6c715b781241199a18cea2dfae6f32');
INSERT INTO "tags" VALUES('checkpoint_digest','31a7f23737ff869e726d9f9e5f7e86af25f0c0a3cbb74e2fba18148f434f1c6b','6a6c715b781241199a18cea2dfae6f32');
INSERT INTO "tags" VALUES('thermostat.kind','check','6a6c715b781241199a18cea2dfae6f32');
INSERT INTO "tags" VALUES('thermostat.prefect_flow_run_id','c1647fe9-5995-4811-9e87-21cd0c6fa093','6a6c715b781241199a18cea2dfae6f32');
INSERT INTO "tags" VALUES('mlflow.runName','check digits v2 2026-12-01T17:06:35+00:00','6a6c715b781241199a18cea2dfae6f32');
INSERT INTO "tags" VALUES('thermostat.model_name','digits','bad62edf2d8d4e77a404bbf5ea0edd60');
INSERT INTO "tags" VALUES('thermostat.model_version','3','bad62edf2d8d4e77a404bbf5ea0edd60');
INSERT INTO "tags" VALUES('thermostat.aliases','champion','bad62edf2d8d4e77a404bbf5ea0edd60');
INSERT INTO "tags" VALUES('thermostat.verdict','insufficient_data','bad62edf2d8d4e77a404bbf5ea0edd60');
INSERT INTO "tags" VALUES('thermostat.window_start','2026-12-01T17:06:34.420125+00:00','bad62edf2d8d4e77a404bbf5ea0edd60');
INSERT INTO "tags" VALUES('thermostat.window_end','2026-12-01T17:06:35.579269+00:00','bad62edf2d8d4e77a404bbf5ea0edd60');
INSERT INTO "tags" VALUES('thermostat.refit_recommended','false','bad62edf2d8d4e77a404bbf5ea0edd60');
INSERT INTO "tags" VALUES('thermostat.tests_fired','none','bad62edf2d8d4e77a404bbf5ea0edd60');
INSERT INTO "tags" VALUES('temperature','4.702027711783432','bad62edf2d8d4e77a404bbf5ea0edd60');
INSERT INTO "tags" VALUES('checkpoint_uri','runs:/af83a0edf4b7455a9116c04d7879dc9e/checkpoint','bad62edf2d8d4e77a404bbf5ea0edd60');
INSERT INTO "tags" VALUES('checkpoint_digest','e62ebc90463caab1742c344785491335cb9d339d9e2391a4e7c4b0795c6ed5e9','bad62edf2d8d4e77a404bbf5ea0edd60');
INSERT INTO "tags" VALUES('thermostat.kind','check','bad62edf2d8d4e77a404bbf5ea0edd60');
INSERT INTO "tags" VALUES('thermostat.prefect_flow_run_id','c1647fe9-5995-4811-9e87-21cd0c6fa093','bad62edf2d8d4e77a404bbf5ea0edd60');
INSERT INTO "tags" VALUES('mlflow.runName','check digits v3 2026-12-01T17:06:35+00:00','bad62edf2d8d4e77a404bbf5ea0edd60');
CREATE TABLE "trace_info" (
	request_id VARCHAR(50) NOT NULL, 
	experiment_id INTEGER NOT NULL, 
	timestamp_ms BIGINT NOT NULL, 
	execution_time_ms BIGINT, 
	status VARCHAR(50) NOT NULL, 
	client_request_id VARCHAR(50), 
	request_preview VARCHAR(1000), 
	response_preview VARCHAR(1000), 
	db_payload_generation INTEGER DEFAULT '0' NOT NULL, trace_name VARCHAR(4096), session_id VARCHAR(250), input_tokens BIGINT, output_tokens BIGINT, total_tokens BIGINT, cache_read_input_tokens BIGINT, cache_creation_input_tokens BIGINT, cache_creation_input_tokens_above_1hr BIGINT, input_cost FLOAT, output_cost FLOAT, total_cost FLOAT, 
	CONSTRAINT trace_info_pk PRIMARY KEY (request_id), 
	CONSTRAINT fk_trace_info_experiment_id FOREIGN KEY(experiment_id) REFERENCES experiments (experiment_id) ON DELETE CASCADE
);
CREATE TABLE trace_metrics (
	request_id VARCHAR(50) NOT NULL, 
	"key" VARCHAR(250) NOT NULL, 
	value FLOAT, 
	CONSTRAINT trace_metrics_pk PRIMARY KEY (request_id, "key"), 
	CONSTRAINT fk_trace_metrics_request_id FOREIGN KEY(request_id) REFERENCES trace_info (request_id) ON DELETE CASCADE
);
CREATE TABLE "trace_request_metadata" (
	"key" VARCHAR(250) NOT NULL, 
	value VARCHAR(8000), 
	request_id VARCHAR(50) NOT NULL, 
	CONSTRAINT trace_request_metadata_pk PRIMARY KEY ("key", request_id), 
	CONSTRAINT fk_trace_request_metadata_request_id FOREIGN KEY(request_id) REFERENCES trace_info (request_id) ON DELETE CASCADE
);
CREATE TABLE "trace_tags" (
	"key" VARCHAR(250) NOT NULL, 
	value VARCHAR(8000), 
	request_id VARCHAR(50) NOT NULL, 
	CONSTRAINT trace_tag_pk PRIMARY KEY ("key", request_id), 
	CONSTRAINT fk_trace_tags_request_id FOREIGN KEY(request_id) REFERENCES trace_info (request_id) ON DELETE CASCADE
);
CREATE TABLE webhook_events (
	webhook_id VARCHAR(256) NOT NULL, 
	entity VARCHAR(50) NOT NULL, 
	action VARCHAR(50) NOT NULL, 
	CONSTRAINT webhook_event_pk PRIMARY KEY (webhook_id, entity, action), 
	FOREIGN KEY(webhook_id) REFERENCES webhooks (webhook_id) ON DELETE cascade
);
CREATE TABLE "webhooks" (
	webhook_id VARCHAR(256) NOT NULL, 
	name VARCHAR(256) NOT NULL, 
	description VARCHAR(1000), 
	url VARCHAR(500) NOT NULL, 
	status VARCHAR(20) DEFAULT 'ACTIVE' NOT NULL, 
	secret VARCHAR(1000), 
	creation_timestamp BIGINT, 
	last_updated_timestamp BIGINT, 
	deleted_timestamp BIGINT, 
	workspace VARCHAR(63) DEFAULT 'default' NOT NULL, 
	CONSTRAINT webhook_pk PRIMARY KEY (webhook_id)
);
CREATE TABLE workspaces (
	name VARCHAR(63) NOT NULL, 
	description TEXT, 
	default_artifact_root TEXT, trace_archival_location TEXT, trace_archival_retention VARCHAR(32), 
	CONSTRAINT workspaces_pk PRIMARY KEY (name)
);
INSERT INTO "workspaces" VALUES('default','Default workspace for legacy resources',NULL,NULL,NULL);
CREATE INDEX index_metrics_run_uuid ON metrics (run_uuid);
CREATE INDEX index_latest_metrics_run_uuid ON latest_metrics (run_uuid);
CREATE INDEX index_inputs_input_uuid ON inputs (input_uuid);
CREATE INDEX index_inputs_destination_type_destination_id_source_type ON inputs (destination_type, destination_id, source_type);
CREATE INDEX index_params_run_uuid ON params (run_uuid);
CREATE INDEX index_trace_tags_request_id ON trace_tags (request_id);
CREATE INDEX index_trace_request_metadata_request_id ON trace_request_metadata (request_id);
CREATE INDEX index_tags_run_uuid ON tags (run_uuid);
CREATE INDEX index_datasets_experiment_id_dataset_source_type ON datasets (experiment_id, dataset_source_type);
CREATE INDEX index_datasets_dataset_uuid ON datasets (dataset_uuid);
CREATE INDEX index_logged_model_metrics_model_id ON logged_model_metrics (model_id);
CREATE INDEX index_entity_associations_association_id ON entity_associations (association_id);
CREATE INDEX index_entity_associations_reverse_lookup ON entity_associations (destination_type, destination_id, source_type, source_id);
CREATE INDEX idx_webhook_events_entity ON webhook_events (entity);
CREATE INDEX idx_webhook_events_action ON webhook_events (action);
CREATE INDEX idx_webhook_events_entity_action ON webhook_events (entity, action);
CREATE UNIQUE INDEX index_scorers_experiment_id_scorer_name ON scorers (experiment_id, scorer_name);
CREATE INDEX index_scorer_versions_scorer_id ON scorer_versions (scorer_id);
CREATE INDEX index_evaluation_dataset_tags_dataset_id ON evaluation_dataset_tags (dataset_id);
CREATE INDEX index_evaluation_dataset_records_dataset_id ON evaluation_dataset_records (dataset_id);
CREATE INDEX index_endpoint_model_mappings_endpoint_id ON endpoint_model_mappings (endpoint_id);
CREATE INDEX index_endpoint_model_mappings_model_definition_id ON endpoint_model_mappings (model_definition_id);
CREATE INDEX index_endpoint_tags_endpoint_id ON endpoint_tags (endpoint_id);
CREATE INDEX index_trace_metrics_request_id ON trace_metrics (request_id);
CREATE UNIQUE INDEX unique_endpoint_model_linkage_mapping ON endpoint_model_mappings (endpoint_id, model_definition_id, linkage_type);
CREATE INDEX index_span_metrics_trace_id_span_id ON span_metrics (trace_id, span_id);
CREATE INDEX index_evaluation_datasets_name ON evaluation_datasets (name);
CREATE INDEX index_evaluation_datasets_created_time ON evaluation_datasets (created_time);
CREATE INDEX idx_webhooks_status ON webhooks (status);
CREATE INDEX idx_webhooks_name ON webhooks (name);
CREATE TRIGGER prevent_secrets_aad_mutation
BEFORE UPDATE ON secrets
FOR EACH ROW
WHEN OLD.secret_id != NEW.secret_id OR OLD.secret_name != NEW.secret_name
BEGIN
    SELECT RAISE(ABORT, 'secret_id and secret_name are immutable (used as AAD in encryption)');
END;
CREATE INDEX index_model_definitions_secret_id ON model_definitions (secret_id);
CREATE INDEX index_model_definitions_provider ON model_definitions (provider);
CREATE INDEX index_jobs_name_status_creation_time ON jobs (job_name, workspace, status, creation_time);
CREATE INDEX idx_experiments_workspace ON experiments (workspace);
CREATE INDEX idx_registered_models_workspace ON registered_models (workspace);
CREATE INDEX idx_experiments_workspace_creation_time ON experiments (workspace, creation_time);
CREATE INDEX idx_evaluation_datasets_workspace ON evaluation_datasets (workspace);
CREATE INDEX idx_webhooks_workspace ON webhooks (workspace);
CREATE INDEX idx_secrets_workspace ON secrets (workspace);
CREATE INDEX idx_endpoints_workspace ON endpoints (workspace);
CREATE INDEX idx_model_definitions_workspace ON model_definitions (workspace);
CREATE INDEX idx_budget_policies_workspace ON budget_policies (workspace);
CREATE INDEX index_issues_experiment_id ON issues (experiment_id);
CREATE INDEX index_issues_source_run_id ON issues (source_run_id);
CREATE INDEX index_issues_status ON issues (status);
CREATE INDEX index_metrics_run_uuid_key_step ON metrics (run_uuid, "key", step);
CREATE INDEX idx_guardrails_workspace ON guardrails (workspace);
CREATE INDEX idx_guardrails_scorer ON guardrails (scorer_id, scorer_version);
CREATE INDEX idx_guardrail_configs_endpoint_id ON guardrail_configs (endpoint_id);
CREATE INDEX idx_guardrail_configs_guardrail_id ON guardrail_configs (guardrail_id);
CREATE INDEX idx_model_version_tags_workspace_name_version ON model_version_tags (workspace, name, version);
CREATE INDEX idx_registered_model_tags_workspace_name ON registered_model_tags (workspace, name);
CREATE INDEX index_label_schemas_experiment_id ON label_schemas (experiment_id);
CREATE INDEX index_review_queues_experiment_id ON review_queues (experiment_id);
CREATE INDEX index_review_queue_users_user_id ON review_queue_users (user_id);
CREATE INDEX index_review_queue_items_queue_id_status ON review_queue_items (queue_id, status);
CREATE INDEX index_review_queue_items_item_id ON review_queue_items (item_id);
CREATE INDEX index_review_queue_label_schemas_schema_id ON review_queue_label_schemas (schema_id);
CREATE INDEX idx_mcp_server_versions_latest ON mcp_server_versions (workspace, name, status, version_major DESC, version_minor DESC, version_patch DESC);
CREATE INDEX ix_mcp_access_endpoints_server_name ON mcp_access_endpoints (workspace, server_name);
CREATE INDEX ix_mcp_access_endpoints_version ON mcp_access_endpoints (workspace, server_name, server_version);
CREATE INDEX ix_mcp_access_endpoints_alias ON mcp_access_endpoints (workspace, server_name, server_alias);
CREATE INDEX idx_budget_policies_target_value ON budget_policies (target_value);
CREATE INDEX index_trace_info_experiment_id_timestamp_ms ON trace_info (experiment_id, timestamp_ms);
CREATE INDEX index_trace_info_timestamp_ms_request_id ON trace_info (timestamp_ms, request_id);
CREATE INDEX index_assessments_assessment_type ON assessments (assessment_type);
CREATE INDEX index_assessments_run_id_created_timestamp ON assessments (run_id, created_timestamp);
CREATE INDEX index_assessments_last_updated_timestamp ON assessments (last_updated_timestamp);
CREATE INDEX index_assessments_trace_id_created_timestamp ON assessments (trace_id, created_timestamp);
CREATE INDEX index_spans_experiment_id_type_status ON spans (experiment_id, type, status);
CREATE INDEX index_spans_experiment_id_start_time ON spans (experiment_id, start_time_unix_nano);
CREATE INDEX index_spans_experiment_id_duration ON spans (experiment_id, duration_ns);
CREATE INDEX index_spans_experiment_id_status_type ON spans (experiment_id, status, type);
CREATE INDEX index_trace_info_experiment_id_session_id ON trace_info (experiment_id, session_id);
CREATE INDEX idx_trace_rollups_lookup ON sql_trace_metric_daily_rollups (experiment_id, rollup_day, metric_name, grouping_set, trace_status);
CREATE INDEX idx_span_cost_rollups_lookup ON sql_span_cost_daily_rollups (experiment_id, rollup_day, metric_name, grouping_set, model_name, model_provider);
CREATE INDEX idx_assessment_rollups_lookup ON sql_assessment_daily_rollups (experiment_id, rollup_day, metric_name, grouping_set);
CREATE INDEX idx_spans_cost_trace_time_cover ON spans (trace_id, start_time_unix_nano);
CREATE INDEX idx_spans_cost_exp_time_cover ON spans (experiment_id, start_time_unix_nano);
CREATE INDEX idx_assessments_exp_trace_ts ON assessments (experiment_id, trace_timestamp_ms);
CREATE INDEX idx_assessments_exp_trace_ts_name ON assessments (experiment_id, trace_timestamp_ms, name);
CREATE INDEX idx_assessments_exp_name_valid ON assessments (experiment_id, name, valid);
CREATE INDEX index_job_locks_job_id ON job_locks (job_id);
CREATE INDEX index_jobs_status_lease_expires_at ON jobs (status, lease_expires_at);
COMMIT;
