//! agy's conversation-database schema (agy 1.2.x), byte for byte.
//!
//! fake-agy creates databases from these statements, the recording format
//! names tables and key columns from them, and drift compares a database's
//! `sqlite_master` text against them. Keeping one copy here means the fake
//! and the real thing cannot drift apart unnoticed.

/// The `CREATE` statements exactly as agy's `sqlite_master` holds them
/// (docs/agy-format.md, "Schema"), in creation order.
pub const DDL: &[&str] = &[
    "CREATE TABLE `trajectory_meta` (`trajectory_id` text,`cascade_id` text,`trajectory_type` integer,`source` integer,PRIMARY KEY (`trajectory_id`))",
    "CREATE TABLE `steps` (`idx` integer,`step_type` integer NOT NULL DEFAULT 0,`status` integer NOT NULL DEFAULT 0,`has_subtrajectory` numeric NOT NULL DEFAULT false,`metadata` blob,`error_details` blob,`permissions` blob,`task_details` blob,`render_info` blob,`step_payload` blob,`step_format` integer NOT NULL DEFAULT 0,PRIMARY KEY (`idx`))",
    "CREATE INDEX `idx_steps_status` ON `steps`(`status`)",
    "CREATE INDEX `idx_steps_step_type` ON `steps`(`step_type`)",
    "CREATE TABLE `gen_metadata` (`idx` integer,`data` blob,`size` integer NOT NULL DEFAULT 0,PRIMARY KEY (`idx`))",
    "CREATE TABLE `executor_metadata` (`idx` integer,`data` blob,PRIMARY KEY (`idx`))",
    "CREATE TABLE `parent_references` (`idx` integer,`data` blob,PRIMARY KEY (`idx`))",
    "CREATE TABLE `trajectory_metadata_blob` (`id` text DEFAULT \"main\",`data` blob,PRIMARY KEY (`id`))",
    "CREATE TABLE `battle_mode_infos` (`idx` integer,`data` blob,PRIMARY KEY (`idx`))",
];

/// The legacy 4-column `steps` table older tools and tests use.
pub const LEGACY_STEPS_DDL: &str =
    "CREATE TABLE steps (idx INTEGER PRIMARY KEY, step_type INTEGER NOT NULL DEFAULT 0, status INTEGER NOT NULL DEFAULT 0, step_payload BLOB)";

/// Tables of the real schema and their primary-key columns.
pub const TABLES: &[(&str, &[&str])] = &[
    ("trajectory_meta", &["trajectory_id"]),
    ("steps", &["idx"]),
    ("gen_metadata", &["idx"]),
    ("executor_metadata", &["idx"]),
    ("parent_references", &["idx"]),
    ("trajectory_metadata_blob", &["id"]),
    ("battle_mode_infos", &["idx"]),
];

/// Tables whose key is a step-like index that continues across turns.
pub const IDX_TABLES: &[&str] = &[
    "steps",
    "gen_metadata",
    "executor_metadata",
    "parent_references",
    "battle_mode_infos",
];

/// The primary-key columns of `table`, if it is one of agy's.
pub fn key_columns(table: &str) -> Option<&'static [&'static str]> {
    TABLES.iter().find(|(t, _)| *t == table).map(|(_, k)| *k)
}

/// Create the full schema in an empty database.
#[cfg(feature = "sqlite")]
pub fn create(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    for stmt in DDL {
        conn.execute(stmt, [])?;
    }
    Ok(())
}

/// The `sqlite_master` SQL of a database, in creation order, skipping
/// SQLite's own objects.
#[cfg(feature = "sqlite")]
pub fn master_sql(conn: &rusqlite::Connection) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare(
        "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid",
    )?;
    let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
    rows.collect()
}

/// Table name -> its columns, as the database declares them.
#[cfg(feature = "sqlite")]
pub fn columns(conn: &rusqlite::Connection, table: &str) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare("SELECT name FROM pragma_table_info(?1) ORDER BY cid")?;
    let rows = stmt.query_map([table], |r| r.get::<_, String>(0))?;
    rows.collect()
}

/// Quote an identifier for SQL text (table and column names from recordings
/// are data, so they are never pasted in raw).
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
