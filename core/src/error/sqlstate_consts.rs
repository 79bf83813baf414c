// Generated from PostgreSQL 15's errcodes.txt by the unit test
// `sqlstate_table_is_postgresqls` (run it with PGPIPE_BLESS=1); do not edit.
// The named constants: one per SQLSTATE code (and per alias).

impl SqlState {
    /// `00000` successful_completion (class 00, Successful Completion).
    pub const SUCCESSFUL_COMPLETION: SqlState = SqlState(Cow::Borrowed("00000"));
    /// `01000` warning (class 01, Warning).
    pub const WARNING: SqlState = SqlState(Cow::Borrowed("01000"));
    /// `0100C` dynamic_result_sets_returned (class 01, Warning).
    pub const DYNAMIC_RESULT_SETS_RETURNED: SqlState = SqlState(Cow::Borrowed("0100C"));
    /// `01008` implicit_zero_bit_padding (class 01, Warning).
    pub const IMPLICIT_ZERO_BIT_PADDING: SqlState = SqlState(Cow::Borrowed("01008"));
    /// `01003` null_value_eliminated_in_set_function (class 01, Warning).
    pub const NULL_VALUE_ELIMINATED_IN_SET_FUNCTION: SqlState = SqlState(Cow::Borrowed("01003"));
    /// `01007` privilege_not_granted (class 01, Warning).
    pub const PRIVILEGE_NOT_GRANTED: SqlState = SqlState(Cow::Borrowed("01007"));
    /// `01006` privilege_not_revoked (class 01, Warning).
    pub const PRIVILEGE_NOT_REVOKED: SqlState = SqlState(Cow::Borrowed("01006"));
    /// `01004` string_data_right_truncation (class 01, Warning).
    pub const WARNING_STRING_DATA_RIGHT_TRUNCATION: SqlState = SqlState(Cow::Borrowed("01004"));
    /// `01P01` deprecated_feature (class 01, Warning).
    pub const DEPRECATED_FEATURE: SqlState = SqlState(Cow::Borrowed("01P01"));
    /// `02000` no_data (class 02, No Data).
    pub const NO_DATA: SqlState = SqlState(Cow::Borrowed("02000"));
    /// `02001` no_additional_dynamic_result_sets_returned (class 02, No Data).
    pub const NO_ADDITIONAL_DYNAMIC_RESULT_SETS_RETURNED: SqlState = SqlState(Cow::Borrowed("02001"));
    /// `03000` sql_statement_not_yet_complete (class 03, SQL Statement Not Yet Complete).
    pub const SQL_STATEMENT_NOT_YET_COMPLETE: SqlState = SqlState(Cow::Borrowed("03000"));
    /// `08000` connection_exception (class 08, Connection Exception).
    pub const CONNECTION_EXCEPTION: SqlState = SqlState(Cow::Borrowed("08000"));
    /// `08003` connection_does_not_exist (class 08, Connection Exception).
    pub const CONNECTION_DOES_NOT_EXIST: SqlState = SqlState(Cow::Borrowed("08003"));
    /// `08006` connection_failure (class 08, Connection Exception).
    pub const CONNECTION_FAILURE: SqlState = SqlState(Cow::Borrowed("08006"));
    /// `08001` sqlclient_unable_to_establish_sqlconnection (class 08, Connection Exception).
    pub const SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION: SqlState = SqlState(Cow::Borrowed("08001"));
    /// `08004` sqlserver_rejected_establishment_of_sqlconnection (class 08, Connection Exception).
    pub const SQLSERVER_REJECTED_ESTABLISHMENT_OF_SQLCONNECTION: SqlState = SqlState(Cow::Borrowed("08004"));
    /// `08007` transaction_resolution_unknown (class 08, Connection Exception).
    pub const TRANSACTION_RESOLUTION_UNKNOWN: SqlState = SqlState(Cow::Borrowed("08007"));
    /// `08P01` protocol_violation (class 08, Connection Exception).
    pub const PROTOCOL_VIOLATION: SqlState = SqlState(Cow::Borrowed("08P01"));
    /// `09000` triggered_action_exception (class 09, Triggered Action Exception).
    pub const TRIGGERED_ACTION_EXCEPTION: SqlState = SqlState(Cow::Borrowed("09000"));
    /// `0A000` feature_not_supported (class 0A, Feature Not Supported).
    pub const FEATURE_NOT_SUPPORTED: SqlState = SqlState(Cow::Borrowed("0A000"));
    /// `0B000` invalid_transaction_initiation (class 0B, Invalid Transaction Initiation).
    pub const INVALID_TRANSACTION_INITIATION: SqlState = SqlState(Cow::Borrowed("0B000"));
    /// `0F000` locator_exception (class 0F, Locator Exception).
    pub const LOCATOR_EXCEPTION: SqlState = SqlState(Cow::Borrowed("0F000"));
    /// `0F001` invalid_locator_specification (class 0F, Locator Exception).
    pub const INVALID_LOCATOR_SPECIFICATION: SqlState = SqlState(Cow::Borrowed("0F001"));
    /// `0L000` invalid_grantor (class 0L, Invalid Grantor).
    pub const INVALID_GRANTOR: SqlState = SqlState(Cow::Borrowed("0L000"));
    /// `0LP01` invalid_grant_operation (class 0L, Invalid Grantor).
    pub const INVALID_GRANT_OPERATION: SqlState = SqlState(Cow::Borrowed("0LP01"));
    /// `0P000` invalid_role_specification (class 0P, Invalid Role Specification).
    pub const INVALID_ROLE_SPECIFICATION: SqlState = SqlState(Cow::Borrowed("0P000"));
    /// `0Z000` diagnostics_exception (class 0Z, Diagnostics Exception).
    pub const DIAGNOSTICS_EXCEPTION: SqlState = SqlState(Cow::Borrowed("0Z000"));
    /// `0Z002` stacked_diagnostics_accessed_without_active_handler (class 0Z, Diagnostics Exception).
    pub const STACKED_DIAGNOSTICS_ACCESSED_WITHOUT_ACTIVE_HANDLER: SqlState = SqlState(Cow::Borrowed("0Z002"));
    /// `20000` case_not_found (class 20, Case Not Found).
    pub const CASE_NOT_FOUND: SqlState = SqlState(Cow::Borrowed("20000"));
    /// `21000` cardinality_violation (class 21, Cardinality Violation).
    pub const CARDINALITY_VIOLATION: SqlState = SqlState(Cow::Borrowed("21000"));
    /// `22000` data_exception (class 22, Data Exception).
    pub const DATA_EXCEPTION: SqlState = SqlState(Cow::Borrowed("22000"));
    /// `2202E`  (class 22, Data Exception).
    pub const ARRAY_ELEMENT_ERROR: SqlState = SqlState(Cow::Borrowed("2202E"));
    /// `2202E` array_subscript_error (class 22, Data Exception).
    pub const ARRAY_SUBSCRIPT_ERROR: SqlState = SqlState(Cow::Borrowed("2202E"));
    /// `22021` character_not_in_repertoire (class 22, Data Exception).
    pub const CHARACTER_NOT_IN_REPERTOIRE: SqlState = SqlState(Cow::Borrowed("22021"));
    /// `22008` datetime_field_overflow (class 22, Data Exception).
    pub const DATETIME_FIELD_OVERFLOW: SqlState = SqlState(Cow::Borrowed("22008"));
    /// `22008` datetime_field_overflow (class 22, Data Exception).
    pub const DATETIME_VALUE_OUT_OF_RANGE: SqlState = SqlState(Cow::Borrowed("22008"));
    /// `22012` division_by_zero (class 22, Data Exception).
    pub const DIVISION_BY_ZERO: SqlState = SqlState(Cow::Borrowed("22012"));
    /// `22005` error_in_assignment (class 22, Data Exception).
    pub const ERROR_IN_ASSIGNMENT: SqlState = SqlState(Cow::Borrowed("22005"));
    /// `2200B` escape_character_conflict (class 22, Data Exception).
    pub const ESCAPE_CHARACTER_CONFLICT: SqlState = SqlState(Cow::Borrowed("2200B"));
    /// `22022` indicator_overflow (class 22, Data Exception).
    pub const INDICATOR_OVERFLOW: SqlState = SqlState(Cow::Borrowed("22022"));
    /// `22015` interval_field_overflow (class 22, Data Exception).
    pub const INTERVAL_FIELD_OVERFLOW: SqlState = SqlState(Cow::Borrowed("22015"));
    /// `2201E` invalid_argument_for_logarithm (class 22, Data Exception).
    pub const INVALID_ARGUMENT_FOR_LOGARITHM: SqlState = SqlState(Cow::Borrowed("2201E"));
    /// `22014` invalid_argument_for_ntile_function (class 22, Data Exception).
    pub const INVALID_ARGUMENT_FOR_NTILE_FUNCTION: SqlState = SqlState(Cow::Borrowed("22014"));
    /// `22016` invalid_argument_for_nth_value_function (class 22, Data Exception).
    pub const INVALID_ARGUMENT_FOR_NTH_VALUE_FUNCTION: SqlState = SqlState(Cow::Borrowed("22016"));
    /// `2201F` invalid_argument_for_power_function (class 22, Data Exception).
    pub const INVALID_ARGUMENT_FOR_POWER_FUNCTION: SqlState = SqlState(Cow::Borrowed("2201F"));
    /// `2201G` invalid_argument_for_width_bucket_function (class 22, Data Exception).
    pub const INVALID_ARGUMENT_FOR_WIDTH_BUCKET_FUNCTION: SqlState = SqlState(Cow::Borrowed("2201G"));
    /// `22018` invalid_character_value_for_cast (class 22, Data Exception).
    pub const INVALID_CHARACTER_VALUE_FOR_CAST: SqlState = SqlState(Cow::Borrowed("22018"));
    /// `22007` invalid_datetime_format (class 22, Data Exception).
    pub const INVALID_DATETIME_FORMAT: SqlState = SqlState(Cow::Borrowed("22007"));
    /// `22019` invalid_escape_character (class 22, Data Exception).
    pub const INVALID_ESCAPE_CHARACTER: SqlState = SqlState(Cow::Borrowed("22019"));
    /// `2200D` invalid_escape_octet (class 22, Data Exception).
    pub const INVALID_ESCAPE_OCTET: SqlState = SqlState(Cow::Borrowed("2200D"));
    /// `22025` invalid_escape_sequence (class 22, Data Exception).
    pub const INVALID_ESCAPE_SEQUENCE: SqlState = SqlState(Cow::Borrowed("22025"));
    /// `22P06` nonstandard_use_of_escape_character (class 22, Data Exception).
    pub const NONSTANDARD_USE_OF_ESCAPE_CHARACTER: SqlState = SqlState(Cow::Borrowed("22P06"));
    /// `22010` invalid_indicator_parameter_value (class 22, Data Exception).
    pub const INVALID_INDICATOR_PARAMETER_VALUE: SqlState = SqlState(Cow::Borrowed("22010"));
    /// `22023` invalid_parameter_value (class 22, Data Exception).
    pub const INVALID_PARAMETER_VALUE: SqlState = SqlState(Cow::Borrowed("22023"));
    /// `22013` invalid_preceding_or_following_size (class 22, Data Exception).
    pub const INVALID_PRECEDING_OR_FOLLOWING_SIZE: SqlState = SqlState(Cow::Borrowed("22013"));
    /// `2201B` invalid_regular_expression (class 22, Data Exception).
    pub const INVALID_REGULAR_EXPRESSION: SqlState = SqlState(Cow::Borrowed("2201B"));
    /// `2201W` invalid_row_count_in_limit_clause (class 22, Data Exception).
    pub const INVALID_ROW_COUNT_IN_LIMIT_CLAUSE: SqlState = SqlState(Cow::Borrowed("2201W"));
    /// `2201X` invalid_row_count_in_result_offset_clause (class 22, Data Exception).
    pub const INVALID_ROW_COUNT_IN_RESULT_OFFSET_CLAUSE: SqlState = SqlState(Cow::Borrowed("2201X"));
    /// `2202H` invalid_tablesample_argument (class 22, Data Exception).
    pub const INVALID_TABLESAMPLE_ARGUMENT: SqlState = SqlState(Cow::Borrowed("2202H"));
    /// `2202G` invalid_tablesample_repeat (class 22, Data Exception).
    pub const INVALID_TABLESAMPLE_REPEAT: SqlState = SqlState(Cow::Borrowed("2202G"));
    /// `22009` invalid_time_zone_displacement_value (class 22, Data Exception).
    pub const INVALID_TIME_ZONE_DISPLACEMENT_VALUE: SqlState = SqlState(Cow::Borrowed("22009"));
    /// `2200C` invalid_use_of_escape_character (class 22, Data Exception).
    pub const INVALID_USE_OF_ESCAPE_CHARACTER: SqlState = SqlState(Cow::Borrowed("2200C"));
    /// `2200G` most_specific_type_mismatch (class 22, Data Exception).
    pub const MOST_SPECIFIC_TYPE_MISMATCH: SqlState = SqlState(Cow::Borrowed("2200G"));
    /// `22004` null_value_not_allowed (class 22, Data Exception).
    pub const NULL_VALUE_NOT_ALLOWED: SqlState = SqlState(Cow::Borrowed("22004"));
    /// `22002` null_value_no_indicator_parameter (class 22, Data Exception).
    pub const NULL_VALUE_NO_INDICATOR_PARAMETER: SqlState = SqlState(Cow::Borrowed("22002"));
    /// `22003` numeric_value_out_of_range (class 22, Data Exception).
    pub const NUMERIC_VALUE_OUT_OF_RANGE: SqlState = SqlState(Cow::Borrowed("22003"));
    /// `2200H` sequence_generator_limit_exceeded (class 22, Data Exception).
    pub const SEQUENCE_GENERATOR_LIMIT_EXCEEDED: SqlState = SqlState(Cow::Borrowed("2200H"));
    /// `22026` string_data_length_mismatch (class 22, Data Exception).
    pub const STRING_DATA_LENGTH_MISMATCH: SqlState = SqlState(Cow::Borrowed("22026"));
    /// `22001` string_data_right_truncation (class 22, Data Exception).
    pub const STRING_DATA_RIGHT_TRUNCATION: SqlState = SqlState(Cow::Borrowed("22001"));
    /// `22011` substring_error (class 22, Data Exception).
    pub const SUBSTRING_ERROR: SqlState = SqlState(Cow::Borrowed("22011"));
    /// `22027` trim_error (class 22, Data Exception).
    pub const TRIM_ERROR: SqlState = SqlState(Cow::Borrowed("22027"));
    /// `22024` unterminated_c_string (class 22, Data Exception).
    pub const UNTERMINATED_C_STRING: SqlState = SqlState(Cow::Borrowed("22024"));
    /// `2200F` zero_length_character_string (class 22, Data Exception).
    pub const ZERO_LENGTH_CHARACTER_STRING: SqlState = SqlState(Cow::Borrowed("2200F"));
    /// `22P01` floating_point_exception (class 22, Data Exception).
    pub const FLOATING_POINT_EXCEPTION: SqlState = SqlState(Cow::Borrowed("22P01"));
    /// `22P02` invalid_text_representation (class 22, Data Exception).
    pub const INVALID_TEXT_REPRESENTATION: SqlState = SqlState(Cow::Borrowed("22P02"));
    /// `22P03` invalid_binary_representation (class 22, Data Exception).
    pub const INVALID_BINARY_REPRESENTATION: SqlState = SqlState(Cow::Borrowed("22P03"));
    /// `22P04` bad_copy_file_format (class 22, Data Exception).
    pub const BAD_COPY_FILE_FORMAT: SqlState = SqlState(Cow::Borrowed("22P04"));
    /// `22P05` untranslatable_character (class 22, Data Exception).
    pub const UNTRANSLATABLE_CHARACTER: SqlState = SqlState(Cow::Borrowed("22P05"));
    /// `2200L` not_an_xml_document (class 22, Data Exception).
    pub const NOT_AN_XML_DOCUMENT: SqlState = SqlState(Cow::Borrowed("2200L"));
    /// `2200M` invalid_xml_document (class 22, Data Exception).
    pub const INVALID_XML_DOCUMENT: SqlState = SqlState(Cow::Borrowed("2200M"));
    /// `2200N` invalid_xml_content (class 22, Data Exception).
    pub const INVALID_XML_CONTENT: SqlState = SqlState(Cow::Borrowed("2200N"));
    /// `2200S` invalid_xml_comment (class 22, Data Exception).
    pub const INVALID_XML_COMMENT: SqlState = SqlState(Cow::Borrowed("2200S"));
    /// `2200T` invalid_xml_processing_instruction (class 22, Data Exception).
    pub const INVALID_XML_PROCESSING_INSTRUCTION: SqlState = SqlState(Cow::Borrowed("2200T"));
    /// `22030` duplicate_json_object_key_value (class 22, Data Exception).
    pub const DUPLICATE_JSON_OBJECT_KEY_VALUE: SqlState = SqlState(Cow::Borrowed("22030"));
    /// `22031` invalid_argument_for_sql_json_datetime_function (class 22, Data Exception).
    pub const INVALID_ARGUMENT_FOR_SQL_JSON_DATETIME_FUNCTION: SqlState = SqlState(Cow::Borrowed("22031"));
    /// `22032` invalid_json_text (class 22, Data Exception).
    pub const INVALID_JSON_TEXT: SqlState = SqlState(Cow::Borrowed("22032"));
    /// `22033` invalid_sql_json_subscript (class 22, Data Exception).
    pub const INVALID_SQL_JSON_SUBSCRIPT: SqlState = SqlState(Cow::Borrowed("22033"));
    /// `22034` more_than_one_sql_json_item (class 22, Data Exception).
    pub const MORE_THAN_ONE_SQL_JSON_ITEM: SqlState = SqlState(Cow::Borrowed("22034"));
    /// `22035` no_sql_json_item (class 22, Data Exception).
    pub const NO_SQL_JSON_ITEM: SqlState = SqlState(Cow::Borrowed("22035"));
    /// `22036` non_numeric_sql_json_item (class 22, Data Exception).
    pub const NON_NUMERIC_SQL_JSON_ITEM: SqlState = SqlState(Cow::Borrowed("22036"));
    /// `22037` non_unique_keys_in_a_json_object (class 22, Data Exception).
    pub const NON_UNIQUE_KEYS_IN_A_JSON_OBJECT: SqlState = SqlState(Cow::Borrowed("22037"));
    /// `22038` singleton_sql_json_item_required (class 22, Data Exception).
    pub const SINGLETON_SQL_JSON_ITEM_REQUIRED: SqlState = SqlState(Cow::Borrowed("22038"));
    /// `22039` sql_json_array_not_found (class 22, Data Exception).
    pub const SQL_JSON_ARRAY_NOT_FOUND: SqlState = SqlState(Cow::Borrowed("22039"));
    /// `2203A` sql_json_member_not_found (class 22, Data Exception).
    pub const SQL_JSON_MEMBER_NOT_FOUND: SqlState = SqlState(Cow::Borrowed("2203A"));
    /// `2203B` sql_json_number_not_found (class 22, Data Exception).
    pub const SQL_JSON_NUMBER_NOT_FOUND: SqlState = SqlState(Cow::Borrowed("2203B"));
    /// `2203C` sql_json_object_not_found (class 22, Data Exception).
    pub const SQL_JSON_OBJECT_NOT_FOUND: SqlState = SqlState(Cow::Borrowed("2203C"));
    /// `2203D` too_many_json_array_elements (class 22, Data Exception).
    pub const TOO_MANY_JSON_ARRAY_ELEMENTS: SqlState = SqlState(Cow::Borrowed("2203D"));
    /// `2203E` too_many_json_object_members (class 22, Data Exception).
    pub const TOO_MANY_JSON_OBJECT_MEMBERS: SqlState = SqlState(Cow::Borrowed("2203E"));
    /// `2203F` sql_json_scalar_required (class 22, Data Exception).
    pub const SQL_JSON_SCALAR_REQUIRED: SqlState = SqlState(Cow::Borrowed("2203F"));
    /// `2203G` sql_json_item_cannot_be_cast_to_target_type (class 22, Data Exception).
    pub const SQL_JSON_ITEM_CANNOT_BE_CAST_TO_TARGET_TYPE: SqlState = SqlState(Cow::Borrowed("2203G"));
    /// `23000` integrity_constraint_violation (class 23, Integrity Constraint Violation).
    pub const INTEGRITY_CONSTRAINT_VIOLATION: SqlState = SqlState(Cow::Borrowed("23000"));
    /// `23001` restrict_violation (class 23, Integrity Constraint Violation).
    pub const RESTRICT_VIOLATION: SqlState = SqlState(Cow::Borrowed("23001"));
    /// `23502` not_null_violation (class 23, Integrity Constraint Violation).
    pub const NOT_NULL_VIOLATION: SqlState = SqlState(Cow::Borrowed("23502"));
    /// `23503` foreign_key_violation (class 23, Integrity Constraint Violation).
    pub const FOREIGN_KEY_VIOLATION: SqlState = SqlState(Cow::Borrowed("23503"));
    /// `23505` unique_violation (class 23, Integrity Constraint Violation).
    pub const UNIQUE_VIOLATION: SqlState = SqlState(Cow::Borrowed("23505"));
    /// `23514` check_violation (class 23, Integrity Constraint Violation).
    pub const CHECK_VIOLATION: SqlState = SqlState(Cow::Borrowed("23514"));
    /// `23P01` exclusion_violation (class 23, Integrity Constraint Violation).
    pub const EXCLUSION_VIOLATION: SqlState = SqlState(Cow::Borrowed("23P01"));
    /// `24000` invalid_cursor_state (class 24, Invalid Cursor State).
    pub const INVALID_CURSOR_STATE: SqlState = SqlState(Cow::Borrowed("24000"));
    /// `25000` invalid_transaction_state (class 25, Invalid Transaction State).
    pub const INVALID_TRANSACTION_STATE: SqlState = SqlState(Cow::Borrowed("25000"));
    /// `25001` active_sql_transaction (class 25, Invalid Transaction State).
    pub const ACTIVE_SQL_TRANSACTION: SqlState = SqlState(Cow::Borrowed("25001"));
    /// `25002` branch_transaction_already_active (class 25, Invalid Transaction State).
    pub const BRANCH_TRANSACTION_ALREADY_ACTIVE: SqlState = SqlState(Cow::Borrowed("25002"));
    /// `25008` held_cursor_requires_same_isolation_level (class 25, Invalid Transaction State).
    pub const HELD_CURSOR_REQUIRES_SAME_ISOLATION_LEVEL: SqlState = SqlState(Cow::Borrowed("25008"));
    /// `25003` inappropriate_access_mode_for_branch_transaction (class 25, Invalid Transaction State).
    pub const INAPPROPRIATE_ACCESS_MODE_FOR_BRANCH_TRANSACTION: SqlState = SqlState(Cow::Borrowed("25003"));
    /// `25004` inappropriate_isolation_level_for_branch_transaction (class 25, Invalid Transaction State).
    pub const INAPPROPRIATE_ISOLATION_LEVEL_FOR_BRANCH_TRANSACTION: SqlState = SqlState(Cow::Borrowed("25004"));
    /// `25005` no_active_sql_transaction_for_branch_transaction (class 25, Invalid Transaction State).
    pub const NO_ACTIVE_SQL_TRANSACTION_FOR_BRANCH_TRANSACTION: SqlState = SqlState(Cow::Borrowed("25005"));
    /// `25006` read_only_sql_transaction (class 25, Invalid Transaction State).
    pub const READ_ONLY_SQL_TRANSACTION: SqlState = SqlState(Cow::Borrowed("25006"));
    /// `25007` schema_and_data_statement_mixing_not_supported (class 25, Invalid Transaction State).
    pub const SCHEMA_AND_DATA_STATEMENT_MIXING_NOT_SUPPORTED: SqlState = SqlState(Cow::Borrowed("25007"));
    /// `25P01` no_active_sql_transaction (class 25, Invalid Transaction State).
    pub const NO_ACTIVE_SQL_TRANSACTION: SqlState = SqlState(Cow::Borrowed("25P01"));
    /// `25P02` in_failed_sql_transaction (class 25, Invalid Transaction State).
    pub const IN_FAILED_SQL_TRANSACTION: SqlState = SqlState(Cow::Borrowed("25P02"));
    /// `25P03` idle_in_transaction_session_timeout (class 25, Invalid Transaction State).
    pub const IDLE_IN_TRANSACTION_SESSION_TIMEOUT: SqlState = SqlState(Cow::Borrowed("25P03"));
    /// `26000` invalid_sql_statement_name (class 26, Invalid SQL Statement Name).
    pub const INVALID_SQL_STATEMENT_NAME: SqlState = SqlState(Cow::Borrowed("26000"));
    /// `27000` triggered_data_change_violation (class 27, Triggered Data Change Violation).
    pub const TRIGGERED_DATA_CHANGE_VIOLATION: SqlState = SqlState(Cow::Borrowed("27000"));
    /// `28000` invalid_authorization_specification (class 28, Invalid Authorization Specification).
    pub const INVALID_AUTHORIZATION_SPECIFICATION: SqlState = SqlState(Cow::Borrowed("28000"));
    /// `28P01` invalid_password (class 28, Invalid Authorization Specification).
    pub const INVALID_PASSWORD: SqlState = SqlState(Cow::Borrowed("28P01"));
    /// `2B000` dependent_privilege_descriptors_still_exist (class 2B, Dependent Privilege Descriptors Still Exist).
    pub const DEPENDENT_PRIVILEGE_DESCRIPTORS_STILL_EXIST: SqlState = SqlState(Cow::Borrowed("2B000"));
    /// `2BP01` dependent_objects_still_exist (class 2B, Dependent Privilege Descriptors Still Exist).
    pub const DEPENDENT_OBJECTS_STILL_EXIST: SqlState = SqlState(Cow::Borrowed("2BP01"));
    /// `2D000` invalid_transaction_termination (class 2D, Invalid Transaction Termination).
    pub const INVALID_TRANSACTION_TERMINATION: SqlState = SqlState(Cow::Borrowed("2D000"));
    /// `2F000` sql_routine_exception (class 2F, SQL Routine Exception).
    pub const SQL_ROUTINE_EXCEPTION: SqlState = SqlState(Cow::Borrowed("2F000"));
    /// `2F005` function_executed_no_return_statement (class 2F, SQL Routine Exception).
    pub const FUNCTION_EXECUTED_NO_RETURN_STATEMENT: SqlState = SqlState(Cow::Borrowed("2F005"));
    /// `2F002` modifying_sql_data_not_permitted (class 2F, SQL Routine Exception).
    pub const S_R_E_MODIFYING_SQL_DATA_NOT_PERMITTED: SqlState = SqlState(Cow::Borrowed("2F002"));
    /// `2F003` prohibited_sql_statement_attempted (class 2F, SQL Routine Exception).
    pub const S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED: SqlState = SqlState(Cow::Borrowed("2F003"));
    /// `2F004` reading_sql_data_not_permitted (class 2F, SQL Routine Exception).
    pub const S_R_E_READING_SQL_DATA_NOT_PERMITTED: SqlState = SqlState(Cow::Borrowed("2F004"));
    /// `34000` invalid_cursor_name (class 34, Invalid Cursor Name).
    pub const INVALID_CURSOR_NAME: SqlState = SqlState(Cow::Borrowed("34000"));
    /// `38000` external_routine_exception (class 38, External Routine Exception).
    pub const EXTERNAL_ROUTINE_EXCEPTION: SqlState = SqlState(Cow::Borrowed("38000"));
    /// `38001` containing_sql_not_permitted (class 38, External Routine Exception).
    pub const CONTAINING_SQL_NOT_PERMITTED: SqlState = SqlState(Cow::Borrowed("38001"));
    /// `38002` modifying_sql_data_not_permitted (class 38, External Routine Exception).
    pub const E_R_E_MODIFYING_SQL_DATA_NOT_PERMITTED: SqlState = SqlState(Cow::Borrowed("38002"));
    /// `38003` prohibited_sql_statement_attempted (class 38, External Routine Exception).
    pub const E_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED: SqlState = SqlState(Cow::Borrowed("38003"));
    /// `38004` reading_sql_data_not_permitted (class 38, External Routine Exception).
    pub const E_R_E_READING_SQL_DATA_NOT_PERMITTED: SqlState = SqlState(Cow::Borrowed("38004"));
    /// `39000` external_routine_invocation_exception (class 39, External Routine Invocation Exception).
    pub const EXTERNAL_ROUTINE_INVOCATION_EXCEPTION: SqlState = SqlState(Cow::Borrowed("39000"));
    /// `39001` invalid_sqlstate_returned (class 39, External Routine Invocation Exception).
    pub const INVALID_SQLSTATE_RETURNED: SqlState = SqlState(Cow::Borrowed("39001"));
    /// `39004` null_value_not_allowed (class 39, External Routine Invocation Exception).
    pub const E_R_I_E_NULL_VALUE_NOT_ALLOWED: SqlState = SqlState(Cow::Borrowed("39004"));
    /// `39P01` trigger_protocol_violated (class 39, External Routine Invocation Exception).
    pub const TRIGGER_PROTOCOL_VIOLATED: SqlState = SqlState(Cow::Borrowed("39P01"));
    /// `39P02` srf_protocol_violated (class 39, External Routine Invocation Exception).
    pub const SRF_PROTOCOL_VIOLATED: SqlState = SqlState(Cow::Borrowed("39P02"));
    /// `39P03` event_trigger_protocol_violated (class 39, External Routine Invocation Exception).
    pub const EVENT_TRIGGER_PROTOCOL_VIOLATED: SqlState = SqlState(Cow::Borrowed("39P03"));
    /// `3B000` savepoint_exception (class 3B, Savepoint Exception).
    pub const SAVEPOINT_EXCEPTION: SqlState = SqlState(Cow::Borrowed("3B000"));
    /// `3B001` invalid_savepoint_specification (class 3B, Savepoint Exception).
    pub const INVALID_SAVEPOINT_SPECIFICATION: SqlState = SqlState(Cow::Borrowed("3B001"));
    /// `3D000` invalid_catalog_name (class 3D, Invalid Catalog Name).
    pub const INVALID_CATALOG_NAME: SqlState = SqlState(Cow::Borrowed("3D000"));
    /// `3F000` invalid_schema_name (class 3F, Invalid Schema Name).
    pub const INVALID_SCHEMA_NAME: SqlState = SqlState(Cow::Borrowed("3F000"));
    /// `40000` transaction_rollback (class 40, Transaction Rollback).
    pub const TRANSACTION_ROLLBACK: SqlState = SqlState(Cow::Borrowed("40000"));
    /// `40002` transaction_integrity_constraint_violation (class 40, Transaction Rollback).
    pub const TRANSACTION_INTEGRITY_CONSTRAINT_VIOLATION: SqlState = SqlState(Cow::Borrowed("40002"));
    /// `40001` serialization_failure (class 40, Transaction Rollback).
    pub const SERIALIZATION_FAILURE: SqlState = SqlState(Cow::Borrowed("40001"));
    /// `40003` statement_completion_unknown (class 40, Transaction Rollback).
    pub const STATEMENT_COMPLETION_UNKNOWN: SqlState = SqlState(Cow::Borrowed("40003"));
    /// `40P01` deadlock_detected (class 40, Transaction Rollback).
    pub const DEADLOCK_DETECTED: SqlState = SqlState(Cow::Borrowed("40P01"));
    /// `42000` syntax_error_or_access_rule_violation (class 42, Syntax Error or Access Rule Violation).
    pub const SYNTAX_ERROR_OR_ACCESS_RULE_VIOLATION: SqlState = SqlState(Cow::Borrowed("42000"));
    /// `42601` syntax_error (class 42, Syntax Error or Access Rule Violation).
    pub const SYNTAX_ERROR: SqlState = SqlState(Cow::Borrowed("42601"));
    /// `42501` insufficient_privilege (class 42, Syntax Error or Access Rule Violation).
    pub const INSUFFICIENT_PRIVILEGE: SqlState = SqlState(Cow::Borrowed("42501"));
    /// `42846` cannot_coerce (class 42, Syntax Error or Access Rule Violation).
    pub const CANNOT_COERCE: SqlState = SqlState(Cow::Borrowed("42846"));
    /// `42803` grouping_error (class 42, Syntax Error or Access Rule Violation).
    pub const GROUPING_ERROR: SqlState = SqlState(Cow::Borrowed("42803"));
    /// `42P20` windowing_error (class 42, Syntax Error or Access Rule Violation).
    pub const WINDOWING_ERROR: SqlState = SqlState(Cow::Borrowed("42P20"));
    /// `42P19` invalid_recursion (class 42, Syntax Error or Access Rule Violation).
    pub const INVALID_RECURSION: SqlState = SqlState(Cow::Borrowed("42P19"));
    /// `42830` invalid_foreign_key (class 42, Syntax Error or Access Rule Violation).
    pub const INVALID_FOREIGN_KEY: SqlState = SqlState(Cow::Borrowed("42830"));
    /// `42602` invalid_name (class 42, Syntax Error or Access Rule Violation).
    pub const INVALID_NAME: SqlState = SqlState(Cow::Borrowed("42602"));
    /// `42622` name_too_long (class 42, Syntax Error or Access Rule Violation).
    pub const NAME_TOO_LONG: SqlState = SqlState(Cow::Borrowed("42622"));
    /// `42939` reserved_name (class 42, Syntax Error or Access Rule Violation).
    pub const RESERVED_NAME: SqlState = SqlState(Cow::Borrowed("42939"));
    /// `42804` datatype_mismatch (class 42, Syntax Error or Access Rule Violation).
    pub const DATATYPE_MISMATCH: SqlState = SqlState(Cow::Borrowed("42804"));
    /// `42P18` indeterminate_datatype (class 42, Syntax Error or Access Rule Violation).
    pub const INDETERMINATE_DATATYPE: SqlState = SqlState(Cow::Borrowed("42P18"));
    /// `42P21` collation_mismatch (class 42, Syntax Error or Access Rule Violation).
    pub const COLLATION_MISMATCH: SqlState = SqlState(Cow::Borrowed("42P21"));
    /// `42P22` indeterminate_collation (class 42, Syntax Error or Access Rule Violation).
    pub const INDETERMINATE_COLLATION: SqlState = SqlState(Cow::Borrowed("42P22"));
    /// `42809` wrong_object_type (class 42, Syntax Error or Access Rule Violation).
    pub const WRONG_OBJECT_TYPE: SqlState = SqlState(Cow::Borrowed("42809"));
    /// `428C9` generated_always (class 42, Syntax Error or Access Rule Violation).
    pub const GENERATED_ALWAYS: SqlState = SqlState(Cow::Borrowed("428C9"));
    /// `42703` undefined_column (class 42, Syntax Error or Access Rule Violation).
    pub const UNDEFINED_COLUMN: SqlState = SqlState(Cow::Borrowed("42703"));
    /// `34000` invalid_cursor_name (class 34, Invalid Cursor Name).
    pub const UNDEFINED_CURSOR: SqlState = SqlState(Cow::Borrowed("34000"));
    /// `3D000` invalid_catalog_name (class 3D, Invalid Catalog Name).
    pub const UNDEFINED_DATABASE: SqlState = SqlState(Cow::Borrowed("3D000"));
    /// `42883` undefined_function (class 42, Syntax Error or Access Rule Violation).
    pub const UNDEFINED_FUNCTION: SqlState = SqlState(Cow::Borrowed("42883"));
    /// `26000` invalid_sql_statement_name (class 26, Invalid SQL Statement Name).
    pub const UNDEFINED_PSTATEMENT: SqlState = SqlState(Cow::Borrowed("26000"));
    /// `3F000` invalid_schema_name (class 3F, Invalid Schema Name).
    pub const UNDEFINED_SCHEMA: SqlState = SqlState(Cow::Borrowed("3F000"));
    /// `42P01` undefined_table (class 42, Syntax Error or Access Rule Violation).
    pub const UNDEFINED_TABLE: SqlState = SqlState(Cow::Borrowed("42P01"));
    /// `42P02` undefined_parameter (class 42, Syntax Error or Access Rule Violation).
    pub const UNDEFINED_PARAMETER: SqlState = SqlState(Cow::Borrowed("42P02"));
    /// `42704` undefined_object (class 42, Syntax Error or Access Rule Violation).
    pub const UNDEFINED_OBJECT: SqlState = SqlState(Cow::Borrowed("42704"));
    /// `42701` duplicate_column (class 42, Syntax Error or Access Rule Violation).
    pub const DUPLICATE_COLUMN: SqlState = SqlState(Cow::Borrowed("42701"));
    /// `42P03` duplicate_cursor (class 42, Syntax Error or Access Rule Violation).
    pub const DUPLICATE_CURSOR: SqlState = SqlState(Cow::Borrowed("42P03"));
    /// `42P04` duplicate_database (class 42, Syntax Error or Access Rule Violation).
    pub const DUPLICATE_DATABASE: SqlState = SqlState(Cow::Borrowed("42P04"));
    /// `42723` duplicate_function (class 42, Syntax Error or Access Rule Violation).
    pub const DUPLICATE_FUNCTION: SqlState = SqlState(Cow::Borrowed("42723"));
    /// `42P05` duplicate_prepared_statement (class 42, Syntax Error or Access Rule Violation).
    pub const DUPLICATE_PREPARED_STATEMENT: SqlState = SqlState(Cow::Borrowed("42P05"));
    /// `42P06` duplicate_schema (class 42, Syntax Error or Access Rule Violation).
    pub const DUPLICATE_SCHEMA: SqlState = SqlState(Cow::Borrowed("42P06"));
    /// `42P07` duplicate_table (class 42, Syntax Error or Access Rule Violation).
    pub const DUPLICATE_TABLE: SqlState = SqlState(Cow::Borrowed("42P07"));
    /// `42712` duplicate_alias (class 42, Syntax Error or Access Rule Violation).
    pub const DUPLICATE_ALIAS: SqlState = SqlState(Cow::Borrowed("42712"));
    /// `42710` duplicate_object (class 42, Syntax Error or Access Rule Violation).
    pub const DUPLICATE_OBJECT: SqlState = SqlState(Cow::Borrowed("42710"));
    /// `42702` ambiguous_column (class 42, Syntax Error or Access Rule Violation).
    pub const AMBIGUOUS_COLUMN: SqlState = SqlState(Cow::Borrowed("42702"));
    /// `42725` ambiguous_function (class 42, Syntax Error or Access Rule Violation).
    pub const AMBIGUOUS_FUNCTION: SqlState = SqlState(Cow::Borrowed("42725"));
    /// `42P08` ambiguous_parameter (class 42, Syntax Error or Access Rule Violation).
    pub const AMBIGUOUS_PARAMETER: SqlState = SqlState(Cow::Borrowed("42P08"));
    /// `42P09` ambiguous_alias (class 42, Syntax Error or Access Rule Violation).
    pub const AMBIGUOUS_ALIAS: SqlState = SqlState(Cow::Borrowed("42P09"));
    /// `42P10` invalid_column_reference (class 42, Syntax Error or Access Rule Violation).
    pub const INVALID_COLUMN_REFERENCE: SqlState = SqlState(Cow::Borrowed("42P10"));
    /// `42611` invalid_column_definition (class 42, Syntax Error or Access Rule Violation).
    pub const INVALID_COLUMN_DEFINITION: SqlState = SqlState(Cow::Borrowed("42611"));
    /// `42P11` invalid_cursor_definition (class 42, Syntax Error or Access Rule Violation).
    pub const INVALID_CURSOR_DEFINITION: SqlState = SqlState(Cow::Borrowed("42P11"));
    /// `42P12` invalid_database_definition (class 42, Syntax Error or Access Rule Violation).
    pub const INVALID_DATABASE_DEFINITION: SqlState = SqlState(Cow::Borrowed("42P12"));
    /// `42P13` invalid_function_definition (class 42, Syntax Error or Access Rule Violation).
    pub const INVALID_FUNCTION_DEFINITION: SqlState = SqlState(Cow::Borrowed("42P13"));
    /// `42P14` invalid_prepared_statement_definition (class 42, Syntax Error or Access Rule Violation).
    pub const INVALID_PREPARED_STATEMENT_DEFINITION: SqlState = SqlState(Cow::Borrowed("42P14"));
    /// `42P15` invalid_schema_definition (class 42, Syntax Error or Access Rule Violation).
    pub const INVALID_SCHEMA_DEFINITION: SqlState = SqlState(Cow::Borrowed("42P15"));
    /// `42P16` invalid_table_definition (class 42, Syntax Error or Access Rule Violation).
    pub const INVALID_TABLE_DEFINITION: SqlState = SqlState(Cow::Borrowed("42P16"));
    /// `42P17` invalid_object_definition (class 42, Syntax Error or Access Rule Violation).
    pub const INVALID_OBJECT_DEFINITION: SqlState = SqlState(Cow::Borrowed("42P17"));
    /// `44000` with_check_option_violation (class 44, WITH CHECK OPTION Violation).
    pub const WITH_CHECK_OPTION_VIOLATION: SqlState = SqlState(Cow::Borrowed("44000"));
    /// `53000` insufficient_resources (class 53, Insufficient Resources).
    pub const INSUFFICIENT_RESOURCES: SqlState = SqlState(Cow::Borrowed("53000"));
    /// `53100` disk_full (class 53, Insufficient Resources).
    pub const DISK_FULL: SqlState = SqlState(Cow::Borrowed("53100"));
    /// `53200` out_of_memory (class 53, Insufficient Resources).
    pub const OUT_OF_MEMORY: SqlState = SqlState(Cow::Borrowed("53200"));
    /// `53300` too_many_connections (class 53, Insufficient Resources).
    pub const TOO_MANY_CONNECTIONS: SqlState = SqlState(Cow::Borrowed("53300"));
    /// `53400` configuration_limit_exceeded (class 53, Insufficient Resources).
    pub const CONFIGURATION_LIMIT_EXCEEDED: SqlState = SqlState(Cow::Borrowed("53400"));
    /// `54000` program_limit_exceeded (class 54, Program Limit Exceeded).
    pub const PROGRAM_LIMIT_EXCEEDED: SqlState = SqlState(Cow::Borrowed("54000"));
    /// `54001` statement_too_complex (class 54, Program Limit Exceeded).
    pub const STATEMENT_TOO_COMPLEX: SqlState = SqlState(Cow::Borrowed("54001"));
    /// `54011` too_many_columns (class 54, Program Limit Exceeded).
    pub const TOO_MANY_COLUMNS: SqlState = SqlState(Cow::Borrowed("54011"));
    /// `54023` too_many_arguments (class 54, Program Limit Exceeded).
    pub const TOO_MANY_ARGUMENTS: SqlState = SqlState(Cow::Borrowed("54023"));
    /// `55000` object_not_in_prerequisite_state (class 55, Object Not In Prerequisite State).
    pub const OBJECT_NOT_IN_PREREQUISITE_STATE: SqlState = SqlState(Cow::Borrowed("55000"));
    /// `55006` object_in_use (class 55, Object Not In Prerequisite State).
    pub const OBJECT_IN_USE: SqlState = SqlState(Cow::Borrowed("55006"));
    /// `55P02` cant_change_runtime_param (class 55, Object Not In Prerequisite State).
    pub const CANT_CHANGE_RUNTIME_PARAM: SqlState = SqlState(Cow::Borrowed("55P02"));
    /// `55P03` lock_not_available (class 55, Object Not In Prerequisite State).
    pub const LOCK_NOT_AVAILABLE: SqlState = SqlState(Cow::Borrowed("55P03"));
    /// `55P04` unsafe_new_enum_value_usage (class 55, Object Not In Prerequisite State).
    pub const UNSAFE_NEW_ENUM_VALUE_USAGE: SqlState = SqlState(Cow::Borrowed("55P04"));
    /// `57000` operator_intervention (class 57, Operator Intervention).
    pub const OPERATOR_INTERVENTION: SqlState = SqlState(Cow::Borrowed("57000"));
    /// `57014` query_canceled (class 57, Operator Intervention).
    pub const QUERY_CANCELED: SqlState = SqlState(Cow::Borrowed("57014"));
    /// `57P01` admin_shutdown (class 57, Operator Intervention).
    pub const ADMIN_SHUTDOWN: SqlState = SqlState(Cow::Borrowed("57P01"));
    /// `57P02` crash_shutdown (class 57, Operator Intervention).
    pub const CRASH_SHUTDOWN: SqlState = SqlState(Cow::Borrowed("57P02"));
    /// `57P03` cannot_connect_now (class 57, Operator Intervention).
    pub const CANNOT_CONNECT_NOW: SqlState = SqlState(Cow::Borrowed("57P03"));
    /// `57P04` database_dropped (class 57, Operator Intervention).
    pub const DATABASE_DROPPED: SqlState = SqlState(Cow::Borrowed("57P04"));
    /// `57P05` idle_session_timeout (class 57, Operator Intervention).
    pub const IDLE_SESSION_TIMEOUT: SqlState = SqlState(Cow::Borrowed("57P05"));
    /// `58000` system_error (class 58, System Error).
    pub const SYSTEM_ERROR: SqlState = SqlState(Cow::Borrowed("58000"));
    /// `58030` io_error (class 58, System Error).
    pub const IO_ERROR: SqlState = SqlState(Cow::Borrowed("58030"));
    /// `58P01` undefined_file (class 58, System Error).
    pub const UNDEFINED_FILE: SqlState = SqlState(Cow::Borrowed("58P01"));
    /// `58P02` duplicate_file (class 58, System Error).
    pub const DUPLICATE_FILE: SqlState = SqlState(Cow::Borrowed("58P02"));
    /// `72000` snapshot_too_old (class 72, Snapshot Failure).
    pub const SNAPSHOT_TOO_OLD: SqlState = SqlState(Cow::Borrowed("72000"));
    /// `F0000` config_file_error (class F0, Configuration File Error).
    pub const CONFIG_FILE_ERROR: SqlState = SqlState(Cow::Borrowed("F0000"));
    /// `F0001` lock_file_exists (class F0, Configuration File Error).
    pub const LOCK_FILE_EXISTS: SqlState = SqlState(Cow::Borrowed("F0001"));
    /// `HV000` fdw_error (class HV, Foreign Data Wrapper Error).
    pub const FDW_ERROR: SqlState = SqlState(Cow::Borrowed("HV000"));
    /// `HV005` fdw_column_name_not_found (class HV, Foreign Data Wrapper Error).
    pub const FDW_COLUMN_NAME_NOT_FOUND: SqlState = SqlState(Cow::Borrowed("HV005"));
    /// `HV002` fdw_dynamic_parameter_value_needed (class HV, Foreign Data Wrapper Error).
    pub const FDW_DYNAMIC_PARAMETER_VALUE_NEEDED: SqlState = SqlState(Cow::Borrowed("HV002"));
    /// `HV010` fdw_function_sequence_error (class HV, Foreign Data Wrapper Error).
    pub const FDW_FUNCTION_SEQUENCE_ERROR: SqlState = SqlState(Cow::Borrowed("HV010"));
    /// `HV021` fdw_inconsistent_descriptor_information (class HV, Foreign Data Wrapper Error).
    pub const FDW_INCONSISTENT_DESCRIPTOR_INFORMATION: SqlState = SqlState(Cow::Borrowed("HV021"));
    /// `HV024` fdw_invalid_attribute_value (class HV, Foreign Data Wrapper Error).
    pub const FDW_INVALID_ATTRIBUTE_VALUE: SqlState = SqlState(Cow::Borrowed("HV024"));
    /// `HV007` fdw_invalid_column_name (class HV, Foreign Data Wrapper Error).
    pub const FDW_INVALID_COLUMN_NAME: SqlState = SqlState(Cow::Borrowed("HV007"));
    /// `HV008` fdw_invalid_column_number (class HV, Foreign Data Wrapper Error).
    pub const FDW_INVALID_COLUMN_NUMBER: SqlState = SqlState(Cow::Borrowed("HV008"));
    /// `HV004` fdw_invalid_data_type (class HV, Foreign Data Wrapper Error).
    pub const FDW_INVALID_DATA_TYPE: SqlState = SqlState(Cow::Borrowed("HV004"));
    /// `HV006` fdw_invalid_data_type_descriptors (class HV, Foreign Data Wrapper Error).
    pub const FDW_INVALID_DATA_TYPE_DESCRIPTORS: SqlState = SqlState(Cow::Borrowed("HV006"));
    /// `HV091` fdw_invalid_descriptor_field_identifier (class HV, Foreign Data Wrapper Error).
    pub const FDW_INVALID_DESCRIPTOR_FIELD_IDENTIFIER: SqlState = SqlState(Cow::Borrowed("HV091"));
    /// `HV00B` fdw_invalid_handle (class HV, Foreign Data Wrapper Error).
    pub const FDW_INVALID_HANDLE: SqlState = SqlState(Cow::Borrowed("HV00B"));
    /// `HV00C` fdw_invalid_option_index (class HV, Foreign Data Wrapper Error).
    pub const FDW_INVALID_OPTION_INDEX: SqlState = SqlState(Cow::Borrowed("HV00C"));
    /// `HV00D` fdw_invalid_option_name (class HV, Foreign Data Wrapper Error).
    pub const FDW_INVALID_OPTION_NAME: SqlState = SqlState(Cow::Borrowed("HV00D"));
    /// `HV090` fdw_invalid_string_length_or_buffer_length (class HV, Foreign Data Wrapper Error).
    pub const FDW_INVALID_STRING_LENGTH_OR_BUFFER_LENGTH: SqlState = SqlState(Cow::Borrowed("HV090"));
    /// `HV00A` fdw_invalid_string_format (class HV, Foreign Data Wrapper Error).
    pub const FDW_INVALID_STRING_FORMAT: SqlState = SqlState(Cow::Borrowed("HV00A"));
    /// `HV009` fdw_invalid_use_of_null_pointer (class HV, Foreign Data Wrapper Error).
    pub const FDW_INVALID_USE_OF_NULL_POINTER: SqlState = SqlState(Cow::Borrowed("HV009"));
    /// `HV014` fdw_too_many_handles (class HV, Foreign Data Wrapper Error).
    pub const FDW_TOO_MANY_HANDLES: SqlState = SqlState(Cow::Borrowed("HV014"));
    /// `HV001` fdw_out_of_memory (class HV, Foreign Data Wrapper Error).
    pub const FDW_OUT_OF_MEMORY: SqlState = SqlState(Cow::Borrowed("HV001"));
    /// `HV00P` fdw_no_schemas (class HV, Foreign Data Wrapper Error).
    pub const FDW_NO_SCHEMAS: SqlState = SqlState(Cow::Borrowed("HV00P"));
    /// `HV00J` fdw_option_name_not_found (class HV, Foreign Data Wrapper Error).
    pub const FDW_OPTION_NAME_NOT_FOUND: SqlState = SqlState(Cow::Borrowed("HV00J"));
    /// `HV00K` fdw_reply_handle (class HV, Foreign Data Wrapper Error).
    pub const FDW_REPLY_HANDLE: SqlState = SqlState(Cow::Borrowed("HV00K"));
    /// `HV00Q` fdw_schema_not_found (class HV, Foreign Data Wrapper Error).
    pub const FDW_SCHEMA_NOT_FOUND: SqlState = SqlState(Cow::Borrowed("HV00Q"));
    /// `HV00R` fdw_table_not_found (class HV, Foreign Data Wrapper Error).
    pub const FDW_TABLE_NOT_FOUND: SqlState = SqlState(Cow::Borrowed("HV00R"));
    /// `HV00L` fdw_unable_to_create_execution (class HV, Foreign Data Wrapper Error).
    pub const FDW_UNABLE_TO_CREATE_EXECUTION: SqlState = SqlState(Cow::Borrowed("HV00L"));
    /// `HV00M` fdw_unable_to_create_reply (class HV, Foreign Data Wrapper Error).
    pub const FDW_UNABLE_TO_CREATE_REPLY: SqlState = SqlState(Cow::Borrowed("HV00M"));
    /// `HV00N` fdw_unable_to_establish_connection (class HV, Foreign Data Wrapper Error).
    pub const FDW_UNABLE_TO_ESTABLISH_CONNECTION: SqlState = SqlState(Cow::Borrowed("HV00N"));
    /// `P0000` plpgsql_error (class P0, PL/pgSQL Error).
    pub const PLPGSQL_ERROR: SqlState = SqlState(Cow::Borrowed("P0000"));
    /// `P0001` raise_exception (class P0, PL/pgSQL Error).
    pub const RAISE_EXCEPTION: SqlState = SqlState(Cow::Borrowed("P0001"));
    /// `P0002` no_data_found (class P0, PL/pgSQL Error).
    pub const NO_DATA_FOUND: SqlState = SqlState(Cow::Borrowed("P0002"));
    /// `P0003` too_many_rows (class P0, PL/pgSQL Error).
    pub const TOO_MANY_ROWS: SqlState = SqlState(Cow::Borrowed("P0003"));
    /// `P0004` assert_failure (class P0, PL/pgSQL Error).
    pub const ASSERT_FAILURE: SqlState = SqlState(Cow::Borrowed("P0004"));
    /// `XX000` internal_error (class XX, Internal Error).
    pub const INTERNAL_ERROR: SqlState = SqlState(Cow::Borrowed("XX000"));
    /// `XX001` data_corrupted (class XX, Internal Error).
    pub const DATA_CORRUPTED: SqlState = SqlState(Cow::Borrowed("XX001"));
    /// `XX002` index_corrupted (class XX, Internal Error).
    pub const INDEX_CORRUPTED: SqlState = SqlState(Cow::Borrowed("XX002"));
}
