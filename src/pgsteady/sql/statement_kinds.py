"""Statement kinds in plain SQL words (``CREATE VIEW``), never parser node names (``View``).

Messages, ``--plan`` and lint show these; a node type missing here still gets words made
from its name (``AlterDomainStmt`` -> ``ALTER DOMAIN``), never the node name itself.
"""

from __future__ import annotations

import re
from typing import Any

from pglast import enums

_AT = enums.AlterTableType

# Node types whose name does not spell the SQL (or is ambiguous without the node's fields).
_WORDS: dict[str, str] = {
    "AlterDatabaseRefreshCollStmt": "ALTER DATABASE ... REFRESH COLLATION VERSION",
    "AlterDatabaseSetStmt": "ALTER DATABASE ... SET",
    "AlterDefaultPrivilegesStmt": "ALTER DEFAULT PRIVILEGES",
    "AlterEventTrigStmt": "ALTER EVENT TRIGGER",
    "AlterExtensionContentsStmt": "ALTER EXTENSION ... ADD/DROP",
    "AlterFdwStmt": "ALTER FOREIGN DATA WRAPPER",
    "AlterObjectDependsStmt": "ALTER ... DEPENDS ON EXTENSION",
    "AlterObjectSchemaStmt": "ALTER ... SET SCHEMA",
    "AlterOpFamilyStmt": "ALTER OPERATOR FAMILY",
    "AlterOwnerStmt": "ALTER ... OWNER TO",
    "AlterRoleSetStmt": "ALTER ROLE ... SET",
    "AlterSeqStmt": "ALTER SEQUENCE",
    "AlterStatsStmt": "ALTER STATISTICS",
    "AlterSystemStmt": "ALTER SYSTEM",
    "AlterTSConfigurationStmt": "ALTER TEXT SEARCH CONFIGURATION",
    "AlterTSDictionaryStmt": "ALTER TEXT SEARCH DICTIONARY",
    "AlterTableMoveAllStmt": "ALTER ... ALL IN TABLESPACE",
    "AlterTableSpaceOptionsStmt": "ALTER TABLESPACE",
    "AlterTypeStmt": "ALTER TYPE",
    "CheckPointStmt": "CHECKPOINT",
    "ClosePortalStmt": "CLOSE",
    "CompositeTypeStmt": "CREATE TYPE ... AS",
    "ConstraintsSetStmt": "SET CONSTRAINTS",
    "CopyStmt": "COPY",
    "CreateAmStmt": "CREATE ACCESS METHOD",
    "CreateEnumStmt": "CREATE TYPE ... AS ENUM",
    "CreateEventTrigStmt": "CREATE EVENT TRIGGER",
    "CreateFdwStmt": "CREATE FOREIGN DATA WRAPPER",
    "CreateForeignServerStmt": "CREATE SERVER",
    "CreateOpClassStmt": "CREATE OPERATOR CLASS",
    "CreateOpFamilyStmt": "CREATE OPERATOR FAMILY",
    "CreatePLangStmt": "CREATE LANGUAGE",
    "CreateRangeStmt": "CREATE TYPE ... AS RANGE",
    "CreateSeqStmt": "CREATE SEQUENCE",
    "CreateStatsStmt": "CREATE STATISTICS",
    "CreateStmt": "CREATE TABLE",
    "CreateTableAsStmt": "CREATE TABLE AS",
    "CreateTrigStmt": "CREATE TRIGGER",
    "CreatedbStmt": "CREATE DATABASE",
    "DeallocateStmt": "DEALLOCATE",
    "DeclareCursorStmt": "DECLARE CURSOR",
    "DefineStmt": "CREATE",
    "DoStmt": "DO",
    "DropOwnedStmt": "DROP OWNED",
    "DropdbStmt": "DROP DATABASE",
    "ExecuteStmt": "EXECUTE",
    "ExplainStmt": "EXPLAIN",
    "FetchStmt": "FETCH",
    "GrantRoleStmt": "GRANT ROLE",
    "ImportForeignSchemaStmt": "IMPORT FOREIGN SCHEMA",
    "IndexStmt": "CREATE INDEX",
    "LoadStmt": "LOAD",
    "PLAssignStmt": "PL/pgSQL assignment",
    "ReassignOwnedStmt": "REASSIGN OWNED",
    "RefreshMatViewStmt": "REFRESH MATERIALIZED VIEW",
    "ReplicaIdentityStmt": "REPLICA IDENTITY",
    "ReturnStmt": "RETURN",
    "RuleStmt": "CREATE RULE",
    "SecLabelStmt": "SECURITY LABEL",
    "VariableSetStmt": "SET",
    "VariableShowStmt": "SHOW",
    "ViewStmt": "CREATE VIEW",
}

_DEFINE_KINDS = {
    enums.ObjectType.OBJECT_AGGREGATE: "CREATE AGGREGATE",
    enums.ObjectType.OBJECT_OPERATOR: "CREATE OPERATOR",
    enums.ObjectType.OBJECT_TYPE: "CREATE TYPE",
    enums.ObjectType.OBJECT_COLLATION: "CREATE COLLATION",
    enums.ObjectType.OBJECT_TSPARSER: "CREATE TEXT SEARCH PARSER",
    enums.ObjectType.OBJECT_TSDICTIONARY: "CREATE TEXT SEARCH DICTIONARY",
    enums.ObjectType.OBJECT_TSTEMPLATE: "CREATE TEXT SEARCH TEMPLATE",
    enums.ObjectType.OBJECT_TSCONFIGURATION: "CREATE TEXT SEARCH CONFIGURATION",
}
# ALTER TABLE subcommands, as written after "ALTER TABLE ... ".
ALTER_TABLE_WORDS: dict[Any, str] = {
    _AT.AT_AddColumn: "ADD COLUMN",
    _AT.AT_AddColumnToView: "ADD COLUMN",
    _AT.AT_DropColumn: "DROP COLUMN",
    _AT.AT_AlterColumnType: "ALTER COLUMN TYPE",
    _AT.AT_ColumnDefault: "ALTER COLUMN SET DEFAULT",
    _AT.AT_SetNotNull: "SET NOT NULL",
    _AT.AT_DropNotNull: "DROP NOT NULL",
    _AT.AT_SetExpression: "ALTER COLUMN SET EXPRESSION",
    _AT.AT_DropExpression: "ALTER COLUMN DROP EXPRESSION",
    _AT.AT_SetStatistics: "ALTER COLUMN SET STATISTICS",
    _AT.AT_SetOptions: "ALTER COLUMN SET (...)",
    _AT.AT_ResetOptions: "ALTER COLUMN RESET (...)",
    _AT.AT_SetStorage: "ALTER COLUMN SET STORAGE",
    _AT.AT_SetCompression: "ALTER COLUMN SET COMPRESSION",
    _AT.AT_AddConstraint: "ADD CONSTRAINT",
    _AT.AT_AddIndexConstraint: "ADD CONSTRAINT ... USING INDEX",
    _AT.AT_AlterConstraint: "ALTER CONSTRAINT",
    _AT.AT_DropConstraint: "DROP CONSTRAINT",
    _AT.AT_ValidateConstraint: "VALIDATE CONSTRAINT",
    _AT.AT_ChangeOwner: "OWNER TO",
    _AT.AT_ClusterOn: "CLUSTER ON",
    _AT.AT_DropCluster: "SET WITHOUT CLUSTER",
    _AT.AT_SetLogged: "SET LOGGED",
    _AT.AT_SetUnLogged: "SET UNLOGGED",
    _AT.AT_SetAccessMethod: "SET ACCESS METHOD",
    _AT.AT_SetTableSpace: "SET TABLESPACE",
    _AT.AT_SetRelOptions: "SET (...)",
    _AT.AT_ResetRelOptions: "RESET (...)",
    _AT.AT_EnableTrig: "ENABLE TRIGGER",
    _AT.AT_EnableAlwaysTrig: "ENABLE ALWAYS TRIGGER",
    _AT.AT_EnableReplicaTrig: "ENABLE REPLICA TRIGGER",
    _AT.AT_DisableTrig: "DISABLE TRIGGER",
    _AT.AT_EnableTrigAll: "ENABLE TRIGGER ALL",
    _AT.AT_DisableTrigAll: "DISABLE TRIGGER ALL",
    _AT.AT_EnableTrigUser: "ENABLE TRIGGER USER",
    _AT.AT_DisableTrigUser: "DISABLE TRIGGER USER",
    _AT.AT_EnableRule: "ENABLE RULE",
    _AT.AT_EnableAlwaysRule: "ENABLE ALWAYS RULE",
    _AT.AT_EnableReplicaRule: "ENABLE REPLICA RULE",
    _AT.AT_DisableRule: "DISABLE RULE",
    _AT.AT_AddInherit: "INHERIT",
    _AT.AT_DropInherit: "NO INHERIT",
    _AT.AT_AddOf: "OF",
    _AT.AT_DropOf: "NOT OF",
    _AT.AT_ReplicaIdentity: "REPLICA IDENTITY",
    _AT.AT_EnableRowSecurity: "ENABLE ROW LEVEL SECURITY",
    _AT.AT_DisableRowSecurity: "DISABLE ROW LEVEL SECURITY",
    _AT.AT_ForceRowSecurity: "FORCE ROW LEVEL SECURITY",
    _AT.AT_NoForceRowSecurity: "NO FORCE ROW LEVEL SECURITY",
    _AT.AT_GenericOptions: "OPTIONS",
    _AT.AT_AlterColumnGenericOptions: "ALTER COLUMN OPTIONS",
    _AT.AT_AttachPartition: "ATTACH PARTITION",
    _AT.AT_DetachPartition: "DETACH PARTITION",
    _AT.AT_DetachPartitionFinalize: "DETACH PARTITION FINALIZE",
    _AT.AT_AddIdentity: "ALTER COLUMN ADD GENERATED AS IDENTITY",
    _AT.AT_SetIdentity: "ALTER COLUMN SET GENERATED",
    _AT.AT_DropIdentity: "ALTER COLUMN DROP IDENTITY",
}
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")


def object_words(objtype: Any) -> str:
    """``OBJECT_MATVIEW`` -> ``MATERIALIZED VIEW`` (the words SQL uses for an object type)."""
    name = str(objtype.name).removeprefix("OBJECT_")
    return {"MATVIEW": "MATERIALIZED VIEW", "TABCONSTRAINT": "CONSTRAINT",
            "STATISTIC_EXT": "STATISTICS", "FDW": "FOREIGN DATA WRAPPER",
            "FOREIGN_SERVER": "SERVER", "DOMCONSTRAINT": "CONSTRAINT",
            "TSCONFIGURATION": "TEXT SEARCH CONFIGURATION",
            "TSDICTIONARY": "TEXT SEARCH DICTIONARY", "TSPARSER": "TEXT SEARCH PARSER",
            "TSTEMPLATE": "TEXT SEARCH TEMPLATE", "DEFACL": "DEFAULT PRIVILEGES",
            "LARGEOBJECT": "LARGE OBJECT", "AMOP": "OPERATOR", "AMPROC": "FUNCTION",
            "PUBLICATION_REL": "PUBLICATION TABLE",
            "PUBLICATION_NAMESPACE": "PUBLICATION SCHEMA"}.get(name, name.replace("_", " "))


def kind_of(node: Any) -> str:
    """Plain words for a statement node no lock handler named."""
    name = type(node).__name__
    if name == "DefineStmt":
        return _DEFINE_KINDS.get(node.kind, "CREATE")
    if name in _WORDS:
        return _WORDS[name]
    return words(name.removesuffix("Stmt"))


def words(camel: str) -> str:
    """``AlterDomain`` -> ``ALTER DOMAIN``: a last resort, never a parser name as is."""
    return " ".join(_CAMEL.split(camel)).upper()


# Statements that take no lock on any relation (they work on other kinds of objects, on the
# session, or on the transaction). With the analysis' handlers and OPAQUE_NODES this covers every
# statement pglast knows (analysis._HANDLERS has the rest); a meta-test keeps it so.
LOCK_FREE_NODES = frozenset({
    "AlterCollationStmt", "AlterDatabaseRefreshCollStmt", "AlterDatabaseSetStmt",
    "AlterDatabaseStmt", "AlterDefaultPrivilegesStmt", "AlterEventTrigStmt",
    "AlterExtensionContentsStmt", "AlterFdwStmt", "AlterForeignServerStmt",
    "AlterFunctionStmt", "AlterOpFamilyStmt", "AlterOperatorStmt", "AlterOwnerStmt",
    "AlterRoleSetStmt", "AlterRoleStmt", "AlterSubscriptionStmt", "AlterSystemStmt",
    "AlterTSConfigurationStmt", "AlterTSDictionaryStmt", "AlterTableSpaceOptionsStmt",
    "AlterTypeStmt", "AlterUserMappingStmt", "CheckPointStmt", "ClosePortalStmt",
    "CompositeTypeStmt", "ConstraintsSetStmt", "CreateAmStmt", "CreateCastStmt",
    "CreateConversionStmt", "CreateDomainStmt", "CreateEnumStmt", "CreateEventTrigStmt",
    "CreateExtensionStmt", "CreateFdwStmt", "CreateForeignServerStmt", "CreateOpClassStmt",
    "CreateOpFamilyStmt", "CreatePLangStmt", "CreateRangeStmt", "CreateRoleStmt",
    "CreateSubscriptionStmt", "CreateTableSpaceStmt", "CreateTransformStmt",
    "CreateUserMappingStmt", "CreatedbStmt", "DeallocateStmt", "DefineStmt", "DiscardStmt",
    "DropRoleStmt", "DropSubscriptionStmt", "DropTableSpaceStmt", "DropUserMappingStmt",
    "DropdbStmt", "FetchStmt", "GrantRoleStmt", "ListenStmt", "LoadStmt", "NotifyStmt",
    "PLAssignStmt", "ReplicaIdentityStmt", "ReturnStmt", "SetOperationStmt", "UnlistenStmt",
    "VariableSetStmt", "VariableShowStmt", "RawStmt",
})
# Statements whose locks their text cannot tell: they run code (DO, CALL, EXECUTE, an
# extension's update script) or act on whatever a role or tablespace holds.
OPAQUE_NODES = frozenset({"DoStmt", "CallStmt", "ExecuteStmt", "DropOwnedStmt",
                          "ReassignOwnedStmt", "AlterTableMoveAllStmt", "AlterExtensionStmt",
                          "ImportForeignSchemaStmt"})
