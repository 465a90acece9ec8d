//! A conversation database read the way every reader of agy-bridge reads it
//! (behind the `sqlite` feature): opened read-only with `query_only`,
//! never created, and its `steps` rows taken whole ([`read_all`]) or by the
//! live poller's own queries ([`StepColumns::select`], [`to_row`], or
//! [`to_row_ref`] to decode a row where SQLite holds it).
//!
//! One copy here, below everything that opens agy's files, so the live
//! poller, `decode`, drift, the recorder and fake-agy's tests open a
//! database the same way and can never write, hold a transaction or
//! checkpoint where agy would notice.

use crate::steps::{StepRow, StepRowRef};
use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};

/// Why a database could not be read; all of these are "not ready yet" for a
/// live run (agy may not have created the file or the table), and real
/// errors for a one-shot read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("database {path} does not exist")]
    Missing { path: PathBuf },
    #[error("database {path} has no `steps` table (yet)")]
    NoStepsTable { path: PathBuf },
    #[error("database {path} is locked")]
    Locked { path: PathBuf },
    #[error("cannot read database {path}: {source}")]
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },
}

impl ReadError {
    /// `source` as what it means for a reader: [`ReadError::Locked`] when
    /// the database is busy or locked, else [`ReadError::Sqlite`].
    pub fn from_sqlite(path: &Path, source: rusqlite::Error) -> ReadError {
        if let rusqlite::Error::SqliteFailure(e, _) = &source {
            if matches!(
                e.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ) {
                return ReadError::Locked {
                    path: path.to_path_buf(),
                };
            }
        }
        ReadError::Sqlite {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Open a conversation database read-only, never creating it.
pub fn open_read_only(path: &Path) -> Result<Connection, ReadError> {
    if !path.is_file() {
        return Err(ReadError::Missing {
            path: path.to_path_buf(),
        });
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| ReadError::from_sqlite(path, e))?;
    conn.busy_timeout(std::time::Duration::from_millis(25))
        .and_then(|_| conn.pragma_update(None, "query_only", 1))
        .map_err(|e| ReadError::from_sqlite(path, e))?;
    Ok(conn)
}

/// Which optional `steps` columns a database has (legacy tables have none).
#[derive(Debug, Clone, Copy, Default)]
pub struct StepColumns {
    extended: bool,
}

impl StepColumns {
    /// The columns of `conn`'s `steps` table; no table is [`ReadError::NoStepsTable`].
    pub fn detect(conn: &Connection, path: &Path) -> Result<StepColumns, ReadError> {
        let cols =
            crate::schema::columns(conn, "steps").map_err(|e| ReadError::from_sqlite(path, e))?;
        if cols.is_empty() {
            return Err(ReadError::NoStepsTable {
                path: path.to_path_buf(),
            });
        }
        let has = |c: &str| cols.iter().any(|x| x == c);
        Ok(StepColumns {
            extended: ["metadata", "error_details", "permissions", "task_details"]
                .iter()
                .all(|c| has(c)),
        })
    }

    /// The SELECT of every step column this table has (NULL for the others).
    pub fn select(&self) -> &'static str {
        if self.extended {
            "SELECT idx, step_type, status, step_payload, metadata, error_details, permissions, task_details FROM steps"
        } else {
            "SELECT idx, step_type, status, step_payload, NULL, NULL, NULL, NULL FROM steps"
        }
    }
}

fn blob<'r>(row: &'r rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Option<&'r [u8]>> {
    use rusqlite::types::ValueRef;
    Ok(match row.get_ref(i)? {
        ValueRef::Null => None,
        ValueRef::Blob(b) | ValueRef::Text(b) => Some(b),
        ValueRef::Integer(_) | ValueRef::Real(_) => None,
    })
}

/// One row of [`StepColumns::select`], borrowed where SQLite holds it (until
/// the statement steps on): the live poller decodes it there.
pub fn to_row_ref<'r>(row: &'r rusqlite::Row<'_>) -> rusqlite::Result<StepRowRef<'r>> {
    Ok(StepRowRef {
        idx: row.get(0)?,
        step_type: row.get::<_, Option<i64>>(1)?.unwrap_or(0),
        status: row.get::<_, Option<i64>>(2)?.unwrap_or(0),
        payload: blob(row, 3)?,
        metadata: blob(row, 4)?,
        error_details: blob(row, 5)?,
        permissions: blob(row, 6)?,
        task_details: blob(row, 7)?,
    })
}

/// One row of [`StepColumns::select`] as a [`StepRow`].
pub fn to_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<StepRow> {
    to_row_ref(row).map(|r| r.to_owned_row())
}

/// Read every step of a database in idx order (one-shot, for `decode`).
pub fn read_all(conn: &Connection, path: &Path) -> Result<Vec<StepRow>, ReadError> {
    let cols = StepColumns::detect(conn, path)?;
    let mut stmt = conn
        .prepare(&format!("{} ORDER BY idx", cols.select()))
        .map_err(|e| ReadError::from_sqlite(path, e))?;
    let rows = stmt
        .query_map([], to_row)
        .map_err(|e| ReadError::from_sqlite(path, e))?;
    rows.collect::<Result<Vec<_>, _>>()
        .map_err(|e| ReadError::from_sqlite(path, e))
}
