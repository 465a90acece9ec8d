//! Whole databases as data: every row of every table, read in one
//! transaction, and the writes that turn one such snapshot into the next.
//! The recorder captures commits with it and drift fingerprints with it; it
//! depends on neither.

use crate::recording::{Op, SqlValue, Write};
use agy_format::schema;
use agy_format::steps::StepRow;
use agy_format::steps::{Step, StepType};
use agy_format::wire::Encoder;
use rusqlite::Connection;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One row: its key columns and every other column.
#[derive(Debug, Clone, PartialEq)]
pub struct RowData {
    pub key: BTreeMap<String, SqlValue>,
    pub values: BTreeMap<String, SqlValue>,
}

/// Every row of one table, in key order.
#[derive(Debug, Clone, PartialEq)]
pub struct TableRows {
    pub name: String,
    pub key_columns: Vec<String>,
    pub columns: Vec<String>,
    pub rows: Vec<RowData>,
}

/// A `steps` row of a snapshot or a write (its key and other columns) as a
/// reader of the database sees it: text read as bytes, as SQLite gives it;
/// a missing or non-integer number is 0.
pub fn step_row(key: &BTreeMap<String, SqlValue>, values: &BTreeMap<String, SqlValue>) -> StepRow {
    let get = |c: &str| key.get(c).or_else(|| values.get(c));
    let int = |c: &str| get(c).and_then(SqlValue::as_i64).unwrap_or(0);
    let blob = |c: &str| match get(c) {
        Some(SqlValue::Blob(b)) => Some(b.clone()),
        Some(SqlValue::Text(t)) => Some(t.as_bytes().to_vec()),
        _ => None,
    };
    StepRow {
        idx: int("idx"),
        step_type: int("step_type"),
        status: int("status"),
        payload: blob("step_payload"),
        metadata: blob("metadata"),
        error_details: blob("error_details"),
        permissions: blob("permissions"),
        task_details: blob("task_details"),
    }
}

/// The full-row write of a step, as agy's ORM saves it.
pub fn step_write(step: &Step) -> Write {
    let row = step.to_row();
    let mut values = BTreeMap::new();
    values.insert("step_type".into(), SqlValue::Integer(row.step_type));
    values.insert("status".into(), SqlValue::Integer(row.status));
    values.insert(
        "has_subtrajectory".into(),
        SqlValue::Integer(i64::from(step.step_type == StepType::InvokeSubagent)),
    );
    if let Some(m) = row.metadata {
        values.insert("metadata".into(), SqlValue::Blob(m));
    }
    if let Some(e) = step.errors.first() {
        let mut enc = Encoder::new();
        enc.string(1, &e.message);
        if let Some(d) = &e.detail {
            enc.string(2, d);
        }
        values.insert("error_details".into(), SqlValue::Blob(enc.finish()));
    }
    if let Some(p) = row.payload {
        values.insert("step_payload".into(), SqlValue::Blob(p));
    }
    values.insert("step_format".into(), SqlValue::Integer(1));
    let mut key = BTreeMap::new();
    key.insert("idx".into(), SqlValue::Integer(step.idx));
    Write {
        table: "steps".into(),
        op: Default::default(),
        key,
        values,
        stream_error: None,
    }
}

/// The key columns of `table`: agy's own (from [`schema::TABLES`]), else the
/// declared primary key, else SQLite's `rowid`.
fn key_columns_of(conn: &Connection, table: &str) -> rusqlite::Result<Vec<String>> {
    if let Some(keys) = schema::key_columns(table) {
        return Ok(keys.iter().map(|k| k.to_string()).collect());
    }
    let mut stmt =
        conn.prepare("SELECT name FROM pragma_table_info(?1) WHERE pk > 0 ORDER BY pk")?;
    let pk: Vec<String> = stmt
        .query_map([table], |r| r.get::<_, String>(0))?
        .collect::<Result<_, _>>()?;
    Ok(if pk.is_empty() {
        vec!["rowid".to_string()]
    } else {
        pk
    })
}

/// The tables of a database, in creation order (SQLite's own excluded).
pub(crate) fn table_names(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid",
    )?;
    let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
    rows.collect()
}

/// Read every row of every table. Call inside one read transaction so that
/// all tables come from the same commit.
pub fn read_tables(conn: &Connection) -> rusqlite::Result<Vec<TableRows>> {
    let mut out = Vec::new();
    for name in table_names(conn)? {
        let columns = schema::columns(conn, &name)?;
        let key_columns = key_columns_of(conn, &name)?;
        let value_columns: Vec<&String> = columns
            .iter()
            .filter(|c| !key_columns.contains(c))
            .collect();
        let select: Vec<String> = key_columns
            .iter()
            .chain(value_columns.iter().copied())
            .map(|c| schema::quote_ident(c))
            .collect();
        let order: Vec<String> = key_columns.iter().map(|c| schema::quote_ident(c)).collect();
        let sql = format!(
            "SELECT {} FROM {} ORDER BY {}",
            select.join(","),
            schema::quote_ident(&name),
            order.join(",")
        );
        let mut stmt = conn.prepare(&sql)?;
        let nkeys = key_columns.len();
        let rows = stmt
            .query_map([], |r| {
                let mut key = BTreeMap::new();
                let mut values = BTreeMap::new();
                for (i, c) in key_columns.iter().enumerate() {
                    key.insert(c.clone(), SqlValue::from_ref(r.get_ref(i)?));
                }
                for (j, c) in value_columns.iter().enumerate() {
                    values.insert((*c).clone(), SqlValue::from_ref(r.get_ref(nkeys + j)?));
                }
                Ok(RowData { key, values })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        out.push(TableRows {
            name,
            key_columns,
            columns,
            rows,
        });
    }
    Ok(out)
}

fn key_string(key: &BTreeMap<String, SqlValue>) -> String {
    serde_json::to_string(key).unwrap_or_default()
}

/// The writes that turn `prev` (nothing when `None`) into `cur`: full-row
/// upserts for new or changed rows, in table and key order, then deletes.
pub fn diff_tables(prev: Option<&[TableRows]>, cur: &[TableRows]) -> Vec<Write> {
    let mut writes = Vec::new();
    let prev_map: HashMap<&str, HashMap<String, &RowData>> = prev
        .unwrap_or(&[])
        .iter()
        .map(|t| {
            (
                t.name.as_str(),
                t.rows.iter().map(|r| (key_string(&r.key), r)).collect(),
            )
        })
        .collect();
    for table in cur {
        let before = prev_map.get(table.name.as_str());
        for row in &table.rows {
            let old = before.and_then(|m| m.get(&key_string(&row.key)));
            if old.map(|o| o.values != row.values).unwrap_or(true) {
                writes.push(Write {
                    table: table.name.clone(),
                    op: Op::Upsert,
                    key: row.key.clone(),
                    values: row.values.clone(),
                    stream_error: None,
                });
            }
        }
    }
    for table in prev.unwrap_or(&[]) {
        let now: BTreeSet<String> = cur
            .iter()
            .find(|t| t.name == table.name)
            .map(|t| t.rows.iter().map(|r| key_string(&r.key)).collect())
            .unwrap_or_default();
        for row in &table.rows {
            if !now.contains(&key_string(&row.key)) {
                writes.push(Write {
                    table: table.name.clone(),
                    op: Op::Delete,
                    key: row.key.clone(),
                    values: BTreeMap::new(),
                    stream_error: None,
                });
            }
        }
    }
    writes
}
